"""The cost of each delivery guarantee on this machine, next to the published claims (issue 8).

    .venv/bin/python -m benchmarks.cost            # full: about 15-20 minutes
    .venv/bin/python -m benchmarks.cost --quick    # the dashboard's quick run: under a minute
    .venv/bin/python -m benchmarks.cost --published --readme   # the published baselines

Full run, in order:
1. start times: 1-node and 3-node clusters (cold and warm, via benchmarks.cluster_start) and
   the SparkSession (cold and warm);
2. on a 3-node cluster (replication 3, min ISR 2): producer throughput of every guarantee
   setup at 100 B, 1 KB and 10 KB, in shuffled rounds; read_committed against
   read_uncommitted latency at 10 ms, 100 ms and 1 s transactions; the yardsticks (bare
   confluent_kafka loop, Kafka's ProducerPerformance, the engine's producer, the proxy);
3. the yardsticks again on a 1-node cluster, where the client rather than the brokers limits;
4. the peak memory of the 3-node cluster, a SparkSession and the dashboard together.

`--published`: on a 3-node cluster, 1 KB messages only, the transactional producer (100 ms
transactions) beside the two baselines Confluent's 2017 figures were measured against
(in-order at-least-once with one request in flight; at-most-once with acks=1 and five in
flight) and beside the lab's own at-least-once and acks=1 producers; 5 shuffled rounds.

`--readme` writes the tables into benchmarks/README.md (between its result markers);
`--json PATH` keeps every trial.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.base import paths
from engine.base.errors import ClusterNotRunningError, LabError
from engine.cluster import current_cluster, start_cluster
from engine.cluster.embedded import EmbeddedCluster
from engine.cost import memory, report, startup
from engine.cost.latency import run_latency
from engine.cost.suite import machine, run_quick
from engine.cost.throughput import (
    ACKS1,
    BASELINE,
    published_setups,
    run_matrix,
    setups,
    txn_label,
)
from engine.cost.yardsticks import (
    BARE,
    BARE_PROXY,
    ENGINE_BATCH,
    ENGINE_EACH,
    run_yardsticks,
)

README = Path(__file__).resolve().parent / "README.md"
START, END = "<!-- cost-results:start -->", "<!-- cost-results:end -->"
PUBLISHED_MARKERS = ("<!-- published-baselines:start -->", "<!-- published-baselines:end -->")
GIB_MIB = 4096.0

FULL_SIZES = (100, 1024, 10240)
FULL_COUNTS = {100: 60_000, 1024: 30_000, 10240: 6_000}


def say(what: str, _fraction: float = 0.0) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {what}", flush=True)


def section(title: str, rows: list[dict[str, Any]], note: str = "") -> str:
    text = f"### {title}\n\n" + (f"{note}\n\n" if note else "") + report.markdown(rows)
    print("\n" + text, flush=True)
    return text


def quick(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """Run on the current cluster, or on a 1-node cluster started (and stopped) for it."""
    owned = None
    try:
        cluster = current_cluster()
        if not cluster.status(timeout=3).reachable:
            raise ClusterNotRunningError("not reachable")
    except LabError:
        say("no running cluster: starting a 1-node cluster for the quick run")
        os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-cost-"))
        owned = cluster = EmbeddedCluster("cost-quick", node_count=1)
        cluster.start(timeout=180)
    try:
        began = time.monotonic()
        result = run_quick(cluster, progress=say)
        say(f"quick run took {time.monotonic() - began:.0f} s")
    finally:
        if owned is not None:
            owned.stop()
    parts = [
        section(
            "Published claims beside this run", report.claim_rows(result.matrix, result.latency)
        ),
        section("Throughput, 1 KB", report.throughput_rows(result.matrix)),
        section("Latency", report.latency_rows(result.latency)),
    ]
    if result.yardsticks:
        parts.append(section("Yardsticks", report.yardstick_rows(result.yardsticks)))
    raw = {
        "machine before": result.conditions["before"],
        "machine after": result.conditions["after"],
        "throughput": result.matrix.to_json(),
        "latency": result.latency.to_json(),
    }
    return parts, raw


def published_run(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The published figures' own baselines beside the lab's levels, 1 KB, on 3 nodes."""
    os.environ["LAB_STATE_DIR"] = tempfile.mkdtemp(prefix="lab-cost-")
    raw: dict[str, Any] = {"machine before": machine()}
    by_label = {s.label: s for s in setups(txn_ms=(100,))}
    chosen = [*published_setups(), by_label[BASELINE], by_label[ACKS1], by_label[txn_label(100)]]
    say("starting the 3-node cluster")
    cluster = EmbeddedCluster("cost-published", node_count=3)
    start_cluster(cluster, timeout=300)
    count = max(100, int(FULL_COUNTS[1024] * args.scale))
    try:
        direct = cluster.direct_bootstrap
        matrix = run_matrix(
            direct,
            direct,
            nodes=3,
            sizes=[1024],
            counts={1024: count},
            rounds=args.rounds,
            chosen=chosen,
            warmup=500,
            progress=say,
        )
    finally:
        cluster.stop()
    raw["throughput"] = matrix.to_json()
    raw["machine after"] = machine()
    parts = [
        section(
            "The published figures against their own baselines",
            report.claim_rows(matrix, None)[:2],
            "The transactional producer with 100 ms transactions, 1 KB messages, 3 nodes "
            "(replication 3, min ISR 2, 3 partitions), against the baseline each figure was "
            "published with and against the lab's level.",
        ),
        section(
            "Producer throughput, 1 KB (3 nodes)",
            report.throughput_rows(matrix),
            f"{args.rounds} shuffled rounds of {count:,} timed messages (500 untimed first); "
            "overheads are paired within each round; positive = slower than the base.",
        ),
    ]
    return parts, raw


def full(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    state = Path(tempfile.mkdtemp(prefix="lab-cost-"))
    os.environ["LAB_STATE_DIR"] = str(state / "state")
    raw: dict[str, Any] = {"machine before": machine()}
    parts: list[str] = []
    rounds = args.rounds
    counts = {size: max(100, int(n * args.scale)) for size, n in FULL_COUNTS.items()}
    ys_count = max(500, int(30_000 * args.scale))

    if not args.skip_start:
        say("start times")
        repeats = args.start_repeats
        rows = startup.cluster_rows(repeats, cold=not args.skip_cold, progress=say)
        rows.append(startup.spark_row(repeats, cold=not args.skip_cold, progress=say))
        start_rows = [
            {
                "what": r.what,
                "cold start (s)": f"{r.cold_s:.1f}" if r.cold_s is not None else "–",
                "warm start, median [min–max] (s)": r.warm.text("{:.1f}"),
                "RSS idle (MiB)": f"{r.rss_idle_mib:.0f}" if r.rss_idle_mib else "–",
                "RSS after 20k × 1 KB (MiB)": f"{r.rss_loaded_mib:.0f}"
                if r.rss_loaded_mib
                else "–",
            }
            for r in rows
        ]
        raw["start"] = start_rows
        parts.append(
            section(
                "Start times",
                start_rows,
                "Cold: Maven resolves the jars (Kafka's, or Spark's Kafka connector) into an "
                "empty local repository, then the first start. Warm: jars cached; for Spark, a "
                f"new Python process until `get_spark()` returns ({args.start_repeats} starts "
                "each).",
            )
        )

    say("starting the 3-node cluster")
    cluster = EmbeddedCluster("cost-3", node_count=3)
    start_cluster(cluster, timeout=300)
    try:
        direct, proxied = cluster.direct_bootstrap, cluster.proxied_bootstrap
        say("throughput matrix")
        matrix = run_matrix(
            direct,
            direct,
            nodes=3,
            sizes=FULL_SIZES,
            counts=counts,
            rounds=rounds,
            chosen=[*setups(), *published_setups()],
            progress=say,
        )
        raw["throughput"] = matrix.to_json()
        say("latency")
        latency = run_latency(direct, direct, nodes=3, rounds=3, progress=say)
        raw["latency"] = latency.to_json()
        say("yardsticks on 3 nodes")
        ys3 = run_yardsticks(direct, proxied, nodes=3, count=ys_count, rounds=rounds, progress=say)
        raw["yardsticks 3 nodes"] = ys3.to_json()
        peak = notes = None
        if not args.skip_memory:
            say("whole-stack memory")
            peak, notes = memory.whole_stack(
                cluster, state / "state", messages=max(1000, int(50_000 * args.scale)), progress=say
            )
            raw["memory"] = {"rss": peak.rss, "pss": peak.pss, "notes": notes}
    finally:
        cluster.stop()

    say("yardsticks on 1 node")
    one = EmbeddedCluster("cost-1", node_count=1)
    one.start(timeout=180)
    try:
        ys1 = run_yardsticks(
            one.direct_bootstrap,
            one.proxied_bootstrap,
            nodes=1,
            count=ys_count,
            rounds=rounds,
            contenders=[BARE, BARE_PROXY, ENGINE_BATCH, ENGINE_EACH],
            progress=say,
        )
        raw["yardsticks 1 node"] = ys1.to_json()
    finally:
        one.stop()
    raw["machine after"] = machine()

    parts.insert(0, section("Published claims beside this run", report.claim_rows(matrix, latency)))
    parts.append(
        section(
            "Producer throughput (3 nodes, replication 3, min ISR 2, 3 partitions)",
            report.throughput_rows(matrix),
            f"{rounds} shuffled rounds; messages per trial: "
            + ", ".join(f"{report.size_text(s)}: {n:,}" for s, n in counts.items())
            + ". Overheads are paired within each round; positive = slower than the base.",
        )
    )
    parts.append(
        section(
            "End-to-end latency of one transactional stream (3 nodes)",
            report.latency_rows(latency),
            "1000 msg/s of 200 B, one partition; both consumers read the same stream at once "
            "with the lab's consumer settings; medians [min–max] of 3 rounds.",
        )
    )
    parts.append(
        section(
            "Yardsticks, 3 nodes (1 KB, at-least-once settings)",
            report.yardstick_rows(ys3),
            f"{rounds} shuffled rounds, {ys_count:,} messages per trial (1,000 for the "
            "per-message engine mode); ratios are paired within each round.",
        )
    )
    parts.append(
        section(
            "Yardsticks, 1 node (1 KB, at-least-once settings)",
            report.yardstick_rows(ys1),
            "Replication 1: the brokers have the least to do, so the client limits.",
        )
    )
    if peak is not None and notes is not None:
        rows = [
            {
                "part": name,
                "peak RSS (MiB)": f"{peak.rss.get(name, 0):.0f}",
                "peak PSS (MiB)": f"{peak.pss.get(name, 0):.0f}",
            }
            for name in ("cluster", "spark", "dashboard", "total")
        ]
        verdict = "fits" if peak.rss["total"] <= GIB_MIB else "does NOT fit"
        computed = notes.get("spark computed the run's metrics")
        parts.append(
            section(
                "Peak memory of the whole stack",
                rows,
                f"Sampled every 0.5 s ({notes['samples']} samples) after {notes['messages']:,} "
                "× 1 KB went through the proxy into the 3-node cluster, while a headless browser "
                "ran a Failure lab scenario on the dashboard and opened its Metrics page (the "
                f"dashboard's Spark computed that run's metrics: {computed}); the browser is not "
                f"counted. Peak total RSS {peak.rss['total']:.0f} MiB: the stack {verdict} in "
                "4 GiB (the peak of the sum, not the sum of the peaks).",
            )
        )
    return parts, raw


def write_readme(
    parts: list[str], command: str, raw: dict[str, Any], markers: tuple[str, str] = (START, END)
) -> None:
    start, end = markers
    before, after = raw.get("machine before", {}), raw.get("machine after", {})
    block = (
        f"{start}\n\nProduced by `{command}` on {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} "
        f"UTC, "
        f"{before.get('cores')} cores, librdkafka {before.get('librdkafka')}, Kafka "
        f"{paths.kafka_version()}. Load average (1/5/15 min) before: "
        f"{before.get('load average (1/5/15 min)')}; after: "
        f"{after.get('load average (1/5/15 min)')}.\n\n" + "\n".join(parts) + f"\n{end}"
    )
    text = README.read_text() if README.exists() else f"# Benchmarks\n\n{start}\n{end}\n"
    if start not in text or end not in text:
        text += f"\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    README.write_text(head + block + tail)
    print(f"wrote the tables into {README}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the dashboard's under-a-minute run")
    parser.add_argument(
        "--published", action="store_true", help="the published figures' own baselines, 1 KB"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every setup (full run)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply the messages per trial (smoke runs)"
    )
    parser.add_argument("--start-repeats", type=int, default=3, help="starts of each kind")
    parser.add_argument("--skip-start", action="store_true", help="leave out the start times")
    parser.add_argument("--skip-cold", action="store_true", help="warm starts only")
    parser.add_argument("--skip-memory", action="store_true", help="leave out the memory test")
    parser.add_argument("--readme", action="store_true", help="write benchmarks/README.md")
    parser.add_argument("--json", type=Path, help="write every trial to this file")
    args = parser.parse_args()
    command = ".venv/bin/python -m benchmarks.cost " + " ".join(sys.argv[1:])
    print(json.dumps(machine()), flush=True)
    try:
        if args.quick:
            parts, raw = quick(args)
        elif args.published:
            parts, raw = published_run(args)
        else:
            parts, raw = full(args)
    except LabError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1, default=str))
    if args.readme:
        markers = PUBLISHED_MARKERS if args.published else (START, END)
        write_readme(parts, command.strip(), raw, markers)


if __name__ == "__main__":
    main()
