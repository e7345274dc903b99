"""The teacher's path through the lab: where to start, the scenarios grouped by what they teach,
how many nodes each needs and how long a run of it usually takes.

The home page, the Failure lab's picker, the Lesson page and docs/scenarios.md read it, so
the four say the same thing. A unit test keeps every scenario file in exactly one group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from engine.base import paths
from engine.scenarios.scenario import ScenarioError, list_scenarios, load_scenario
from engine.teach.lesson import Lesson, LessonError, list_lessons, load_lesson

# The class every other builds on: the three guarantees, one failure at a time.
FIRST_LESSON = "delivery-guarantees"


@dataclass(frozen=True)
class ScenarioGroup:
    title: str
    short: str  # the group's word in the Failure lab's picker
    lesson: str  # what the group's runs show a room, in one sentence
    scenarios: tuple[str, ...]  # in teaching order: the simplest failure first


GROUPS: tuple[ScenarioGroup, ...] = (
    ScenarioGroup(
        "Producers: lost answers and retries",
        "producers",
        "A write whose answer never arrives is sent again: duplicates, or reordering, unless "
        "the broker recognises the retry (idempotence).",
        ("ack-loss", "network-blip", "producer-crash", "retry-reorder"),
    ),
    ScenarioGroup(
        "Processors: when the offsets are committed",
        "processors",
        "A processor that dies between its output and its commit repeats or skips work; "
        "the group coordinator fences a zombie's commits, not its writes.",
        (
            "consumer-crash",
            "commit-before-process",
            "zombie",
            "auto-commit-loss",
            "auto-commit-duplicates",
            "commit-answer-lost",
            "commit-request-lost",
            "streams-crash",
            "streams-zombie",
        ),
    ),
    ScenarioGroup(
        "Transactions: committed, aborted, timed out",
        "transactions",
        "What read_committed and read_uncommitted readers see, and what happens to a "
        "transaction whose commit is lost or that nobody ends.",
        (
            "aborted-transaction",
            "end-txn-answer-lost",
            "end-txn-request-lost",
            "transaction-timeout",
        ),
    ),
    ScenarioGroup(
        "Replication: brokers that die",
        "replication",
        "What acks, the in-sync replicas and leader elections promise when a broker dies, "
        "and what they do not.",
        (
            "isr-shrink",
            "broker-failover",
            "leader-moves",
            "all-replicas-down",
            "unclean-election",
            "leader-disk-lost",
        ),
    ),
)


def group_of(scenario: str) -> ScenarioGroup | None:
    return next((g for g in GROUPS if scenario in g.scenarios), None)


def grouped_scenario_names() -> list[str]:
    """Every scenario file's name, group by group; files in no group come last."""
    names = list(list_scenarios())
    ordered = [n for g in GROUPS for n in g.scenarios if n in names]
    return ordered + [n for n in names if n not in ordered]


def recorded_dir() -> Path:
    """Real runs of every scenario, kept as test data (`python -m tests.data.record`)."""
    return paths.REPO_ROOT / "tests" / "data" / "recorded"


@cache
def recorded_seconds(scenario: str) -> float | None:
    """How long the scenario's recorded run took, from its first level's start to its last
    level's end (the levels run at the same time); None when it has no recorded run."""
    path = recorded_dir() / f"{scenario}.json"
    try:
        levels = json.loads(path.read_text())["results"].values()
        start = min(level["started_at"] for level in levels)
        return max(level["started_at"] + level["duration_s"] for level in levels) - start
    except (OSError, ValueError, KeyError, TypeError):
        return None


def describe_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "length not recorded"
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"


def nodes_text(nodes: int) -> str:
    return f"{nodes} node" if nodes == 1 else f"{nodes} nodes"


def scenario_nodes(scenario: str) -> int:
    """The nodes a scenario file asks for; read again only when the file changes (the Failure
    lab's picker asks for every scenario at every rerun, and YAML parsing is slow)."""
    path = list_scenarios()[scenario]
    return _file_nodes(path, path.stat().st_mtime_ns)


@cache
def _file_nodes(path: Path, mtime_ns: int) -> int:
    return load_scenario(path).nodes


def scenario_label(scenario: str) -> str:
    """The picker's line: the name first (what a link or a test asks for), then its group,
    the cluster it needs and how long a run usually takes."""
    group = group_of(scenario)
    where = f"{group.short} · " if group else ""
    try:
        nodes = nodes_text(scenario_nodes(scenario))
    except ScenarioError as exc:  # one broken file is named in its line, the rest still work
        return f"{scenario} — ⚠️ the file does not load: {exc}"
    length = describe_seconds(recorded_seconds(scenario))
    return f"{scenario} — {where}{nodes} · {length}"


def lesson_nodes(lesson: Lesson) -> int:
    """The cluster the whole lesson needs: its largest step's, started before the class."""
    return max(scenario_nodes(step.scenario) for step in lesson.steps)


@dataclass(frozen=True)
class LessonPlan:
    name: str
    title: str
    minutes: int
    steps: int
    nodes: int


def lesson_plans() -> list[LessonPlan]:
    """Every lesson file, the first lesson first; read again only when a lesson file changes."""
    files = tuple((path, path.stat().st_mtime_ns) for path in list_lessons().values())
    return list(_plans(files))


@cache
def _plans(files: tuple[tuple[Path, int], ...]) -> tuple[LessonPlan, ...]:
    plans = []
    for path, _ in files:
        try:
            lesson = load_lesson(path)
            lesson_nodes(lesson)
        except (LessonError, ScenarioError):
            continue  # the Lesson page names what is wrong with it when it is chosen
        plans.append(
            LessonPlan(
                path.stem, lesson.title, lesson.minutes, len(lesson.steps), lesson_nodes(lesson)
            )
        )
    return tuple(sorted(plans, key=lambda plan: plan.name != FIRST_LESSON))
