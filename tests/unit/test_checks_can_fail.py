"""Every check can fail: a lesson step's check and a scenario's `teaches` bound hold on the
scenario's recorded run, and fail on another level or scenario of the recorded runs.

A check that no run could break teaches nothing (the reorder count once counted first copies
only, so `reordered = 0` held even on retry-reorder's own run). The recorded runs are real:
`python -m tests.data.record` runs every scenario on the embedded cluster (and a control
run without faults, for a bound no other run breaks) and keeps each one's results in
tests/data/recorded/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.scenarios.scenario import count_of, list_scenarios, load_scenario, meets
from engine.teach.lesson import list_lessons, load_lesson

RECORDED = Path(__file__).parent.parent / "data" / "recorded"


def recorded() -> dict[str, dict[str, dict[str, Any]]]:
    return {p.stem: json.loads(p.read_text())["results"] for p in sorted(RECORDED.glob("*.json"))}


RUNS = recorded()


def where_it_fails(scenario: str, level: str, field: str, bound: str) -> list[str]:
    """(scenario / level) of the recorded runs where the bound does not hold: the same
    scenario's other levels first, then the same level elsewhere, then any level."""
    own = [(scenario, other) for other in RUNS[scenario] if other != level]
    same_level = [(name, level) for name in RUNS if name != scenario and level in RUNS[name]]
    rest = [(name, other) for name in RUNS for other in RUNS[name] if name != scenario]
    found = []
    for name, other in own + same_level + rest:
        value = count_of(RUNS[name][other], field)
        if value is not None and not meets(value, bound):
            found.append(f"{name} / {other}")
    return found


def test_every_scenario_has_a_recorded_run() -> None:
    from tests.data.record import CONTROLS

    assert set(RUNS) == set(list_scenarios()) | set(CONTROLS), (
        "run `python -m tests.data.record NAME`"
    )


LESSON_STEPS = [
    (name, index, step)
    for name, path in sorted(list_lessons().items())
    for index, step in enumerate(load_lesson(path).steps)
]


# A lesson step's options are judged against the outcome each wrong option predicts in
# tests/unit/test_lesson_checks.py; here the answer's conditions must also fail somewhere in
# the recorded runs, so none of them is a bound every run meets.
@pytest.mark.parametrize(
    "step", [s for _, _, s in LESSON_STEPS], ids=[f"{n}-{i}" for n, i, _ in LESSON_STEPS]
)
def test_a_lesson_answer_holds_on_its_run_and_fails_elsewhere(step) -> None:
    answer = step.expected
    assert answer.holds(RUNS[step.scenario]) is True, (step.scenario, answer.describe())
    assert any(where_it_fails(step.scenario, c.level, c.field, c.expect) for c in answer.when), (
        f"{step.scenario}: {answer.describe()} holds on every recorded run"
    )


TEACHES = [
    (name, level, field, bound)
    for name, path in sorted(list_scenarios().items())
    for level, fields in load_scenario(path).teaches.items()
    for field, bound in fields.items()
]


@pytest.mark.parametrize("entry", TEACHES, ids=["-".join(t[:3]) for t in TEACHES])
def test_a_teaches_bound_holds_on_its_run_and_fails_elsewhere(entry) -> None:
    scenario, level, field, bound = entry
    assert meets(count_of(RUNS[scenario][level], field), bound), entry
    assert where_it_fails(scenario, level, field, bound), f"{entry} holds on every recorded run"


def test_leader_moves_order_check_fails_where_a_retry_lands_after_later_ids() -> None:
    step = next(s for _, _, s in LESSON_STEPS if s.scenario == "leader-moves")
    assert [c.field for c in step.expected.when] == ["reordered"]
    assert step.expected.holds(RUNS["leader-moves"])
    assert step.expected.holds(RUNS["retry-reorder"]) is False
    assert RUNS["retry-reorder"]["at-least-once"]["duplicates"] >= 1
