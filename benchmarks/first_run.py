"""A new cluster's first run: with Kafka's coordinators loaded at the start, and without.

    .venv/bin/python -m benchmarks.first_run [--rounds 3] [--runs 3] [--no-write]

Kafka creates __consumer_offsets and __transaction_state when a client first asks for a
group's or a transactional id's coordinator (KafkaApis.getCoordinator); the lab's cluster
start asks for both (engine.kafka.admin.load_coordinators), so that a class's first run does
not wait for them. For each round, each scenario and each way (taking turns), this starts a
new 1-node embedded cluster, times its start, then runs the scenario --runs times, timing
each run from the call to its return (no browser, no Spark). "Without" starts the cluster
with coordinators_at_start=False: the cluster Kafka gives before any client has asked.

The table goes between the first-run markers of benchmarks/README.md (the rest of the file
stays as it is).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.metrics_bench import split_report

README = Path(__file__).with_name("README.md")
START, END = "<!-- first-run:start -->", "<!-- first-run:end -->"
SCENARIOS = ("ack-loss", "consumer-crash")
WAYS = ("loaded at the start", "left to the first run")


def one_cluster(scenario_name: str, way: str, runs: int) -> tuple[float, list[float]]:
    """(the start's seconds, each run's seconds) on a new 1-node cluster."""
    from engine.cluster.embedded import EmbeddedCluster
    from engine.run.runner import run_scenario
    from engine.scenarios.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()[scenario_name])
    cluster = EmbeddedCluster("first-run-bench", node_count=1, coordinators_at_start=way == WAYS[0])
    began = time.perf_counter()
    cluster.start(timeout=240)
    started = time.perf_counter() - began
    times = []
    try:
        for _ in range(runs):
            began = time.perf_counter()
            run_scenario(scenario, cluster)
            times.append(time.perf_counter() - began)
    finally:
        cluster.stop()
    return started, times


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(results: dict[tuple[str, str], list[tuple[float, list[float]]]], command: str) -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    rounds = len(next(iter(results.values())))
    lines = [
        START,
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `{command}`: "
        f"{rounds} new 1-node embedded clusters per scenario and way, the ways taking turns; "
        f"seconds, median (min-max). Load average after: {load} (2 cores, shared).",
        "",
        "| scenario | coordinators | cluster start | first run | later runs |",
        "|---|---|---|---|---|",
    ]
    for (scenario, way), clusters in results.items():
        starts = [s for s, _ in clusters]
        firsts = [t[0] for _, t in clusters]
        later = [x for _, t in clusters for x in t[1:]]
        lines.append(
            f"| {scenario} | {way} | {_median(starts)} | {_median(firsts)} | "
            f"{_median(later) if later else '-'} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="new clusters per scenario and way")
    parser.add_argument("--runs", type=int, default=3, help="runs on each cluster")
    parser.add_argument("--no-write", action="store_true", help="print, do not write README.md")
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="first-run-bench-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="first-run-bench-runs-"))
    results: dict[tuple[str, str], list[tuple[float, list[float]]]] = {
        (s, w): [] for s in SCENARIOS for w in WAYS
    }
    for k in range(args.rounds):
        for scenario in SCENARIOS:
            for way in WAYS if k % 2 == 0 else WAYS[::-1]:
                started, times = one_cluster(scenario, way, args.runs)
                results[(scenario, way)].append((started, times))
                print(
                    f"round {k}, {scenario}, {way}: start {started:.2f} s, runs "
                    + ", ".join(f"{t:.2f}" for t in times),
                    flush=True,
                )
    command = ".venv/bin/python -m benchmarks.first_run" + (
        f" --rounds {args.rounds} --runs {args.runs}" if (args.rounds, args.runs) != (3, 3) else ""
    )
    text = report(results, command)
    print(text)
    if not args.no_write:
        head, _, tail = split_report(README.read_text(), START, END)
        README.write_text(head + text + tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
