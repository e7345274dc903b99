"""Verdict to final metrics: Spark's metrics that follow the run, against the batch job.

    .venv/bin/python -m benchmarks.streaming_bench [--repeats 5] [--messages 3000]

On a new 1-node embedded cluster and a new SparkSession, warmed up as the dashboard warms
its own (engine.metrics.warm_up, made-up runs, then one read through the Kafka source):

1. first run: the typical run (ack-loss, 4 levels x --messages) with a follower
   (engine.metrics.streaming) started before it; timed from the run's verdict (run_scenario
   returns) to the final metrics saved (compute_and_save with the follower): the first
   followed run after the dashboard starts;
2. then --repeats more followed runs, timed the same way (warm);
3. the same runs' batch metrics after the run (compute_and_save without a follower, a fresh
   Kafka read), for comparison, and how long each run took with and without a follower.

Every followed run's metrics are checked equal to the checker's. The figures go between the
streaming markers of benchmarks/METRICS.md (the rest of the file stays as it is).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from benchmarks.metrics_bench import COMPARED, REPORT, split_report

START, END = "<!-- streaming:start -->", "<!-- streaming:end -->"
FINAL_TARGET_S, FIRST_TARGET_S = 1.0, 2.0  # issue 36's targets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.cluster.embedded import EmbeddedCluster
    from engine.metrics.streaming import RunFollower
    from engine.scenario import Scenario


@contextmanager
def warm_lab(name: str, nodes: int) -> Iterator[tuple[EmbeddedCluster, SparkSession]]:
    """A new embedded cluster (its state and runs in temporary folders) and a SparkSession
    warmed as the dashboard warms its own; the cluster is stopped at the end."""
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix=f"{name}-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix=f"{name}-runs-"))
    from engine.cluster.embedded import EmbeddedCluster
    from engine.metrics.session import get_spark
    from engine.metrics.warm_up import warm_up_judgement

    cluster = EmbeddedCluster(name, node_count=nodes)
    cluster.start(timeout=240)
    try:
        spark = get_spark()
        warm_up_judgement(spark)  # what the dashboard runs on its session before anyone asks
        warm_up_judgement(spark, rounds=1, bootstrap=cluster.direct_bootstrap)
        yield cluster, spark
    finally:
        cluster.stop()


def follow(
    spark: SparkSession,
    cluster: EmbeddedCluster,
    run_id: str,
    scenario: Scenario,
    trigger_s: float | None,
) -> RunFollower:
    """A follower on the run's judged topics, started before the run (as the dashboard does)."""
    from engine.metrics.streaming import TRIGGER_S, start_following

    return start_following(
        spark,
        cluster.direct_bootstrap,
        run_id,
        scenario.levels,
        scenario.pipeline,
        trigger_s=trigger_s or TRIGGER_S,
    )


def measure(messages: int, repeats: int, trigger_s: float | None) -> dict[str, Any]:
    from engine.metrics.compute import STREAM_SOURCE, compute_and_save
    from engine.runner import new_run_id, run_scenario
    from engine.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()["ack-loss"])
    workload = scenario.workload.model_copy(update={"messages": messages})
    # 3,000 messages outlast the scenario's 60 s on a loaded 2-core machine.
    scenario = scenario.model_copy(update={"workload": workload, "expect": {}, "timeout_s": 300})
    out: dict[str, Any] = {"followed": [], "batch": [], "run_with": [], "run_without": []}
    with warm_lab("streaming-bench", nodes=1) as (cluster, spark):
        load_before = os.getloadavg()
        for k in range(1 + repeats):
            run_id = new_run_id(scenario.name)
            began = time.perf_counter()
            follower = follow(spark, cluster, run_id, scenario, trigger_s)
            output = run_scenario(scenario, cluster, run_id=run_id)
            verdict = time.perf_counter()
            steps: dict[str, float] = {}

            def step(what: str, _fraction: float, steps: dict[str, float] = steps) -> None:
                steps.setdefault(what, time.perf_counter())

            metrics = compute_and_save(run_id, follower=follower, progress=step)
            final = time.perf_counter()
            # Where the time went: the follower's end (Kafka's ends, last micro-batch, stop),
            # the history read, the judgement, then the verdict table and the save.
            phases = {k: round(v, 2) for k, v in follower.timings.items()}
            if {"reading the run", "computing", "done"} <= set(steps):
                phases["history"] = round(steps["computing"] - steps["reading the run"], 2)
                phases["judge"] = round(steps["done"] - steps["computing"], 2)
                phases["verdicts_and_save"] = round(final - steps["done"], 2)
            if metrics["source"] != STREAM_SOURCE:
                raise SystemExit(f"the follower fell back: {metrics['fallback_reason']}")
            equal = all(
                metrics["results"][level][key] == r[key]
                for level, r in output["results"].items()
                for key in COMPARED
            )
            out["followed"].append(
                {
                    "s": round(final - verdict, 2),
                    "equal": equal,
                    "read_before_end": follower.rows_before_end,
                    "read_in_all": follower.rows_in_all,
                    "phases": phases,
                }
            )
            out["run_with"].append(round(verdict - began, 2))
            # The batch job on the same run, after it (the page's way without a follower).
            began = time.perf_counter()
            compute_and_save(run_id, spark=spark)
            out["batch"].append(round(time.perf_counter() - began, 2))
            # A run without a follower, for the run's own time.
            began = time.perf_counter()
            run_scenario(scenario, cluster)
            out["run_without"].append(round(time.perf_counter() - began, 2))
            print(f"round {k}: {out['followed'][-1]}, batch {out['batch'][-1]} s", flush=True)
        out["load"] = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    out["messages"], out["levels"] = messages, len(scenario.levels)
    return out


def block(m: dict[str, Any], command: str) -> str:
    first, warm = m["followed"][0], m["followed"][1:]
    warm_s = [r["s"] for r in warm]
    median = statistics.median(warm_s)
    batch_warm = statistics.median(m["batch"][1:])
    load = m["load"]

    def verdict(value: float, target: float) -> str:
        return "met" if value <= target else f"missed by {value - target:.2f} s"

    with_run = statistics.median(m["run_with"][1:])
    without_run = statistics.median(m["run_without"][1:])
    lines = [
        START,
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} UTC with `{command}`: ack-loss, "
        f"{m['levels']} levels x {m['messages']:,} messages, a new 1-node embedded cluster "
        "and a new SparkSession warmed up as the dashboard warms its own. Load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} before, {load[3]:.1f} / "
        f"{load[4]:.1f} / {load[5]:.1f} after (2 cores, shared).",
        "",
        "| from the verdict to the final metrics | median (s) | each (s) | target (s) | |",
        "|---|---|---|---|---|",
        f"| followed by streaming queries, warm | **{median:.2f}** | "
        f"{', '.join(f'{t:.2f}' for t in warm_s)} | {FINAL_TARGET_S:.1f} | "
        f"{verdict(median, FINAL_TARGET_S)} |",
        f"| followed, the first run after the warm-up | **{first['s']:.2f}** | "
        f"{first['s']:.2f} | {FIRST_TARGET_S:.1f} | {verdict(first['s'], FIRST_TARGET_S)} |",
        f"| batch job after the run (reads Kafka), warm | {batch_warm:.2f} | "
        f"{', '.join(f'{t:.2f}' for t in m['batch'][1:])} | — | |",
        f"| batch job, the first run after the warm-up | {m['batch'][0]:.2f} | "
        f"{m['batch'][0]:.2f} | — | |",
        "",
        f"The run itself (run_scenario, no browser), median of the warm rounds: "
        f"{with_run:.2f} s with a follower, {without_run:.2f} s without "
        f"({(with_run / without_run - 1) * 100:+.0f}%). Records the queries had read before "
        "the run's end, of all they read: "
        + ", ".join(f"{r['read_before_end']}/{r['read_in_all']}" for r in m["followed"])
        + ". Equal to the checker's: "
        + ("yes, every run" if all(r["equal"] for r in m["followed"]) else "NO")
        + ".",
        "",
        "Where the time from the verdict went, per followed run (s): "
        + "; ".join(
            ", ".join(f"{k} {v:.2f}" for k, v in r.get("phases", {}).items()) for r in m["followed"]
        )
        + ".",
        END,
    ]
    return "\n".join(lines)


def write_block(text: str) -> None:
    head, _, tail = split_report(REPORT.read_text(), START, END)
    REPORT.write_text(head + text + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--trigger-s",
        type=float,
        help="how often the queries look for new records (default: "
        "engine.metrics.streaming.TRIGGER_S, 1 s)",
    )
    parser.add_argument("--no-write", action="store_true", help="print, do not write METRICS.md")
    args = parser.parse_args()
    command = ".venv/bin/python -m benchmarks.streaming_bench"
    if (args.messages, args.repeats) != (3000, 5):
        command += f" --messages {args.messages} --repeats {args.repeats}"
    if args.trigger_s is not None:
        command += f" --trigger-s {args.trigger_s:g}"
    text = block(measure(args.messages, args.repeats, args.trigger_s), command)
    print(text)
    if not args.no_write:
        write_block(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
