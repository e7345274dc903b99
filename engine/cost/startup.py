"""Cold and warm start times: the 1-node and 3-node embedded clusters, and the SparkSession.

The cluster figures are measured here, by the functions `benchmarks.cluster_start` runs too:
"cold" is Maven resolving Kafka's jars into an empty local repository plus the first start,
"warm" a start with the jars cached. Spark is measured the same way: "cold" resolves Spark's
Kafka connector into an empty repository and then starts a session; "warm" starts a session in
a new Python process with the connector cached (the dashboard's case after a restart).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer

from engine.base import paths, tools
from engine.cluster.embedded import EmbeddedCluster
from engine.cost.stats import Summary, summarize
from engine.cost.throughput import BenchmarkError
from engine.kafka import admin

Progress = Callable[[str, float], None]

SPARK_START = (
    "from engine.metrics.session import get_spark, stop_spark\n"
    "get_spark()\n"
    "print('READY', flush=True)\n"
    "stop_spark()\n"
)


@dataclass
class StartRow:
    what: str
    cold_s: float | None
    warm: Summary
    rss_idle_mib: float | None = None
    rss_loaded_mib: float | None = None


def cluster_rows(repeats: int, *, cold: bool, progress: Progress | None = None) -> list[StartRow]:
    """1-node and 3-node start times and RSS (as benchmarks.cluster_start measures them)."""
    report = progress or (lambda _what, _fraction: None)
    report("resolving Kafka's jars into an empty Maven repository", 0.0)
    fetch = cold_jar_fetch() if cold else None
    rows = []
    for step, nodes in enumerate((1, 3)):
        runs = []
        for i in range(repeats):
            report(f"starting the {nodes}-node cluster ({i + 1}/{repeats})", (step + i / 10) / 2)
            runs.append(one_start(nodes, f"cost-start-{nodes}-{i}"))
        starts = [r[0] for r in runs]
        rows.append(
            StartRow(
                f"{nodes}-node cluster",
                fetch + starts[0] if fetch is not None else None,
                summarize(starts),
                summarize([r[1] for r in runs]).median,
                summarize([r[2] for r in runs]).median,
            )
        )
    return rows


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cluster_rss(cluster: EmbeddedCluster) -> float:
    pids = [n.pid for n in cluster.nodes() if n.pid]
    if cluster.proxy and cluster.proxy.pid:
        pids.append(cluster.proxy.pid)
    return sum(rss_mib(p) for p in pids)


def load(cluster: EmbeddedCluster, count: int = 20_000) -> None:
    topic = "bench-load"
    admin.create_topic(
        cluster.direct_bootstrap, topic, partitions=3, replication=min(3, len(cluster.node_ids))
    )
    producer = Producer(
        {"bootstrap.servers": cluster.proxied_bootstrap, "acks": "all", "linger.ms": 5}
    )
    payload = b"x" * 1024
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def one_start(nodes: int, name: str) -> tuple[float, float, float]:
    cluster = EmbeddedCluster(name, node_count=nodes)
    began = time.monotonic()
    cluster.start(timeout=240)
    elapsed = time.monotonic() - began
    try:
        idle = cluster_rss(cluster)
        load(cluster)
        loaded = cluster_rss(cluster)
    finally:
        cluster.stop()
    return elapsed, idle, loaded


def cold_jar_fetch() -> float:
    """Resolve the jars into an empty Maven repository and cache: the first-run download."""
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        tools.maven_package(
            paths.KAFKA_POM,
            ("kafka.libs", Path(tmp) / "libs"),
            what=f"Kafka {paths.kafka_version()}",
            repo_local=Path(tmp) / "m2",
            properties={"kafka.version": paths.kafka_version()},
        )
        return time.monotonic() - began


def spark_start_s(timeout: float = 300.0) -> float:
    """Seconds from launching a new Python process to its SparkSession being ready."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", SPARK_START],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=paths.REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)},
    )
    assert proc.stdout is not None
    ready = None
    for line in proc.stdout:
        if line.startswith("READY"):
            ready = time.monotonic() - began
            break
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if ready is None:
        raise BenchmarkError(
            "The SparkSession did not start (python -m engine.metrics.cli shows why); "
            "the Spark start time is missing."
        )
    return ready


def spark_connector_fetch_s() -> float:
    """Resolve Spark's Kafka connector into an empty Maven repository: the first-run fetch."""
    from engine.metrics.session import CONNECTOR_POM, connector_version

    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        tools.maven_package(
            CONNECTOR_POM,
            ("spark.kafka.jars", Path(tmp) / "jars"),
            what=f"Spark's Kafka connector {connector_version()}",
            repo_local=Path(tmp) / "m2",
        )
        return time.monotonic() - began


def spark_row(repeats: int, *, cold: bool, progress: Progress | None = None) -> StartRow:
    report = progress or (lambda _what, _fraction: None)
    report("resolving Spark's Kafka connector into an empty Maven repository", 0.0)
    fetch = spark_connector_fetch_s() if cold else None
    starts = []
    for i in range(repeats):
        report(f"starting a SparkSession in a new process ({i + 1}/{repeats})", i / repeats)
        starts.append(spark_start_s())
    return StartRow(
        "SparkSession", fetch + starts[0] if fetch is not None else None, summarize(starts)
    )
