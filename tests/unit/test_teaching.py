"""The teacher's path: every scenario in one group, a lesson's nodes, a run's recorded length."""

from __future__ import annotations

import json

from engine.scenarios.scenario import list_scenarios, load_scenario
from engine.teach import teaching
from engine.teach.lesson import Lesson, Step, list_lessons, load_lesson


def test_every_scenario_file_is_in_exactly_one_group_and_every_group_name_is_a_file() -> None:
    grouped = [name for group in teaching.GROUPS for name in group.scenarios]
    assert sorted(grouped) == sorted(list_scenarios()), "engine/teach/teaching.py's GROUPS"
    assert teaching.grouped_scenario_names()[: len(grouped)] == grouped


def step(scenario: str) -> Step:
    return Step(
        scenario=scenario,
        question="?",
        options=[
            {"text": "a", "when": [{"level": "at-least-once", "field": "lost", "expect": "0"}]},
            {"text": "b", "when": [{"level": "at-least-once", "field": "lost", "expect": ">=1"}]},
        ],
        answer="a",
        explain=".",
    )


def test_a_lesson_needs_the_nodes_of_its_largest_step() -> None:
    one_node = [n for n, p in list_scenarios().items() if load_scenario(p).nodes == 1][:2]
    three = next(n for n, p in list_scenarios().items() if load_scenario(p).nodes == 3)
    assert teaching.lesson_nodes(Lesson(title="t", steps=[step(n) for n in one_node])) == 1
    mixed = Lesson(title="t", steps=[*(step(n) for n in one_node), step(three)])
    assert teaching.lesson_nodes(mixed) == 3


def test_the_first_lesson_comes_first_with_the_nodes_its_steps_need() -> None:
    plans = teaching.lesson_plans()
    assert plans[0].name == teaching.FIRST_LESSON
    assert sorted(p.name for p in plans) == sorted(list_lessons())
    for plan in plans:
        lesson = load_lesson(list_lessons()[plan.name])
        needed = {load_scenario(list_scenarios()[s.scenario]).nodes for s in lesson.steps}
        assert plan.nodes == max(needed)
        assert plan.steps == len(lesson.steps)


def test_a_runs_length_spans_its_levels_from_the_recorded_run(tmp_path, monkeypatch) -> None:
    levels = {
        "a": {"started_at": 100.0, "duration_s": 4.0},
        "b": {"started_at": 101.0, "duration_s": 5.5},
    }
    (tmp_path / "made-up.json").write_text(json.dumps({"results": levels}))
    monkeypatch.setattr(teaching, "recorded_dir", lambda: tmp_path)
    teaching.recorded_seconds.cache_clear()
    try:
        assert teaching.recorded_seconds("made-up") == 6.5  # 100.0 to 106.5, not 4 + 5.5
        assert teaching.recorded_seconds("never-recorded") is None
    finally:
        teaching.recorded_seconds.cache_clear()
    assert teaching.describe_seconds(None) == "length not recorded"
    assert teaching.describe_seconds(6.5) == "about 6 s"
    assert teaching.describe_seconds(151.0) == "about 3 min"


def test_every_scenario_has_a_recorded_length() -> None:
    missing = [n for n in list_scenarios() if teaching.recorded_seconds(n) is None]
    assert not missing, "record them: python -m tests.data.record " + " ".join(missing)
