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
