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
import time
from pathlib import Path

from confluent_kafka import Producer

from engine import paths, tools
from engine.cluster import jars
from engine.cluster.embedded import EmbeddedCluster
from engine.kafka import admin


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
        )
        return time.monotonic() - began


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
