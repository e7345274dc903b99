"""Verdict to final metrics: Spark's metrics that follow the run, against the batch job.

    .venv/bin/python -m benchmarks.streaming_bench [--repeats 5] [--messages 3000] [--first-runs 5]

On a new 1-node embedded cluster and a new SparkSession, warmed up as the dashboard warms
its own (engine.metrics.warm_up, made-up runs, then one read through the Kafka source):

1. warm: the typical run (ack-loss, 4 levels x --messages) with a follower
   (engine.metrics.streaming) started before it, timed from the run's verdict (run_scenario
   returns) to the final metrics saved (compute_and_save with the follower); then the same
   run's metrics by the batch job (compute_and_save without a follower, a fresh Kafka read),
   and the run again without a follower, for the run's own time. A first round warms the
   session's real-sized judgement and is not counted; --repeats rounds are.
2. first runs: --first-runs times each way, alternating, each in a new Python process with a
   new SparkSession warmed as the dashboard warms its own, on the same cluster: its one run,
   timed the same way. This is the first run a class sees after the dashboard starts.

Every followed run's metrics are checked equal to the checker's. The figures go between the
streaming markers of benchmarks/METRICS.md (the rest of the file stays as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from benchmarks.metrics_bench import COMPARED, REPORT, ROOT, split_report

START, END = "<!-- streaming:start -->", "<!-- streaming:end -->"
FINAL_TARGET_S, FIRST_TARGET_S = 1.0, 2.0  # issue 36's targets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.cluster.embedded import EmbeddedCluster
    from engine.metrics.streaming import RunFollower
    from engine.scenarios.scenario import Scenario


@contextmanager
def warm_lab(name: str, nodes: int) -> Iterator[tuple[EmbeddedCluster, SparkSession]]:
    """A new embedded cluster (its state and runs in temporary folders) and a SparkSession
    warmed as the dashboard warms its own; the cluster is stopped at the end."""
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix=f"{name}-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix=f"{name}-runs-"))
    from engine.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster(name, node_count=nodes)
    cluster.start(timeout=240)
    try:
        yield cluster, warm_spark(cluster)
    finally:
        cluster.stop()


def warm_spark(cluster: EmbeddedCluster) -> SparkSession:
    """The process's SparkSession, warmed up as the dashboard warms its own (pages/_spark.py)."""
    from engine.metrics.session import get_spark
    from engine.metrics.warm_up import warm_up_judgement

    spark = get_spark()
    warm_up_judgement(spark)  # what the dashboard runs on its session before anyone asks
    warm_up_judgement(spark, rounds=1, bootstrap=cluster.direct_bootstrap)
    return spark


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


def typical_scenario(messages: int) -> Scenario:
    """ack-loss with `messages` per level, no expectations, time enough for a loaded machine."""
    from engine.scenarios.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()["ack-loss"])
    workload = scenario.workload.model_copy(update={"messages": messages})
    # 3,000 messages outlast the scenario's 60 s on a loaded 2-core machine.
    return scenario.model_copy(update={"workload": workload, "expect": {}, "timeout_s": 300})


def timed_run(
    spark: SparkSession,
    cluster: EmbeddedCluster,
    scenario: Scenario,
    *,
    followed: bool,
    trigger_s: float | None = None,
) -> dict[str, Any]:
    """One run, followed or not; the seconds from its verdict to its saved metrics ("s"),
    the run's own seconds ("run_s"), and whether Spark's numbers equal the checker's."""
    from engine.metrics.compute import STREAM_SOURCE, compute_and_save
    from engine.run.runner import new_run_id, run_scenario

    run_id = new_run_id(scenario.name)
    began = time.perf_counter()
    follower = follow(spark, cluster, run_id, scenario, trigger_s) if followed else None
    output = run_scenario(scenario, cluster, run_id=run_id)
    verdict = time.perf_counter()
    steps: dict[str, float] = {}

    def step(what: str, _fraction: float) -> None:
        steps.setdefault(what, time.perf_counter())

    metrics = compute_and_save(run_id, spark=spark, follower=follower, progress=step)
    final = time.perf_counter()
    # Where the time went: the follower's end (Kafka's ends, the queries stopped),
    # the history read, the judgement, then the verdict table and the save.
    phases = {k: round(v, 2) for k, v in follower.timings.items()} if follower else {}
    if {"reading the run", "computing", "done"} <= set(steps):
        phases["history"] = round(steps["computing"] - steps["reading the run"], 2)
        phases["judge"] = round(steps["done"] - steps["computing"], 2)
        phases["verdicts_and_save"] = round(final - steps["done"], 2)
    if followed and metrics["source"] != STREAM_SOURCE:
        raise SystemExit(f"the follower fell back: {metrics['fallback_reason']}")
    return {
        "run_id": run_id,
        "s": round(final - verdict, 2),
        "run_s": round(verdict - began, 2),
        "equal": equal_to_checker(metrics, output),
        "read_before_end": follower.rows_before_end if follower else None,
        "read_in_all": follower.rows_in_all if follower else None,
        # Offsets (records, markers, aborted) the queries had not read when stopped.
        "left_unread": sum(
            end - start for spans in follower.left_unread.values() for start, end in spans.values()
        )
        if follower
        else None,
        "phases": phases,
    }


def equal_to_checker(metrics: dict[str, Any], output: dict[str, Any]) -> bool:
    return all(
        metrics["results"][level][key] == r[key]
        for level, r in output["results"].items()
        for key in COMPARED
    )


def measure(
    messages: int, repeats: int, trigger_s: float | None, first_runs: int
) -> dict[str, Any]:
    from engine.metrics.compute import compute_and_save
    from engine.run.runner import run_scenario

    scenario = typical_scenario(messages)
    out: dict[str, Any] = {"followed": [], "batch": [], "run_without": [], "first": []}
    with warm_lab("streaming-bench", nodes=1) as (cluster, spark):
        load_before = os.getloadavg()
        for k in range(1 + repeats):
            followed = timed_run(spark, cluster, scenario, followed=True, trigger_s=trigger_s)
            # The batch job on the same run, after it (the page's way without a follower).
            began = time.perf_counter()
            compute_and_save(followed["run_id"], spark=spark)
            batch = round(time.perf_counter() - began, 2)
            # A run without a follower, for the run's own time.
            began = time.perf_counter()
            run_scenario(scenario, cluster)
            without = round(time.perf_counter() - began, 2)
            print(f"round {k}: {followed}, batch {batch} s", flush=True)
            if k == 0:
                continue  # the session's first real-sized judgement: the first runs below
            out["followed"].append(followed)
            out["batch"].append(batch)
            out["run_without"].append(without)
        for k in range(first_runs):
            for way in ("batch", "followed"):
                first = first_run_in_new_process(cluster.name, way, messages, trigger_s)
                print(f"first run {k}, {way}: {first}", flush=True)
                out["first"].append({"way": way, **first})
        out["load"] = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    out["messages"], out["levels"] = messages, len(scenario.levels)
    return out


def first_run_in_new_process(
    cluster: str, way: str, messages: int, trigger_s: float | None
) -> dict[str, Any]:
    """timed_run in a new Python process (its own SparkSession, warmed up as the dashboard
    warms its own) on this process's cluster: a session's first run."""
    command = [sys.executable, "-m", "benchmarks.streaming_bench", "--first-run-child", way]
    command += ["--cluster", cluster, "--messages", str(messages)]
    command += ["--trigger-s", str(trigger_s)] if trigger_s else []
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the first run ({way}) failed: {done.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def first_run_child(cluster_name: str, way: str, messages: int, trigger_s: float | None) -> None:
    """The new process's side of first_run_in_new_process: prints timed_run's result."""
    from engine.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster.attach(cluster_name)
    spark = warm_spark(cluster)
    result = timed_run(
        spark, cluster, typical_scenario(messages), followed=way == "followed", trigger_s=trigger_s
    )
    print(json.dumps(result), flush=True)


def block(m: dict[str, Any], command: str) -> str:
    warm = m["followed"]
    load = m["load"]
    firsts = {way: [r for r in m["first"] if r["way"] == way] for way in ("batch", "followed")}

    def row(what: str, times: list[float], target: float | None, bold: bool = False) -> str:
        if not times:
            return f"| {what} | — | (not measured) | | |"
        median = statistics.median(times)
        shown = f"**{median:.2f}**" if bold else f"{median:.2f}"
        each = ", ".join(f"{t:.2f}" for t in times)
        if target is None:
            return f"| {what} | {shown} | {each} | — | |"
        verdict = "met" if median <= target else f"missed by {median - target:.2f} s"
        return f"| {what} | {shown} | {each} | {target:.1f} | {verdict} |"

    with_run = statistics.median(r["run_s"] for r in warm)
    without_run = statistics.median(m["run_without"])
    everything = warm + m["first"]
    lines = [
        START,
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} UTC with `{command}`: ack-loss, "
        f"{m['levels']} levels x {m['messages']:,} messages on a new 1-node embedded cluster. "
        f"Warm: {len(warm)} rounds on one SparkSession warmed up as the dashboard warms its "
        "own, after one uncounted round. First runs: each in a new Python process with a new "
        "session warmed up the same way, the two ways taking turns. Load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} before, {load[3]:.1f} / "
        f"{load[4]:.1f} / {load[5]:.1f} after (2 cores, shared).",
        "",
        "| from the verdict to the final metrics | median (s) | each (s) | target (s) | |",
        "|---|---|---|---|---|",
        row(
            "batch job after the run (reads Kafka; the dashboard's default), warm",
            m["batch"],
            FINAL_TARGET_S,
            bold=True,
        ),
        row(
            "followed by streaming queries (LAB_STREAMING_METRICS=1), warm",
            [r["s"] for r in warm],
            FINAL_TARGET_S,
            bold=True,
        ),
        row(
            "batch job, the first run after the dashboard's warm-up",
            [r["s"] for r in firsts["batch"]],
            FIRST_TARGET_S,
            bold=True,
        ),
        row(
            "followed, the first run after the dashboard's warm-up",
            [r["s"] for r in firsts["followed"]],
            FIRST_TARGET_S,
            bold=True,
        ),
        "",
        f"The run itself (run_scenario, no browser), median of the warm rounds: "
        f"{with_run:.2f} s with a follower, {without_run:.2f} s without "
        f"({(with_run / without_run - 1) * 100:+.0f}%). Records the queries had read at the "
        "run's verdict / when stopped / offsets left to the batch read of the rest (warm, "
        "then first runs): "
        + ", ".join(
            f"{r['read_before_end']}/{r['read_in_all']}/{r.get('left_unread')}"
            for r in everything
            if r["read_in_all"] is not None
        )
        + ". Equal to the checker's: "
        + ("yes, every run" if all(r["equal"] for r in everything) else "NO")
        + ".",
        "",
        "Where the time from the verdict went (s), per warm followed run: "
        + "; ".join(", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items()) for r in warm)
        + ". Per first run (batch, then followed): "
        + "; ".join(
            ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
            for r in firsts["batch"] + firsts["followed"]
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
        "--first-runs", type=int, default=5, help="first runs of each way, new processes"
    )
    parser.add_argument(
        "--trigger-s",
        type=float,
        help="how often the queries look for new records (default: "
        "engine.metrics.streaming.TRIGGER_S, 1 s)",
    )
    parser.add_argument("--no-write", action="store_true", help="print, do not write METRICS.md")
    parser.add_argument("--first-run-child", choices=("batch", "followed"), help=argparse.SUPPRESS)
    parser.add_argument("--cluster", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_run_child:
        first_run_child(args.cluster, args.first_run_child, args.messages, args.trigger_s)
        return 0
    command = ".venv/bin/python -m benchmarks.streaming_bench"
    if (args.messages, args.repeats, args.first_runs) != (3000, 5, 5):
        command += f" --messages {args.messages} --repeats {args.repeats}"
        command += f" --first-runs {args.first_runs}"
    if args.trigger_s is not None:
        command += f" --trigger-s {args.trigger_s:g}"
    text = block(measure(args.messages, args.repeats, args.trigger_s, args.first_runs), command)
    print(text)
    if not args.no_write:
        write_block(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
