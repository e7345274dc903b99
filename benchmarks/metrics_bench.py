"""How fast the PySpark metrics are, and how they scale against DuckDB on the same data.

    .venv/bin/python -m benchmarks.metrics_bench                 # all of it, ~17 min here
    .venv/bin/python -m benchmarks.metrics_bench --sizes 10000,100000 --skip-run --skip-cold
    .venv/bin/python -m benchmarks.metrics_bench --only typical   # the typical run alone

Five measurements, written between the markers in benchmarks/METRICS.md:

1. session start: cold (empty Maven repository and cache, so the connector is downloaded),
   a new process with the connector cached, and get_spark() on a running session;
2. a typical scenario run: ack-loss with 3,000 messages per level on a real 1-node cluster,
   then its metrics on the warm session (Kafka read at both isolations included), checked
   equal to the checker's;
3. scaling: synthetic runs of N messages in Parquet with the Kafka source's columns and the
   history's, judged by engine.metrics.spark_job.judge and by the same definitions in
   DuckDB SQL; each in a fresh process, timed without start-up, with its peak memory,
   the median of 3 (--scaling-repeats); Spark with the settings the lab uses at that size;
4. the standalone-cluster case: a master and one worker started from pyspark's own
   spark-class on this machine, the same 1,000,000-message run (--cluster-size), beside
   local mode: the cluster path's overhead, not a speed-up, on one machine;
5. the machine's load while measuring, because other work on a 2-core machine moves
   every number here.

A full run (the default sizes, the typical run, the cluster case) replaces the block; a
partial one (other `--sizes`, `--skip-run`, `--cluster-size 0`) replaces only the scaling
rows it measured and adds a dated line saying so. A file whose markers are damaged is
refused, never written around.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "benchmarks" / "METRICS.md"
START, END = "<!-- measured:start -->", "<!-- measured:end -->"
FULL_SIZES = "10000,100000,1000000,10000000"  # a run with these (and the rest) writes the block
LEVEL, TOPIC, PARTITIONS = "at-least-once", "lab.bench.at-least-once.out", 8
COMPARED = (
    "sent",
    "acked",
    "delivered",
    "duplicates",
    "lost",
    "reordered",
    "aborted_visible",
    "latency_ms",
)


# ---- synthetic data -------------------------------------------------------------------
def make_data(folder: Path, messages: int) -> None:
    """Write a run of `messages` ids as Parquet: both Kafka views and the history.

    1 in 100 ids has a retried copy 3 messages later (a duplicate), 1 in 200 is never
    written (lost), 1 in 500 is written 50 messages late (reordered), 1 in 1,000 has an
    aborted copy before its committed one, 1 in 300 fails its ack; 1,000 messages/s.
    """
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"""
        CREATE TEMP TABLE msgs AS
        SELECT i AS id, 1.7e9 + i * 0.001 AS created_at,
               (i * 7919 % 997) / 1000.0 + 0.002 AS latency_s
        FROM range({messages}) t(i)""")
    con.execute(f"""
        CREATE TEMP TABLE recs AS
        WITH copies AS (
            SELECT id, created_at, false AS aborted,
                   id + CASE WHEN id % 500 = 11 THEN 50 * {PARTITIONS} ELSE 0 END AS sort_key,
                   0 AS copy
            FROM msgs WHERE id % 200 <> 7
            UNION ALL SELECT id, created_at, false, id + 3 * {PARTITIONS}, 1 FROM msgs
                   WHERE id % 100 = 3 AND id % 200 <> 7
            UNION ALL SELECT id, created_at, true, id - 0.5, -1 FROM msgs
                   WHERE id % 1000 = 13
        )
        SELECT '{TOPIC}' AS topic, CAST(id % {PARTITIONS} AS INTEGER) AS partition,
               row_number() OVER (PARTITION BY id % {PARTITIONS} ORDER BY sort_key, copy)
                   - 1 AS "offset",
               aborted,
               CAST('{{"id":' || id || ',"created_at":' || created_at ||
                    ',"run":"bench","level":"{LEVEL}","by":"producer"}}' AS BLOB) AS value
        FROM copies""")
    con.execute(f"""COPY (SELECT topic, partition, "offset", value FROM recs)
        TO '{folder}/uncommitted.parquet' (FORMAT parquet)""")
    con.execute(f"""COPY (SELECT topic, partition, "offset", value FROM recs WHERE NOT aborted)
        TO '{folder}/committed.parquet' (FORMAT parquet)""")
    con.execute(f"""COPY (
        SELECT '{LEVEL}' AS level, created_at AS t, 'producer' AS proc, 'send' AS ev, id,
               CAST(NULL AS BIGINT[]) AS ids,
               -- a source's ack position: none in a producer pipeline (HISTORY_SCHEMA)
               CAST(NULL AS INTEGER) AS partition, CAST(NULL AS BIGINT) AS "offset"
        FROM msgs
        UNION ALL SELECT '{LEVEL}', created_at + 0.001, 'producer',
               CASE WHEN id % 300 = 5 THEN 'fail' ELSE 'ack' END, id, NULL, NULL, NULL FROM msgs
        UNION ALL SELECT '{LEVEL}', created_at + latency_s, 'sink', 'consumed', id, NULL, NULL,
               NULL FROM msgs WHERE id % 200 <> 7
        ORDER BY t) TO '{folder}/history.parquet' (FORMAT parquet)""")
    (folder / "messages").write_text(str(messages))


# ---- the workers (each in its own process, for its peak memory) -----------------------
def peak_rss_mib(pids: list[int]) -> float:
    """Sum of VmHWM (peak resident memory) of processes, in MiB."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        total += int(match.group(1)) if match else 0
    return round(total / 1024, 1)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out + [g for c in out for g in children(c)]


def spark_judge(spark: Any, folder: Path) -> tuple[float, dict[str, Any]]:
    from engine.metrics.spark_job import LevelSpec, judge

    began = time.perf_counter()
    judged = judge(
        uncommitted=spark.read.parquet(str(folder / "uncommitted.parquet")),
        committed=spark.read.parquet(str(folder / "committed.parquet")),
        history=spark.read.parquet(str(folder / "history.parquet")),
        levels=[LevelSpec(LEVEL, TOPIC, "read_uncommitted")],
        messages=int((folder / "messages").read_text()),
    )
    seconds = time.perf_counter() - began
    judged.release()
    return seconds, {k: judged.results[LEVEL][k] for k in COMPARED}


def worker_spark(folder: Path, warmup: Path) -> dict[str, Any]:
    from engine.metrics.session import get_spark

    spark = get_spark()
    # The first query of a JVM compiles Spark's generated code; a small run pays for it, so
    # the timed one measures the work (as the dashboard's long-lived session would).
    spark_judge(spark, warmup)
    seconds, results = spark_judge(spark, folder)
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mib": peak_rss_mib([os.getpid(), *children(os.getpid()), *executors()]),
        "results": results,
    }


def executors() -> list[int]:
    """The pids of Spark executors on this machine (a standalone cluster's, not our children)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"CoarseGrainedExecutorBackend" in (
                (proc / "cmdline").read_bytes()
            ):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


DUCKDB_SQL = """
WITH raw AS (
    SELECT 'read_uncommitted' AS view, partition, "offset", decode(value) AS v
    FROM read_parquet('{u}') WHERE topic = '{topic}'
    UNION ALL
    SELECT 'read_committed', partition, "offset", decode(value)
    FROM read_parquet('{c}') WHERE topic = '{topic}'
), parsed AS (
    SELECT view, partition, "offset",
           TRY_CAST(json_extract(v, '$.id') AS BIGINT) AS id,
           TRY_CAST(json_extract(v, '$.created_at') AS DOUBLE) AS created_at
    FROM raw WHERE json_valid(v)
), marked AS (
    SELECT *, bool_or(view = 'read_committed')
              OVER (PARTITION BY partition, "offset") AS in_committed
    FROM parsed WHERE id IS NOT NULL
), stored AS (
    SELECT * FROM marked WHERE view = '{isolation}'
), reordered AS (
    -- engine.judging.checker.reordered_ids: every copy counts, not only an id's first
    SELECT DISTINCT id FROM (
        SELECT id, greatest(-1, max(id) OVER (PARTITION BY partition ORDER BY "offset"
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS highest
        FROM stored) WHERE id < highest
), copies AS (
    SELECT id, count(*) AS copies,
           arg_min(created_at, (partition, "offset")) AS created_at,
           count(*) FILTER (WHERE NOT in_committed) AS aborted_copies
    FROM stored GROUP BY id
), hist AS (
    SELECT id,
        min(t) FILTER (WHERE split_part(proc, '#', 1) IN ('producer', 'source')
                       AND ev = 'send') AS sent_at,
        min(t) FILTER (WHERE split_part(proc, '#', 1) IN ('producer', 'source')
                       AND ev = 'ack') AS acked_at,
        min(t) FILTER (WHERE proc = 'sink' AND ev = 'consumed') AS consumed_at
    FROM read_parquet('{h}') WHERE id IS NOT NULL GROUP BY id
), txn AS (
    SELECT id, bool_or(ev = 'txn_abort') AND NOT bool_or(ev = 'txn_commit') AS by_design
    FROM (SELECT ev, unnest(ids) AS id FROM read_parquet('{h}')
          WHERE split_part(proc, '#', 1) IN ('producer', 'source')
            AND ev IN ('txn_abort', 'txn_commit'))
    GROUP BY id
), verdicts AS (
    SELECT l.id, coalesce(c.copies, 0) AS copies, coalesce(c.aborted_copies, 0) AS aborted,
           r.id IS NOT NULL AS reordered, h.sent_at, h.acked_at,
           coalesce(t.by_design, false) AS by_design,
           CASE WHEN h.consumed_at <> 0 AND c.created_at <> 0 AND c.copies > 0
                THEN (h.consumed_at - c.created_at) * 1000.0 END AS latency
    FROM range({messages}) l(id)
    LEFT JOIN copies c USING (id) LEFT JOIN reordered r USING (id)
    LEFT JOIN hist h USING (id) LEFT JOIN txn t USING (id)
)
SELECT count(sent_at), count(acked_at), count(*) FILTER (WHERE copies > 0),
       sum(greatest(copies - 1, 0)),
       count(*) FILTER (WHERE aborted = 0 AND copies = 0 AND NOT by_design),
       count(*) FILTER (WHERE reordered), sum(aborted),
       list(latency ORDER BY latency) FILTER (WHERE latency IS NOT NULL)
FROM verdicts
"""


def worker_duckdb(folder: Path) -> dict[str, Any]:
    import duckdb

    messages = int((folder / "messages").read_text())
    con = duckdb.connect()
    began = time.perf_counter()
    row = con.execute(
        DUCKDB_SQL.format(
            u=folder / "uncommitted.parquet",
            c=folder / "committed.parquet",
            h=folder / "history.parquet",
            topic=TOPIC,
            isolation="read_uncommitted",
            messages=messages,
        )
    ).fetchone()
    ordered = row[7] or []

    def nearest(q: int) -> float | None:
        # engine.judging.checker.percentile on the list DuckDB sorted.
        return (
            round(ordered[max(1, math.ceil(q / 100.0 * len(ordered))) - 1], 2) if ordered else None
        )

    seconds = time.perf_counter() - began
    names = ("sent", "acked", "delivered", "duplicates", "lost", "reordered", "aborted_visible")
    results: dict[str, Any] = {k: int(v or 0) for k, v in zip(names, row[:7], strict=True)}
    results["latency_ms"] = {
        "p50": nearest(50),
        "p95": nearest(95),
        "p99": nearest(99),
        "max": nearest(100),
    }
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mib": peak_rss_mib([os.getpid()]),
        "results": results,
    }


def worker_start() -> dict[str, Any]:
    """One get_spark() in a fresh process, then a second call on the running session."""
    from engine.metrics import session

    began = time.perf_counter()
    session.get_spark()
    first = time.perf_counter() - began
    began = time.perf_counter()
    session.get_spark()
    return {"first": round(first, 2), "again": round(time.perf_counter() - began, 4)}


def in_process(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run this module's worker in a fresh Python process; its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.metrics_bench", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {args} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the measurements -----------------------------------------------------------------
def measure_start(skip_cold: bool) -> list[tuple[str, float]]:
    rows = []
    if not skip_cold:
        with tempfile.TemporaryDirectory(prefix="metrics-cold-") as cold:
            got = in_process(
                ["--worker", "start"],
                {"LAB_CACHE_DIR": cold, "MAVEN_OPTS": f"-Dmaven.repo.local={cold}/m2"},
            )
            rows.append(
                ("cold: empty Maven repository and cache (downloads the connector)", got["first"])
            )
    got = in_process(["--worker", "start"])
    rows.append(("new process, connector cached (JVM start + warm-up query)", got["first"]))
    rows.append(("get_spark() on the running session", got["again"]))
    return rows


def measure_run(
    messages: int, repeats: int, warmups: int = 2, dashboard_warm_up: bool = False
) -> dict[str, Any]:
    """A real ack-loss run of `messages` per level, then its metrics on a warm session."""
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="metrics-bench-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="metrics-bench-runs-"))
    from engine.cluster.embedded import EmbeddedCluster
    from engine.metrics.session import get_spark
    from engine.metrics.spark_job import run_metrics
    from engine.run.runner import run_scenario
    from engine.scenarios.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()["ack-loss"])
    workload = scenario.workload.model_copy(update={"messages": messages})
    scenario = scenario.model_copy(update={"workload": workload, "expect": {}})
    cluster = EmbeddedCluster("metrics-bench", node_count=1)
    cluster.start(timeout=240)
    try:
        output = run_scenario(scenario, cluster)
        spark = get_spark()
        if dashboard_warm_up:  # what the dashboard runs on its session before anyone asks
            from engine.metrics.spark_job import warm_up_judgement

            warm_up_judgement(spark)
            warm_up_judgement(spark, rounds=1, bootstrap=cluster.direct_bootstrap)
        # The first queries after the session starts load and JIT-compile Spark's and the
        # Kafka source's code paths; the dashboard pays that once, so they are timed apart.
        first = []
        for _ in range(warmups):
            began = time.perf_counter()
            _, judged = run_metrics(output["run_id"], spark=spark)
            first.append(round(time.perf_counter() - began, 2))
            judged.release()
        load_before = os.getloadavg()
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            metrics, judged = run_metrics(output["run_id"], spark=spark)
            times.append(time.perf_counter() - began)
            judged.release()
        load_after = os.getloadavg()
    finally:
        cluster.stop()
    same = all(
        metrics["results"][level][k] == r[k]
        for level, r in output["results"].items()
        for k in COMPARED
    )
    return {
        "levels": len(output["results"]),
        "messages": messages,
        "records": sum(r["delivered"] + r["duplicates"] for r in output["results"].values()),
        "first": first,
        "times": [round(t, 2) for t in times],
        "median": round(statistics.median(times), 2),
        "equal_to_checker": same,
        "load": [round(x, 2) for x in (*load_before, *load_after)],
    }


def ensure_data(data_root: Path, size: int) -> Path:
    folder = data_root / f"n{size}"
    if not (folder / "messages").exists():
        began = time.perf_counter()
        make_data(folder, size)
        print(f"  data for {size:,}: {time.perf_counter() - began:.1f}s", file=sys.stderr)
    return folder


def lab_settings(size: int) -> dict[str, str]:
    """The Spark settings the lab itself uses for a run of `size` messages in one level:
    the dashboard's session, or for a big run the process of its own (compute.py)."""
    from engine.metrics.compute import big_run_rows
    from engine.metrics.session import big_run_environment

    return big_run_environment() if size >= big_run_rows() else {}


def median_of(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample of median time, with every time and the highest peak memory."""
    ordered = sorted(samples, key=lambda r: r["seconds"])
    middle = dict(ordered[(len(ordered) - 1) // 2])
    middle["each"] = [r["seconds"] for r in samples]
    middle["peak_rss_mib"] = max(r["peak_rss_mib"] for r in samples)
    middle["agree"] = all(r["results"] == samples[0]["results"] for r in samples)
    return middle


def measure_scaling(sizes: list[int], data_root: Path, repeats: int) -> list[dict[str, Any]]:
    rows = []
    warmup = ensure_data(data_root, 10_000)
    for size in sizes:
        folder = ensure_data(data_root, size)
        parquet_mib = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 2**20
        spark_args = ["--worker", "spark", "--data", str(folder), "--warmup", str(warmup)]
        settings = lab_settings(size)
        spark = median_of([in_process(spark_args, settings) for _ in range(repeats)])
        duck = median_of(
            [in_process(["--worker", "duckdb", "--data", str(folder)]) for _ in range(repeats)]
        )
        rows.append(
            {
                "messages": size,
                "parquet_mib": round(parquet_mib, 1),
                "jit": "C2" if settings else "C1",
                "spark": spark,
                "duckdb": duck,
                "agree": spark["results"] == duck["results"] and spark["agree"] and duck["agree"],
            }
        )
        print(f"  {size:,}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


@contextmanager
def standalone_cluster(memory: str = "6g") -> Iterator[str]:
    """A Spark standalone master and one worker, started from pyspark's own spark-class.

    Yields the master URL; both JVMs are stopped on the way out.
    """
    import pyspark

    from engine.cluster.ports import free_ports

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    port, ui, worker_ui = free_ports(3)
    url = f"spark://127.0.0.1:{port}"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    logs = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
    deploy = "org.apache.spark.deploy"
    commands = [
        [f"{deploy}.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)],
        [f"{deploy}.worker.Worker", url, "--host", "127.0.0.1", "--cores",
         str(os.cpu_count() or 2), "--memory", memory, "--webui-port", str(worker_ui),
         "--work-dir", str(logs / "work")],
    ]  # fmt: skip
    processes = []
    try:
        for n, command in enumerate(commands):
            log = (logs / f"{n}.log").open("w")
            processes.append(
                subprocess.Popen(
                    [str(spark_class), *command], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
        deadline = time.monotonic() + 120
        while not master_has_a_worker(ui):
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise RuntimeError(f"the standalone cluster did not start; see {logs}")
            time.sleep(1)
        yield url
    finally:
        for process in processes[::-1]:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def master_has_a_worker(ui_port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except OSError:
        return False
    return any(w.get("state") == "ALIVE" for w in state.get("workers", []))


def measure_cluster(size: int, data_root: Path, repeats: int) -> dict[str, Any]:
    """The same judgement on a standalone cluster on this machine, beside local mode."""
    folder = ensure_data(data_root, size)
    warmup = ensure_data(data_root, 10_000)
    args = ["--worker", "spark", "--data", str(folder), "--warmup", str(warmup)]
    with standalone_cluster() as url:
        env = {
            **lab_settings(size),
            "LAB_SPARK_MASTER": url,
            "LAB_SPARK_EXECUTOR_MEMORY": "4g",
            "LAB_SPARK_DRIVER_MEMORY": "2g",
        }
        samples = [in_process(args, env) for _ in range(repeats)]
    row = median_of(samples)
    row["messages"] = size
    return row


def report(
    start: list[tuple[str, float]],
    run: dict[str, Any] | None,
    scaling: list[dict[str, Any]],
    cluster: dict[str, Any] | None = None,
) -> str:
    import duckdb
    import pyspark

    from engine.metrics.session import connector_version

    load = os.getloadavg()
    lines = [
        START,
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} with `python -m benchmarks.metrics_bench`: "
        f"{os.cpu_count()} cores, pyspark {pyspark.__version__} (connector "
        f"{connector_version()}), DuckDB {duckdb.__version__}, master "
        f"`{os.environ.get('LAB_SPARK_MASTER', 'local[*]')}`, driver memory "
        f"{os.environ.get('LAB_SPARK_DRIVER_MEMORY', '2g')}. Load average at the end: "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).",
        "",
        "| session start | seconds |",
        "|---|---|",
        *(f"| {what} | {seconds} |" for what, seconds in start),
        "",
    ]
    if run:
        lines += [typical_line(run), ""]
    if scaling:
        lines += [
            "Scaling: the same synthetic run judged by Spark and by DuckDB, each in a fresh "
            "process, timed without start-up, median of "
            f"{len(scaling[0]['spark']['each'])} (each time in brackets). Spark runs with the "
            "settings the lab itself uses at that size: the dashboard's session (C1) below "
            "a million verdict rows, the big-run process (C2, 6g) from there.",
            "",
            "| messages | Parquet (MiB) | Spark JIT | Spark (s) | Spark peak RSS (MiB) | "
            "DuckDB (s) | DuckDB peak RSS (MiB) | Spark / DuckDB | same results |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {r['messages']:,} | {r['parquet_mib']} | {r['jit']} | "
                f"{r['spark']['seconds']} ({', '.join(map(str, r['spark']['each']))}) | "
                f"{r['spark']['peak_rss_mib']:,} | "
                f"{r['duckdb']['seconds']} ({', '.join(map(str, r['duckdb']['each']))}) | "
                f"{r['duckdb']['peak_rss_mib']:,} | "
                f"{r['spark']['seconds'] / max(r['duckdb']['seconds'], 0.01):.1f}x | "
                f"{'yes' if r['agree'] else 'NO'} |"
                for r in scaling
            ),
            "",
        ]
    if cluster:
        local = next((r for r in scaling if r["messages"] == cluster["messages"]), None)
        beside = f" (local mode above: {local['spark']['seconds']} s)" if local else ""
        same = bool(local) and cluster["results"] == local["duckdb"]["results"]
        lines += [
            f"Standalone cluster: a master and one worker ({os.cpu_count()} cores, 6g) "
            "started from pyspark's own `spark-class` on this machine, executor heap 4g, the "
            f"same {cluster['messages']:,}-message run: **{cluster['seconds']} s**{beside}, "
            f"median of {len(cluster['each'])} ({', '.join(map(str, cluster['each']))}); "
            f"peak RSS of driver and executor {cluster['peak_rss_mib']:,} MiB; same results "
            f"as DuckDB: {'yes' if same else 'NO'}.",
            "",
        ]
    return "\n".join([*lines, END])


def typical_line(run: dict[str, Any], *, alone: bool = False) -> str:
    line = (
        f"Typical run: ack-loss, {run['levels']} levels × {run['messages']:,} messages "
        f"({run['records']:,} records read at each isolation). Metrics on the warm "
        f"session, median of {len(run['times'])}: **{run['median']} s** "
        f"(each: {', '.join(map(str, run['times']))}; "
        + (
            f"before them, the first computations after the session started took "
            f"{', '.join(map(str, run['first']))} s and are not counted"
            if run.get("first")
            else "the first is the first real computation after the dashboard's warm-up"
        )
        + "); equal to the checker's: "
        f"{'yes' if run['equal_to_checker'] else 'NO'}."
    )
    if alone:  # measured apart from the rest of the block: say when, and under what load
        load = run["load"]
        line += (
            f" (Measured {time.strftime('%Y-%m-%d %H:%M')} with `--only typical`, load "
            f"average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} before and "
            f"{load[3]:.1f} / {load[4]:.1f} / {load[5]:.1f} after.)"
        )
    return line


def write_typical(run: dict[str, Any]) -> str:
    """Replace only the typical-run line of the measured block; the rest stays as measured."""
    text = REPORT.read_text()
    head, rest = text.split(START, 1)
    block, tail = rest.split(END, 1)
    lines = block.split("\n")
    new = typical_line(run, alone=True)
    at = [i for i, line in enumerate(lines) if line.startswith("Typical run:")]
    if at:
        lines[at[0]] = new
    else:
        lines[-1:-1] = [new, ""]
    REPORT.write_text(head + START + "\n".join(lines) + END + tail)
    return new


def split_report(text: str, start: str = START, end: str = END) -> tuple[str, str, str]:
    """(before the block, the block with its markers, after it); refuses a damaged file.

    A file with no block gets an empty one at its end; one with two blocks, or an end before
    its start, is refused rather than guessed at, so the title and the prose always stay.
    """
    if start not in text and end not in text:
        text = f"{text.rstrip()}\n\n{start}\n{end}\n"
    starts, ends = text.count(start), text.count(end)
    if starts != 1 or ends != 1 or text.index(end) < text.index(start):
        raise SystemExit(
            f"{REPORT} should hold one measured block ({start} ... {end}); it holds "
            f"{starts} start(s) and {ends} end(s). Mend it by hand, then run again."
        )
    head, rest = text.split(start, 1)
    block, tail = rest.split(end, 1)
    return head, start + block + end, tail


def _row_key(line: str) -> str | None:
    """A scaling table row's messages cell ("| 1,000,000 | ..." -> "1,000,000"), else None."""
    cells = line.split("|")
    if len(cells) > 2 and line.startswith("| ") and cells[1].strip().replace(",", "").isdigit():
        return cells[1].strip()
    return None


MEASURED_AGAIN = " measured again "  # in a partial run's note, after the sizes it names


def merge_rows(old_block: str, new_block: str, note: str) -> str:
    """The old block with the new block's scaling rows put in place of the same sizes' rows.

    A partial run (`--sizes 1000000`, `--skip-run`) measured only some rows; the rest of the
    block stays as it was measured, and `note` says which rows are newer and when.
    """
    lines = old_block.split("\n")
    for new_line in new_block.split("\n"):
        key = _row_key(new_line)
        if key is None:
            continue
        same = [i for i, line in enumerate(lines) if _row_key(line) == key]
        if same:
            lines[same[0]] = new_line
        else:  # a size the table did not have: after the table's last row
            rows = [i for i, line in enumerate(lines) if _row_key(line) is not None]
            if not rows:
                raise SystemExit("METRICS.md's block has no scaling table to add a row to")
            lines.insert(rows[-1] + 1, new_line)
    # A note for the same sizes, from an earlier partial run, says when rows were measured
    # that this run has just replaced: it goes, with the blank line after it.
    same_sizes = note.split(MEASURED_AGAIN)[0] + MEASURED_AGAIN if MEASURED_AGAIN in note else None
    stale = {i for i, line in enumerate(lines) if same_sizes and line.startswith(same_sizes)}
    stale |= {i + 1 for i in stale if lines[i + 1 : i + 2] == [""]}
    lines = [line for i, line in enumerate(lines) if i not in stale]
    at_end = lines.index(END)
    lines[at_end:at_end] = [note, ""]
    return "\n".join(lines)


def write_report(block: str, *, partial_note: str | None = None) -> None:
    """Put a measured block between the markers; a partial run's rows only (merge_rows)."""
    text = REPORT.read_text() if REPORT.exists() else "# Metrics benchmark\n"
    head, old_block, tail = split_report(text)
    if partial_note is not None:
        block = merge_rows(old_block, block, partial_note)
    REPORT.write_text(head + block + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=FULL_SIZES)
    parser.add_argument("--run-messages", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmups", type=int, default=2, help="computations before the timed ones")
    parser.add_argument(
        "--dashboard-warm-up",
        action="store_true",
        help="first run the made-up judgement the dashboard warms its session with",
    )
    parser.add_argument("--scaling-repeats", type=int, default=3, help="the median of how many")
    parser.add_argument(
        "--cluster-size",
        type=int,
        default=1_000_000,
        help="messages judged on a standalone Spark cluster (0: skip)",
    )
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument(
        "--only",
        choices=("typical",),
        help="measure only this part and update only its line in METRICS.md",
    )
    parser.add_argument("--data-root", default=str(ROOT / ".cache" / "metrics-bench"))
    parser.add_argument("--worker", choices=("spark", "duckdb", "start"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker = {
            "spark": lambda: worker_spark(Path(args.data), Path(args.warmup)),
            "duckdb": lambda: worker_duckdb(Path(args.data)),
            "start": worker_start,
        }[args.worker]
        print(json.dumps(worker()))
        return 0
    if args.only == "typical":
        print("typical run...", file=sys.stderr)
        run = measure_run(args.run_messages, args.repeats, args.warmups, args.dashboard_warm_up)
        print(f"  {run}", file=sys.stderr)
        print(write_typical(run))
        return 0
    print("session start...", file=sys.stderr)
    start = measure_start(args.skip_cold)
    print(f"  {start}", file=sys.stderr)
    run = None
    if not args.skip_run:
        print("typical run...", file=sys.stderr)
        run = measure_run(args.run_messages, args.repeats, args.warmups, args.dashboard_warm_up)
        print(f"  {run}", file=sys.stderr)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print("scaling...", file=sys.stderr)
    scaling = measure_scaling(sizes, Path(args.data_root), args.scaling_repeats)
    cluster = None
    if args.cluster_size:
        print("standalone cluster...", file=sys.stderr)
        cluster = measure_cluster(args.cluster_size, Path(args.data_root), args.scaling_repeats)
        print(f"  {cluster}", file=sys.stderr)
    block = report(start, run, scaling, cluster)
    full = not args.skip_run and args.sizes == FULL_SIZES and bool(args.cluster_size)
    load = os.getloadavg()
    note = (
        f"Rows for {', '.join(f'{n:,}' for n in sizes)} messages{MEASURED_AGAIN}"
        f"{time.strftime('%Y-%m-%d %H:%M')} with `--sizes {args.sizes}` (load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}); the rest of the block as above."
    )
    write_report(block, partial_note=None if full else note)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
