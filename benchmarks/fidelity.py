"""How often each scenario makes its lesson, over every setting the pages offer. Target: 100%.

    .venv/bin/python -m benchmarks.fidelity                       # every scenario, twice
    .venv/bin/python -m benchmarks.fidelity --repeats 1 --only consumer-crash,zombie
    .venv/bin/python -m benchmarks.fidelity --repeats 1 --client java --only ack-loss
    .venv/bin/python -m benchmarks.fidelity --lesson-points --repeats 3   # what lessons show

A scenario's `teaches` block says what must show for its lesson to be made (for example
at-least-once duplicates >= 1). The grid is what the Failure lab lets a user change:
messages per commit 1, 2, 5, 10 and 20 at the file's number of messages, and for processor
scenarios also partitions 1 and 3 and processing times of 0, 10 and 40 ms per message. A
point whose settings cannot make the lesson (`Scenario.cannot_teach`, which the page shows
before a run and refuses to run) is listed as refused, not run. A Kafka Streams scenario
offers only the processing time (Kafka Streams commits on its own timer, on one partition).
`--client java` runs the producer scenarios' producer on the Java client.

Starts its own warm clusters (a 1-node one, and a 3-node one for the 3-node scenarios) and
prints a Markdown table for benchmarks/README.md; `--json` keeps every run's outcome.

    .venv/bin/python -m benchmarks.fidelity --moving --only zombie,transaction-timeout

`--moving` is the second grid: a crash or pause that its target arms on its own events
(a processor's, or a transactional producer's) fires at every event that role writes, at
several counts, instead of the file's point. There is no lesson to make at an arbitrary
point, so each run is judged on being explained: every duplicate, loss, reordering,
visible aborted record and unsent id has its sentence on the card; a fencing answer the
proxy saw is counted as a write refused; and a card that says a level broke its promise is listed,
with its evidence, for a person to read.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.base.errors import LabError
from engine.cluster.embedded import EmbeddedCluster
from engine.run.runner import run_scenario
from engine.scenarios.scenario import Scenario, count_of, list_scenarios, load_scenario, with_client
from engine.teach.lesson import list_lessons, load_lesson

COMMIT_EVERY = (1, 2, 5, 10, 20)
# The events each armable role writes (engine.roles), where a fault point may land.
MOVING_EVENTS = {
    "processor": (
        "assigned",
        "consumed",
        "output_acked",
        "commit_gap",
        "committed",
        "txn_begin",
        "txn_commit",
        "auto_committed",
    ),
    "producer": ("txn_init", "txn_begin", "txn_flushed", "txn_commit"),
}
MOVING_COUNTS = (1, 2, 3, 7)
# A count's first word on the card's "why" lines.
EXPLAINED_BY = {
    "duplicates": "Duplicates",
    "lost": "Lost",
    "reordered": "Reordered",
    "aborted_visible": "Visible",
    "never_sent": "Never sent",
    "not_processed": "Not processed yet",
}
FENCING_ANSWERS = {"INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "FENCED_INSTANCE_ID"}
PARTITIONS = (1, 3)
PROCESSING_MS = (0.0, 10.0, 40.0)


@dataclass
class Point:
    scenario: str
    messages: int
    commit_every: int
    partitions: int
    processing_ms: float
    refused: str | None = None
    runs: int = 0
    made: int = 0
    misses: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    # Lesson steps on this scenario whose explanation the run contradicted (its answer or a
    # claim did not hold): the page then shows the explanation as "not this run".
    contradicted: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return (
            f"{self.messages} msgs, {self.commit_every}/commit, {self.partitions} part., "
            f"{self.processing_ms:.0f} ms"
        )


def grid(scenario: Scenario) -> list[Point]:
    workload = scenario.workload
    processor = scenario.pipeline == "processor"
    partitions = PARTITIONS if processor else (workload.partitions,)
    processing = PROCESSING_MS if processor else (workload.processing_ms,)
    commit_every = COMMIT_EVERY
    if scenario.runs_kafka_streams:  # the page offers neither (Kafka Streams' own timer)
        partitions, commit_every = (workload.partitions,), (workload.commit_every,)
    points = [
        Point(scenario.name, workload.messages, n, p, ms)
        for n, p, ms in itertools.product(commit_every, partitions, processing)
    ]
    # The file's own settings, the only ones a lesson step runs, are always a point.
    own = Point(
        scenario.name,
        workload.messages,
        workload.commit_every,
        workload.partitions,
        workload.processing_ms,
    )
    if own.label not in {p.label for p in points}:
        points.append(own)
    return points


def is_lesson_point(scenario: Scenario, point: Point) -> bool:
    """Whether a lesson can show this point's run: a lesson step runs the file unchanged."""
    return at_point(scenario, point).workload == scenario.workload


def at_point(scenario: Scenario, point: Point) -> Scenario:
    workload = scenario.workload.model_copy(
        update={
            "messages": point.messages,
            "commit_every": point.commit_every,
            "partitions": point.partitions,
            "processing_ms": point.processing_ms,
        }
    )
    return scenario.model_copy(update={"workload": workload})


def lesson_contradictions(scenario: str, results: dict) -> list[str]:
    """Each lesson step on the scenario whose answer or claims this run breaks, in words."""
    out = []
    for lesson, path in list_lessons().items():
        for step in load_lesson(path).steps:
            if step.scenario != scenario:
                continue
            for condition in step.contradicted(results):
                value = count_of(results.get(condition.level, {}), condition.field)
                out.append(f"{lesson}: {condition.describe()} (the run: {value})")
    return out


def measure(scenario: Scenario, cluster, point: Point, repeats: int) -> None:
    variant = at_point(scenario, point)
    point.refused = variant.cannot_teach()
    if point.refused:
        return
    for _ in range(repeats):
        began = time.monotonic()
        try:
            output = run_scenario(variant, cluster)
            missed = variant.lesson_missed(output["results"])
            # A lesson's explanation is only ever shown beside a run at the file's settings
            # (pages/lesson.py runs the file as it is); its question names those numbers.
            if is_lesson_point(scenario, point):
                point.contradicted += lesson_contradictions(scenario.name, output["results"])
        except LabError as exc:
            missed = [f"the run failed: {exc}"]
        point.seconds.append(round(time.monotonic() - began, 1))
        point.runs += 1
        if missed:
            point.misses.append("; ".join(missed))
        else:
            point.made += 1
        said = f"  {point.label}: {'made' if not missed else 'MISSED ' + str(missed)}"
        if point.contradicted:
            said += f" CONTRADICTED {point.contradicted}"
        print(said, flush=True)


def moving_grid(scenario: Scenario) -> list[tuple[str, Scenario]]:
    """The scenario with its armed fault point moved to every event and count its role has."""
    from engine.run.nemesis import armed_point

    variants = []
    for index, fault in enumerate(scenario.faults):
        if armed_point(fault) is None:
            continue
        role = fault.when.process or ""
        for event in MOVING_EVENTS.get(role, ()):
            for count in MOVING_COUNTS:
                if (event, count) == (fault.when.event, fault.when.count):
                    continue
                when = fault.when.model_copy(update={"event": event, "count": count})
                moved = fault.model_copy(update={"when": when})
                faults = [*scenario.faults[:index], moved, *scenario.faults[index + 1 :]]
                label = f"{fault.kind} after {event} #{count}"
                variants.append((label, scenario.model_copy(update={"faults": faults})))
    return variants


def unexplained(results: dict[str, dict]) -> tuple[list[str], list[str]]:
    """(what a card leaves unexplained, the cards that say a promise was broken)."""
    missing, broken = [], []
    for level, result in results.items():
        why = (result.get("explain") or {}).get("why") or []
        for count, word in EXPLAINED_BY.items():
            if result.get(count) and not any(line.startswith(word) for line in why):
                missing.append(f"{level}: {count} {result[count]} without a '{word}' line")
        answers = {
            f.get("error")
            for f in result.get("faults") or []
            if f.get("source") == "proxy" and f.get("kind") == "produce_error"
        }
        if answers & FENCING_ANSWERS and not result.get("writes_refused"):
            seen = sorted(answers & FENCING_ANSWERS)
            missing.append(f"{level}: the proxy saw {seen}, writes refused 0")
        broken += [f"{level}: {line}" for line in why if "promise excludes" in line]
    return missing, broken


def measure_moving(scenario: Scenario, cluster) -> list[dict]:
    outcomes = []
    for label, variant in moving_grid(scenario):
        began = time.monotonic()
        try:
            output = run_scenario(variant, cluster)
            missing, broken = unexplained(output["results"])
        except LabError as exc:
            missing, broken = [f"the run failed: {exc}"], []
        outcome = {
            "scenario": scenario.name,
            "point": label,
            "seconds": round(time.monotonic() - began, 1),
            "unexplained": missing,
            "promise_broken": broken,
        }
        outcomes.append(outcome)
        state = "explained" if not missing else f"UNEXPLAINED {missing}"
        print(f"  {label}: {state}{' · promise: ' + str(broken) if broken else ''}", flush=True)
    return outcomes


def moving_table(outcomes: list[dict]) -> str:
    lines = [
        "| scenario | fault points | explained | a promise said broken |",
        "|---|---|---|---|",
    ]
    by: dict[str, list[dict]] = {}
    for outcome in outcomes:
        by.setdefault(outcome["scenario"], []).append(outcome)
    for name, rows in by.items():
        done = sum(1 for r in rows if not r["unexplained"])
        broken = sum(1 for r in rows if r["promise_broken"])
        lines.append(f"| {name} | {len(rows)} | {done}/{len(rows)} | {broken} |")
    for r in outcomes:
        for line in r["unexplained"]:
            lines.append(f"- unexplained, {r['scenario']} at {r['point']}: {line}")
        for line in r["promise_broken"]:
            lines.append(f"- said broken, {r['scenario']} at {r['point']}: {line}")
    return "\n".join(lines)


def table(points: list[Point]) -> str:
    lines = [
        "| scenario | grid points | refused before the run | runs | lesson made | "
        "lesson explanation contradicted (file's settings) | median wall time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    by_scenario: dict[str, list[Point]] = {}
    for point in points:
        by_scenario.setdefault(point.scenario, []).append(point)
    for name, rows in by_scenario.items():
        runs = sum(p.runs for p in rows)
        made = sum(p.made for p in rows)
        seconds = sorted(s for p in rows for s in p.seconds)
        median = seconds[len(seconds) // 2] if seconds else 0.0
        share = f"{made}/{runs} ({100 * made / runs:.0f}%)" if runs else "-"
        refused = sum(1 for p in rows if p.refused)
        against = sum(len(p.contradicted) for p in rows)
        lines.append(
            f"| {name} | {len(rows)} | {refused} | {runs} | {share} | {against} | {median:.1f} |"
        )
    misses = [p for p in points if p.misses]
    if misses:
        lines.append("")
        lines.append("Misses:")
        lines += [f"- {p.scenario} at {p.label}: {m}" for p in misses for m in p.misses]
    against = [p for p in points if p.contradicted]
    if against:
        lines.append("")
        lines.append("Lesson explanations a run contradicted (shown as not that run's):")
        lines += [f"- {p.scenario} at {p.label}: {c}" for p in against for c in p.contradicted]
    refused = [p for p in points if p.refused]
    if refused:
        lines.append("")
        lines.append("Refused before the run (the page says why and disables Run):")
        lines += [f"- {p.scenario} at {p.label}: {p.refused}" for p in refused]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--json", type=Path, help="write every point's outcome here")
    parser.add_argument(
        "--moving", action="store_true", help="move each armed fault point over its role's events"
    )
    parser.add_argument(
        "--client",
        choices=("librdkafka", "java"),
        help="run the producer scenarios' producer on this client (the Failure lab's choice)",
    )
    parser.add_argument(
        "--lesson-points",
        action="store_true",
        help="only each scenario's own settings, the run a lesson step shows",
    )
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-fidelity-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="lab-fidelity-runs-"))
    names = args.only.split(",") if args.only else list(list_scenarios())
    scenarios = {name: load_scenario(list_scenarios()[name]) for name in names}
    if args.client:
        scenarios = {name: with_client(s, args.client) for name, s in scenarios.items()}
    clusters: dict[int, EmbeddedCluster] = {}
    points: list[Point] = []
    moving: list[dict] = []
    began = time.monotonic()
    try:
        for name, scenario in scenarios.items():
            if scenario.nodes not in clusters:
                clusters[scenario.nodes] = EmbeddedCluster(
                    f"fidelity-{scenario.nodes}", node_count=scenario.nodes
                )
                clusters[scenario.nodes].start(timeout=240)
            print(f"{name}:", flush=True)
            if args.moving:
                moving += measure_moving(scenario, clusters[scenario.nodes])
                continue
            for point in grid(scenario):
                if args.lesson_points and not is_lesson_point(scenario, point):
                    continue
                measure(scenario, clusters[scenario.nodes], point, args.repeats)
                points.append(point)
    finally:
        for cluster in clusters.values():
            cluster.stop()
    print()
    if args.moving:
        print(moving_table(moving))
        print(f"\n{len(moving)} fault points, {time.monotonic() - began:.0f} s in all")
        if args.json:
            args.json.write_text(json.dumps(moving, indent=1))
        return
    print(table(points))
    print(f"\n{len(points)} grid points, {time.monotonic() - began:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in points], indent=1))


if __name__ == "__main__":
    main()
