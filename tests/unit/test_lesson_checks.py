"""A lesson's options are predicates on the run: the run, not the option's label, decides
which one happened, and a file whose options could both hold on one outcome never loads.

The recorded runs (tests/data/recorded/, real runs on the embedded cluster) must satisfy
exactly the step's answer; for every wrong option, the outcome it predicts (the recorded run
changed just enough for that option to hold) must satisfy that option and not the answer.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from engine.judging.judge import Effects
from engine.scenarios.scenario import list_scenarios, load_scenario
from engine.teach.lesson import (
    EFFECT_COUNTS,
    Condition,
    LessonError,
    LessonProgress,
    Option,
    Step,
    WhatIf,
    judge_prediction,
    list_lessons,
    load_lesson,
    outcome_of,
)

RECORDED = Path(__file__).parent.parent / "data" / "recorded"
RUNS: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text())["results"] for p in sorted(RECORDED.glob("*.json"))
}
STEPS = [
    (name, index, step)
    for name, path in sorted(list_lessons().items())
    for index, step in enumerate(load_lesson(path).steps)
]
IDS = [f"{name}-{index}-{step.scenario}" for name, index, step in STEPS]
WRONG = [
    (name, index, step, option)
    for name, index, step in STEPS
    for option in step.options
    if option.text != step.answer
]
WRONG_IDS = [f"{n}-{i}-{s.scenario}-{o.text}" for n, i, s, o in WRONG]

RESULTS = {"at-least-once": {"duplicates": 5, "lost": 0}}


def condition(level: str, field: str, expect: str) -> Condition:
    return Condition(level=level, field=field, expect=expect)


@pytest.mark.parametrize(
    ("expect", "holds"),
    [("5", True), ("4", False), (">=1", True), (">=6", False), ("<=5", True), ("<=4", False)],
)
def test_a_condition_compares_as_expect_does(expect, holds):
    assert condition("at-least-once", "duplicates", expect).holds(RESULTS) is holds


def test_a_condition_on_a_level_the_run_lacks_is_undecided():
    assert condition("exactly-once", "lost", "0").holds(RESULTS) is None


@pytest.mark.parametrize("expect", ["", "about 3", "=>1", "1.5"])
def test_a_malformed_expectation_is_refused(expect):
    with pytest.raises(ValidationError):
        condition("at-least-once", "duplicates", expect)


def test_a_condition_on_a_count_the_judge_does_not_produce_is_refused():
    with pytest.raises(ValidationError, match="'duplicate' is not a count"):
        condition("at-least-once", "duplicate", ">=1")


def test_the_effect_counts_are_the_judges():
    ints = {f.name for f in dataclasses.fields(Effects) if f.type in ("int", int)}
    assert set(EFFECT_COUNTS) == ints


@pytest.mark.parametrize("step", [s for _, _, s in STEPS], ids=IDS)
def test_the_recorded_run_satisfies_exactly_the_answer(step: Step):
    results = RUNS[step.scenario]
    held = [o.text for o in step.options if o.holds(results) is True]
    assert held == [step.answer], (step.scenario, held)
    assert not step.contradicted(results), [c.describe() for c in step.contradicted(results)]


@pytest.mark.parametrize(("lesson", "index", "step", "wrong"), WRONG, ids=WRONG_IDS)
def test_the_outcome_of_every_wrong_option_is_rejected(lesson, index, step: Step, wrong):
    """The room's wrong answer, had it happened, is what the page reports: not the answer."""
    predicted = outcome_of(wrong, RUNS[step.scenario])
    assert wrong.holds(predicted) is True
    assert step.expected.holds(predicted) is False, (step.scenario, wrong.text)
    assert step.outcome(predicted) == wrong
    # A room that chose the answer is told it was wrong, by the run, not by the label.
    verdict = judge_prediction(step, step.answer, predicted)
    assert not verdict.room_right and not verdict.usual
    assert f"the run shows “{wrong.text}”" in verdict.headline()
    assert judge_prediction(step, wrong.text, predicted).room_right


def test_a_run_matching_no_option_is_said_so():
    step = next(s for _, _, s in STEPS if s.scenario == "ack-loss")
    both = {"at-least-once": {"duplicates": 2, "lost": 0}}  # three copies: no option says so
    verdict = judge_prediction(step, "two", both)
    assert verdict.shown is None and not verdict.room_right
    assert "matches none of the options" in verdict.headline()


def lesson_file(tmp_path: Path, options: list[dict[str, Any]], **step: Any) -> Path:
    path = tmp_path / "made-up.yaml"
    body = {
        "scenario": "ack-loss",
        "question": "?",
        "options": options,
        "answer": options[0]["text"],
        "explain": ".",
        **step,
    }
    path.write_text(yaml.safe_dump({"title": "t", "steps": [body]}))
    return path


def test_options_that_can_both_hold_are_refused_when_the_file_loads(tmp_path):
    dup = {"level": "at-least-once", "field": "duplicates"}
    path = lesson_file(
        tmp_path,
        [
            {"text": "two", "when": [{**dup, "expect": ">=1"}]},
            {"text": "three", "when": [{**dup, "expect": "<=2"}]},
        ],
    )
    with pytest.raises(LessonError, match="options 'two' and 'three' both hold when"):
        load_lesson(path)


def test_options_on_different_counts_overlap_unless_one_count_separates_them(tmp_path):
    lost = {"level": "at-least-once", "field": "lost", "expect": ">=1"}
    dup = {"level": "at-least-once", "field": "duplicates", "expect": ">=1"}
    with pytest.raises(LessonError, match="both hold"):
        load_lesson(
            lesson_file(tmp_path, [{"text": "a", "when": [lost]}, {"text": "b", "when": [dup]}])
        )
    separated = [
        {"text": "a", "when": [lost]},
        {"text": "b", "when": [dup, {**lost, "expect": "0"}]},
    ]
    assert load_lesson(lesson_file(tmp_path, separated)).steps[0].options[1].text == "b"


def test_an_explanation_citing_an_unknown_count_is_refused(tmp_path):
    options = [
        {"text": "a", "when": [{"level": "at-least-once", "field": "lost", "expect": "0"}]},
        {"text": "b", "when": [{"level": "at-least-once", "field": "lost", "expect": ">=1"}]},
    ]
    with pytest.raises(LessonError, match="not a count"):
        load_lesson(lesson_file(tmp_path, options, explain="{at-least-once.dupes}"))


def test_the_explanation_takes_its_counts_from_the_run():
    step = next(s for _, _, s in STEPS if s.scenario == "consumer-crash")
    text = step.explanation({"at-least-once": {"duplicates": 7}, "at-most-once": {"lost": 3}})
    assert "Duplicates = 7" in text and "Lost = 3" in text
    assert "{" not in text


# A count named the way the explanations name them: "Duplicates = 5", "Lost = 20".
LITERAL = re.compile(r"\b([A-Z][a-z]+(?: [a-z]+)?) = (\d+)\b")


@pytest.mark.parametrize("step", [s for _, _, s in STEPS], ids=IDS)
def test_every_count_an_explanation_states_is_the_runs_or_checked(step: Step):
    """A literal count in an explanation is pinned by the answer or a claim (both checked
    against the run before the explanation is shown as its own); all others are `{...}`."""
    pinned = {
        (c.field.replace("_", " "), c.expect.strip()) for c in (*step.expected.when, *step.claims)
    }
    for name, value in LITERAL.findall(step.explain):
        assert (name.lower(), value) in pinned, f"{step.scenario}: '{name} = {value}' is literal"


def test_a_claim_the_run_breaks_keeps_the_explanation_from_being_the_runs():
    step = next(s for _, _, s in STEPS if s.scenario == "consumer-crash")
    run = {
        "at-least-once": {"duplicates": 5, "lost": 0},
        "at-most-once": {"lost": 0},  # the explanation says at-most-once lost some
        "exactly-once": {"duplicates": 0, "lost": 0},
    }
    assert judge_prediction(step, "duplicates", run).room_right
    assert [c.describe() for c in step.contradicted(run)] == ["lost >= 1 at at-most-once"]


def test_every_step_names_levels_its_scenario_runs():
    for name, _, step in STEPS:
        levels = load_scenario(list_scenarios()[step.scenario]).levels
        for c in (*[c for o in step.options for c in o.when], *step.claims):
            assert c.level in levels, (name, step.scenario, c.level)


def test_lesson_minutes_add_up():
    for name, path in list_lessons().items():
        lesson = load_lesson(path)
        assert sum(step.minutes for step in lesson.steps) <= lesson.minutes, name


def test_the_progress_of_a_lesson_keeps_each_steps_prediction_and_runs():
    progress = LessonProgress(lesson="delivery-guarantees")
    progress.at(0).vote = "two"
    progress.at(0).runs.append("run-1")
    progress.step = 3
    assert progress.at(0).vote == "two" and progress.at(0).runs == ["run-1"]
    assert progress.at(3).vote is None and not progress.at(3).locked


def test_an_option_holds_only_when_every_condition_does():
    option = Option(
        text="x",
        when=[
            condition("at-least-once", "duplicates", ">=1"),
            condition("at-least-once", "lost", "0"),
        ],
    )
    assert option.holds(RESULTS) is True
    assert option.holds({"at-least-once": {"duplicates": 5, "lost": 1}}) is False
    assert option.holds({"at-least-once": {"duplicates": 5}}) is None


def test_the_fidelity_benchmark_lists_the_explanations_a_run_contradicts():
    from benchmarks.fidelity import lesson_contradictions

    assert lesson_contradictions("consumer-crash", RUNS["consumer-crash"]) == []
    changed = {**RUNS["consumer-crash"], "at-most-once": {**RUNS["consumer-crash"]["at-most-once"]}}
    changed["at-most-once"]["lost"] = 0
    assert lesson_contradictions("consumer-crash", changed) == [
        "delivery-guarantees: lost >= 1 at at-most-once (the run: 0)"
    ]


def test_the_fidelity_benchmark_judges_explanations_only_where_a_lesson_runs():
    """A lesson step runs its scenario file unchanged, so only that point can show its text."""
    from benchmarks.fidelity import grid, is_lesson_point

    for name, path in list_scenarios().items():
        scenario = load_scenario(path)
        own = [point for point in grid(scenario) if is_lesson_point(scenario, point)]
        assert len(own) == 1, name
        workload = scenario.workload
        assert (own[0].commit_every, own[0].partitions, own[0].processing_ms) == (
            workload.commit_every,
            workload.partitions,
            workload.processing_ms,
        )


LOST_OPTIONS = [
    {"text": "a", "when": [{"level": "at-least-once", "field": "lost", "expect": "0"}]},
    {"text": "b", "when": [{"level": "at-least-once", "field": "lost", "expect": ">=1"}]},
]


@pytest.mark.parametrize(
    ("scenario", "what_if", "refusal"),
    [
        # The processor pipeline's roles are librdkafka's: no producer client to change.
        ("consumer-crash", {"label": "Java", "client": "java"}, "the what-if cannot run"),
        # ack-loss has no on_java note: a what-if there needs its own explanation.
        ("ack-loss", {"label": "Java", "client": "java"}, "no on_java note"),
        ("ack-loss", {"label": "J", "client": "java", "explain": "{exactly-once.dupes}"}, "count"),
        ("ack-loss", {"label": "Java", "explain": ".", "client": "go"}, "client"),
        # A what-if changes something, and one that is not the Java client's explains itself.
        ("ack-loss", {"label": "nothing", "explain": "."}, "changes something"),
        ("ack-loss", {"label": "RU", "sink_isolation": "read_uncommitted"}, "its own explain"),
        ("ack-loss", {"label": "RU", "sink_isolation": "dirty", "explain": "."}, "sink_isolation"),
    ],
)
def test_a_what_if_that_cannot_run_or_explain_is_refused_when_the_file_loads(
    tmp_path, scenario, what_if, refusal
):
    path = lesson_file(tmp_path, LOST_OPTIONS, scenario=scenario, what_if=what_if)
    with pytest.raises(LessonError, match=refusal):
        load_lesson(path)


def test_a_what_if_runs_its_scenario_on_the_java_client_with_its_own_explanation(tmp_path):
    step = load_lesson(
        lesson_file(
            tmp_path,
            LOST_OPTIONS,
            what_if={
                "label": "Java",
                "client": "java",
                "explain": "Duplicates = {at-least-once.duplicates}.",
            },
        )
    ).steps[0]
    assert step.what_if_scenario().client == "java"
    assert step.what_if_explanation(RESULTS) == "Duplicates = 5."
    # Without its own explanation, the scenario's on_java note (leader-moves has one).
    leader_moves = next(s for _, _, s in STEPS if s.scenario == "leader-moves")
    note = load_scenario(list_scenarios()["leader-moves"]).on_java.note
    assert leader_moves.what_if_explanation(RESULTS) == note
    assert leader_moves.what_if.contradicted({"at-least-once": {"lost": 1}})


def test_a_what_if_reads_every_sink_at_another_isolation_and_drops_what_the_file_expected_there(
    tmp_path,
):
    """ack-loss's what-if at read_committed: the levels whose sink read at read_uncommitted
    change, their `expect` and `teaches` are dropped (written for the other reader); the
    exactly-once level's reader was read_committed already and keeps its own."""
    step = load_lesson(
        lesson_file(
            tmp_path,
            LOST_OPTIONS,
            what_if={"label": "RC", "sink_isolation": "read_committed", "explain": "."},
        )
    ).steps[0]
    original = load_scenario(list_scenarios()["ack-loss"])
    changed = step.what_if_scenario()
    assert (changed.sink_isolation, changed.client) == ("read_committed", original.client)
    assert set(changed.expect) == {"exactly-once"} == set(changed.teaches)
    assert changed.expect["exactly-once"] == original.expect["exactly-once"]
    assert set(original.expect) > {"exactly-once"}
    # Both at once: the Java client and the reader.
    both = WhatIf(label="x", client="java", sink_isolation="read_committed", explain=".")
    assert both.change(original).client == "java"
    assert both.change(original).sink_isolation == "read_committed"


def test_the_kafka_streams_step_asks_what_a_read_uncommitted_reader_would_count():
    streams_step = next(s for _, _, s in STEPS if s.scenario == "streams-crash")
    assert streams_step.what_if is not None
    scenario = streams_step.what_if_scenario()
    assert scenario.sink_isolation == "read_uncommitted" and scenario.client == "librdkafka"
    # Its exactly_once_v2 level read at read_committed: the file's expectation is dropped.
    assert "streams-exactly-once" not in scenario.expect
    said = streams_step.what_if_explanation(
        {"streams-exactly-once": {"duplicates": 3, "aborted_visible": 3, "lost": 0}}
    )
    assert "Duplicates = 3, from 3 records of aborted transactions" in said
