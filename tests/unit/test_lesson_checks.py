"""Lesson checks take exact values, >= and <=, as a scenario's `expect` does."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.lesson import Check, lessons_dir, load_lesson

RESULTS = {"at-least-once": {"duplicates": 5, "lost": 0}}


@pytest.mark.parametrize(
    ("expect", "holds"),
    [("5", True), ("4", False), (">=1", True), (">=6", False), ("<=5", True), ("<=4", False)],
)
def test_a_check_compares_as_expect_does(expect, holds):
    check = Check(level="at-least-once", field="duplicates", expect=expect)
    assert check.holds(RESULTS) is holds


def test_a_check_on_a_level_the_run_lacks_is_undecided():
    assert Check(level="exactly-once", field="lost", expect="0").holds(RESULTS) is None


@pytest.mark.parametrize("expect", ["", "about 3", "=>1", "1.5"])
def test_a_malformed_expectation_is_refused(expect):
    with pytest.raises(ValidationError):
        Check(level="at-least-once", field="duplicates", expect=expect)


def test_the_consumer_crash_step_checks_the_duplicates_it_claims():
    lesson = load_lesson(lessons_dir() / "delivery-guarantees.yaml")
    step = next(s for s in lesson.steps if s.scenario == "consumer-crash")
    assert step.answer == "duplicates"
    assert step.check.field == "duplicates"
    assert step.check.holds({"at-least-once": {"duplicates": 0}}) is False
    assert step.check.holds({"at-least-once": {"duplicates": 5}}) is True


def test_every_lesson_step_checks_a_level_its_scenario_runs_and_teaches():
    """A step's check names a level the scenario runs, and a count its `teaches` block
    bounds, so a run that makes the scenario's lesson can confirm the step."""
    from engine.lesson import list_lessons, load_lesson
    from engine.scenario import list_scenarios, load_scenario

    scenarios = list_scenarios()
    for name, path in list_lessons().items():
        lesson = load_lesson(path)
        assert sum(step.minutes for step in lesson.steps) <= lesson.minutes, name
        for step in lesson.steps:
            scenario = load_scenario(scenarios[step.scenario])
            assert step.check.level in scenario.levels, (name, step.scenario)
            assert step.check.field in scenario.teaches.get(step.check.level, {}) or (
                step.check.field in scenario.expect.get(step.check.level, {})
            ), (name, step.scenario, step.check.field)
