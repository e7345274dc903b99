"""How often each scenario makes its lesson, over every setting the pages offer. Target: 100%.

    .venv/bin/python -m benchmarks.fidelity                       # every scenario, twice
    .venv/bin/python -m benchmarks.fidelity --repeats 1 --only consumer-crash,zombie

A scenario's `teaches` block says what must show for its lesson to be made (for example
at-least-once duplicates >= 1). The grid is what the Failure lab lets a user change:
messages per commit 1, 2, 5, 10 and 20 at the file's number of messages, and for processor
scenarios also partitions 1 and 3 and processing times of 0, 10 and 40 ms per message. A
point whose settings cannot make the lesson (`Scenario.cannot_teach`, which the page shows
before a run and refuses to run) is listed as refused, not run.

Starts its own warm clusters (a 1-node one, and a 3-node one for broker-failover) and
prints a Markdown table for benchmarks/README.md; `--json` keeps every run's outcome.
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

from engine.cluster.embedded import EmbeddedCluster
from engine.errors import LabError
from engine.runner import run_scenario
from engine.scenario import Scenario, list_scenarios, load_scenario

COMMIT_EVERY = (1, 2, 5, 10, 20)
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
    return [
        Point(scenario.name, workload.messages, n, p, ms)
        for n, p, ms in itertools.product(COMMIT_EVERY, partitions, processing)
    ]


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
        except LabError as exc:
            missed = [f"the run failed: {exc}"]
        point.seconds.append(round(time.monotonic() - began, 1))
        point.runs += 1
        if missed:
            point.misses.append("; ".join(missed))
        else:
            point.made += 1
        print(f"  {point.label}: {'made' if not missed else 'MISSED ' + str(missed)}", flush=True)


def table(points: list[Point]) -> str:
    lines = [
        "| scenario | grid points | refused before the run | runs | lesson made | "
        "median wall time (s) |",
        "|---|---|---|---|---|---|",
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
        lines.append(f"| {name} | {len(rows)} | {refused} | {runs} | {share} | {median:.1f} |")
    misses = [p for p in points if p.misses]
    if misses:
        lines.append("")
        lines.append("Misses:")
        lines += [f"- {p.scenario} at {p.label}: {m}" for p in misses for m in p.misses]
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
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-fidelity-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="lab-fidelity-runs-"))
    names = args.only.split(",") if args.only else list(list_scenarios())
    scenarios = {name: load_scenario(list_scenarios()[name]) for name in names}
    clusters: dict[int, EmbeddedCluster] = {}
    points: list[Point] = []
    began = time.monotonic()
    try:
        for name, scenario in scenarios.items():
            if scenario.nodes not in clusters:
                clusters[scenario.nodes] = EmbeddedCluster(
                    f"fidelity-{scenario.nodes}", node_count=scenario.nodes
                )
                clusters[scenario.nodes].start(timeout=240)
            print(f"{name}:", flush=True)
            for point in grid(scenario):
                measure(scenario, clusters[scenario.nodes], point, args.repeats)
                points.append(point)
    finally:
        for cluster in clusters.values():
            cluster.stop()
    print()
    print(table(points))
    print(f"\n{len(points)} grid points, {time.monotonic() - began:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in points], indent=1))


if __name__ == "__main__":
    main()
