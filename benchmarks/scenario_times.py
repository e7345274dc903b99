"""Wall time of every scenario on a warm embedded cluster, and the counts it produced.

    .venv/bin/python -m benchmarks.scenario_times
    .venv/bin/python -m benchmarks.scenario_times --browser [--repeats 5]

The second form is the click-to-verdict measurement in Chromium (benchmarks/click_to_verdict.py).

Starts a warm 1-node and a 3-node cluster (not timed), then runs each scenario file once,
timing from the call to its return (topic creation, every level, read-back, checking and
recording included). Prints a Markdown table for the README.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from engine.cluster.embedded import EmbeddedCluster
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario


def main() -> None:
    if "--browser" in sys.argv:
        from benchmarks import click_to_verdict

        sys.argv.remove("--browser")
        click_to_verdict.main()
        return
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-bench-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="lab-bench-runs-"))
    clusters = {
        1: EmbeddedCluster("bench-1", node_count=1),
        3: EmbeddedCluster("bench-3", node_count=3),
    }
    for cluster in clusters.values():
        cluster.start(timeout=240)
    try:
        print(
            "| scenario | nodes | levels | wall time (s) | per level: delivered / duplicates / "
            "lost / reordered / fenced |"
        )
        print("|---|---|---|---|---|")
        for name, path in list_scenarios().items():
            scenario = load_scenario(path)
            began = time.monotonic()
            output = run_scenario(scenario, clusters[scenario.nodes])
            elapsed = time.monotonic() - began
            summary = "; ".join(
                f"{level}: {r['delivered']}/{r['duplicates']}/{r['lost']}/{r['reordered']}"
                f"/{r['fenced']}"
                for level, r in output["results"].items()
            )
            print(
                f"| {name} | {scenario.nodes} | {len(scenario.levels)} | {elapsed:.1f} | "
                f"{summary} |",
                flush=True,
            )
    finally:
        for cluster in clusters.values():
            cluster.stop()


if __name__ == "__main__":
    main()
