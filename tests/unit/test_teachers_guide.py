"""The teacher's guide follows the lesson files, and the manual carries no dates or issue
numbers (they belong to the notebooks: benchmarks/, docs/measurements.md)."""

from __future__ import annotations

import re

import pytest

from engine.base import paths
from engine.teach.lesson import list_lessons, load_lesson

GUIDE = paths.REPO_ROOT / "docs" / "teachers-guide.md"
README = paths.REPO_ROOT / "README.md"
LESSONS_IN_THE_GUIDE = ("delivery-guarantees", "replication-and-durability")


def plan_rows(text: str, scenarios: set[str]) -> list[tuple[str, int]]:
    """(scenario, minutes) of every plan row, `| 0–6 | ack-loss | 6 min | ... |`, in order."""
    rows = re.findall(r"^\| \d+–\d+ \| ([\w-]+) \| (\d+) min \|", text, re.MULTILINE)
    return [(name, int(minutes)) for name, minutes in rows if name in scenarios]


def lesson_steps(name: str) -> list[tuple[str, int]]:
    return [(step.scenario, step.minutes) for step in load_lesson(list_lessons()[name]).steps]


def test_the_guides_class_plans_are_the_lessons_steps_in_order() -> None:
    text = GUIDE.read_text()
    expected = [row for name in LESSONS_IN_THE_GUIDE for row in lesson_steps(name)]
    assert plan_rows(text, {s for s, _ in expected}) == expected


def test_a_plan_out_of_step_with_its_lesson_fails() -> None:
    expected = [row for name in LESSONS_IN_THE_GUIDE for row in lesson_steps(name)]
    scenarios = {s for s, _ in expected}
    moved = GUIDE.read_text().replace("| ack-loss | 6 min |", "| ack-loss | 5 min |")
    assert plan_rows(moved, scenarios) != expected


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
ISSUE = re.compile(r"\bissues? \d+|#\d+\b", re.IGNORECASE)


def dated_or_numbered(text: str) -> list[str]:
    return DATE.findall(text) + ISSUE.findall(text)


@pytest.mark.parametrize("path", [README, GUIDE], ids=lambda p: p.name)
def test_the_manual_has_no_dates_or_issue_numbers(path) -> None:
    assert dated_or_numbered(path.read_text()) == []


def test_a_date_or_an_issue_number_is_found() -> None:
    assert dated_or_numbered("measured on 2026-11-25 (issue 18; see #5456)") == [
        "2026-11-25",
        "issue 18",
        "#5456",
    ]
