"""What following a run costs the run itself: Spark's CPU while the run goes on.

    .venv/bin/python -m benchmarks.follower_cost [--repeats 4] [--scenario ack-loss]
                                                 [--trigger-s 1]

On a new embedded cluster (the scenario's nodes) and a SparkSession warmed as the dashboard warms
its own, runs the scenario (its own size) `--repeats` times in each of three ways: without a
follower ("alone"); with one (engine.metrics.streaming) started and running before the run
begins ("before"); and with one started in a thread of its own as the run begins, as the
dashboard starts it (engine/run_handle.start_run: "beside"). Each follower is stopped after
its run without judging, so that no judgement of an earlier run overlaps the next one. For
each run it prints the run's time (run_scenario, engine only, no browser), the follower's
start, and the CPU seconds the Spark driver JVM used during the start and the run (from
/proc: user + system), then the medians. Linux only. It writes nothing; benchmarks/METRICS.md
quotes its output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from benchmarks.streaming_bench import follow, warm_lab
from engine.proc.leash import proc_stat

if TYPE_CHECKING:
    from engine.metrics.streaming import RunFollower


# Without a follower; one started before the run; one started beside it, as the dashboard does.
WAYS = ("alone", "before", "beside")


class Timing(NamedTuple):
    run_s: float  # run_scenario, from its call to its verdict
    start_s: float  # the follower's start (0 when not followed)
    cpu_s: float  # the Spark driver JVM's CPU seconds over the start and the run


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc/PID/stat."""
    fields = proc_stat(pid)
    if fields is None:
        raise SystemExit(f"Cannot read /proc/{pid}/stat (this benchmark needs Linux).")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--scenario", default="ack-loss")
    parser.add_argument("--trigger-s", type=float, help="the follower's trigger (default 1 s)")
    args = parser.parse_args()
    from engine.run.runner import new_run_id, run_scenario
    from engine.scenarios.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()[args.scenario])
    timings: dict[str, list[Timing]] = {way: [] for way in WAYS}
    with warm_lab("follower-cost", scenario.nodes) as (cluster, spark):
        # The driver JVM says its own process id (Py4J), so /proc is read for that process.
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        for _ in range(args.repeats):
            for way in WAYS:
                run_id = new_run_id(scenario.name)
                followers: list[RunFollower] = []
                start_s: list[float] = []

                def start(run_id: str = run_id, followers=followers, start_s=start_s) -> None:
                    began = time.perf_counter()
                    followers.append(follow(spark, cluster, run_id, scenario, args.trigger_s))
                    start_s.append(time.perf_counter() - began)

                cpu_before = cpu_s(jvm)
                if way == "before":
                    start()
                starter = threading.Thread(target=start) if way == "beside" else None
                started = time.perf_counter()
                if starter is not None:
                    starter.start()
                run_scenario(scenario, cluster, run_id=run_id)
                run_s = time.perf_counter() - started
                if starter is not None:
                    starter.join()
                timing = Timing(run_s, sum(start_s), cpu_s(jvm) - cpu_before)
                for follower in followers:
                    follower.stop()
                timings[way].append(timing)
                print(
                    f"{way:7}  run {timing.run_s:5.2f} s  "
                    f"follower's start {timing.start_s:4.2f} s  "
                    f"Spark JVM CPU {timing.cpu_s:4.2f} s",
                    flush=True,
                )
    for way, runs in timings.items():
        print(
            f"median, {way}: run "
            f"{statistics.median(t.run_s for t in runs):.2f} s, start "
            f"{statistics.median(t.start_s for t in runs):.2f} s, Spark JVM CPU during start "
            f"and run {statistics.median(t.cpu_s for t in runs):.2f} s"
        )
    print(f"load average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
