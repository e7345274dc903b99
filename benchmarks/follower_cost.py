"""What following a run costs the run itself: Spark's CPU while the run goes on.

    .venv/bin/python -m benchmarks.follower_cost [--repeats 4] [--scenario ack-loss]
                                                 [--trigger-s 1]

On a new 1-node embedded cluster and a SparkSession warmed as the dashboard warms its own,
runs the scenario (its own size) `--repeats` times without a follower and as many times
with one (engine.metrics.streaming, started just before the run, stopped after it without
judging, so that no judgement of an earlier run overlaps the next one). For each run it
prints the run's time (run_scenario, engine only, no browser), the follower's start, and the
CPU seconds the Spark driver JVM used during the run (from /proc: user + system), then the
medians. Linux only. It writes nothing; benchmarks/METRICS.md quotes its output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def jvm_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spark_jvm_pid() -> int:
    """The driver JVM PySpark started as a child of this process (SparkSubmit)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if parent == os.getpid() and b"SparkSubmit" in command:
            return int(proc.name)
    raise SystemExit("No Spark driver JVM is a child of this process (Linux's /proc needed).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--scenario", default="ack-loss")
    parser.add_argument("--trigger-s", type=float, help="the follower's trigger (default 1 s)")
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="follower-cost-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="follower-cost-runs-"))
    from engine.cluster.embedded import EmbeddedCluster
    from engine.metrics.session import get_spark
    from engine.metrics.streaming import TRIGGER_S, start_following
    from engine.metrics.warm_up import warm_up_judgement
    from engine.runner import new_run_id, run_scenario
    from engine.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()[args.scenario])
    cluster = EmbeddedCluster("follower-cost", node_count=scenario.nodes)
    cluster.start(timeout=240)
    rows: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    try:
        spark = get_spark()
        warm_up_judgement(spark)
        warm_up_judgement(spark, rounds=1, bootstrap=cluster.direct_bootstrap)
        jvm = spark_jvm_pid()
        for _ in range(args.repeats):
            for followed in (False, True):
                run_id = new_run_id(scenario.name)
                cpu_before, began = jvm_cpu_s(jvm), time.perf_counter()
                follower = None
                if followed:
                    follower = start_following(
                        spark,
                        cluster.direct_bootstrap,
                        run_id,
                        scenario.levels,
                        scenario.pipeline,
                        trigger_s=args.trigger_s or TRIGGER_S,
                    )
                started = time.perf_counter()
                run_scenario(scenario, cluster, run_id=run_id)
                ended = time.perf_counter()
                cpu = jvm_cpu_s(jvm) - cpu_before
                if follower is not None:
                    follower.stop()
                rows[followed].append((ended - started, started - began, cpu))
                print(
                    f"{'followed' if followed else 'alone':8}  run {ended - started:5.2f} s  "
                    f"follower's start {started - began:4.2f} s  Spark JVM CPU {cpu:4.2f} s",
                    flush=True,
                )
    finally:
        cluster.stop()
    for followed, runs in rows.items():
        print(
            f"median, {'followed' if followed else 'alone'}: run "
            f"{statistics.median(r[0] for r in runs):.2f} s, start "
            f"{statistics.median(r[1] for r in runs):.2f} s, Spark JVM CPU during start and "
            f"run {statistics.median(r[2] for r in runs):.2f} s"
        )
    print(f"load average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
