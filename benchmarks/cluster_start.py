"""Cold and warm start times, and memory, of the embedded 1-node and 3-node clusters.

    .venv/bin/python -m benchmarks.cluster_start [--repeats 3] [--skip-cold]

- cold: the first start on a fresh machine. Kafka's jars are resolved by Maven from Maven
  Central into an empty local repository and cache folder, then the cluster starts.
- warm: the jars are cached; storage is formatted and the JVMs start.

Memory is the resident set size (RSS) of every process of the cluster (JVMs and the fault
proxy), read from /proc once the cluster is ready and again after 20,000 1 KB messages.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from engine.base import paths
from engine.cost.startup import cold_jar_fetch, one_start  # the engine's, as the Cost page's
from engine.kafka import jars


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-cold", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-bench-"))
    jars.ensure_kafka_jars()
    print(f"Kafka {paths.kafka_version()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    fetch = None if args.skip_cold else cold_jar_fetch()
    if fetch is not None:
        print(f"cold jar fetch from Maven Central: {fetch:.1f} s")
    print(
        "| nodes | cold start (s) | warm start median (s) [min-max] | RSS idle (MiB) "
        "| RSS after 20k x 1 KB (MiB) |"
    )
    print("|---|---|---|---|---|")
    for nodes in (1, 3):
        runs = [one_start(nodes, f"bench-{nodes}-{i}") for i in range(args.repeats)]
        starts = [r[0] for r in runs]
        cold = f"{fetch + starts[0]:.1f}" if fetch is not None else "-"
        print(
            f"| {nodes} | {cold} | {statistics.median(starts):.1f} "
            f"[{min(starts):.1f}-{max(starts):.1f}] | {statistics.median(r[1] for r in runs):.0f} "
            f"| {statistics.median(r[2] for r in runs):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
