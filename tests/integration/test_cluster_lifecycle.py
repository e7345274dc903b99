"""Embedded clusters of 1 and 3 nodes start, serve produce and consume, and stop cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.base import paths
from engine.cluster.embedded import EmbeddedCluster, pid_alive
from engine.kafka import admin
from tests.kafkatools import kcat_values, produce_one_by_one, read_all, unique

pytestmark = pytest.mark.kafka

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}


def java_processes_under(folder: Path) -> list[int]:
    """Pids of live processes whose command line mentions a folder (our JVMs name theirs)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline and pid_alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def roundtrip(cluster, count: int = 50) -> None:
    topic = unique("roundtrip")
    replication = 3 if len(cluster.node_ids) == 3 else 1
    admin.create_topic(cluster.direct_bootstrap, topic, partitions=3, replication=replication)
    values = [f"m{i}" for i in range(count)]
    outcomes = produce_one_by_one(cluster.proxied_bootstrap, topic, values, {"acks": "all"})
    assert outcomes == ["ok"] * count
    through_proxy = read_all(cluster.proxied_bootstrap, topic, partitions=3)
    assert sorted(v.decode() for _, _, v in through_proxy) == sorted(values)
    assert sorted(kcat_values(cluster.direct_bootstrap, topic)) == sorted(values)


def test_one_node_cluster_serves_and_stops_without_leftovers():
    cluster = EmbeddedCluster("lifecycle-1", node_count=1)
    cluster.start(timeout=120)
    pids = [n.pid for n in cluster.nodes()] + [cluster.proxy.pid]
    try:
        assert [n.state for n in cluster.nodes()] == ["running"]
        # Made at the start, before any client asked (the contrast: the test below).
        assert set(admin.describe(cluster.direct_bootstrap).leaders) >= INTERNAL_TOPICS
        view = admin.describe(cluster.proxied_bootstrap)
        # Metadata through the proxy names the proxy, so clients never bypass it.
        assert set(view.brokers.values()) == set(cluster.proxied_bootstrap.split(","))
        roundtrip(cluster)
    finally:
        cluster.stop()
    assert not any(pid_alive(p) for p in pids)
    assert java_processes_under(cluster.root) == []


def test_kafka_makes_its_coordinators_only_when_asked_so_the_start_asks():
    """Kafka creates __consumer_offsets and __transaction_state on the first FindCoordinator
    for a group or a transactional id (KafkaApis.getCoordinator). Without the lab's step at
    the start, a new cluster has neither, and a class's first run would wait for them."""
    cluster = EmbeddedCluster("coordinators", node_count=1, coordinators_at_start=False)
    cluster.start(timeout=120)
    try:
        assert not INTERNAL_TOPICS & set(admin.describe(cluster.direct_bootstrap).leaders)
        # Both coordinators answer: InitProducerId for the lab's transactional id, then the
        # committed offsets of its group id, asked by a consumer (each finds its coordinator
        # first).
        assert admin.load_coordinators(cluster.direct_bootstrap) is True
        assert set(admin.describe(cluster.direct_bootstrap).leaders) >= INTERNAL_TOPICS
    finally:
        cluster.stop()


def test_three_node_cluster_serves_and_stops_without_leftovers():
    cluster = EmbeddedCluster("lifecycle-3", node_count=3)
    cluster.start(timeout=180)
    pids = [n.pid for n in cluster.nodes()] + [cluster.proxy.pid]
    try:
        assert len(admin.describe(cluster.direct_bootstrap).brokers) == 3
        roundtrip(cluster)
        # Internal topics are replicated three times with min ISR 2.
        props = (Path(cluster.root) / "node-1" / "server.properties").read_text()
        assert "offsets.topic.replication.factor=3" in props
        assert "transaction.state.log.min.isr=2" in props
    finally:
        cluster.stop()
    assert not any(pid_alive(p) for p in pids)
    assert java_processes_under(cluster.root) == []


def test_cli_cluster_up_status_down(tmp_path):
    """`python -m engine cluster up` leaves a cluster running that kcat lists, until `down`."""
    env = {**os.environ, "LAB_STATE_DIR": str(tmp_path / "state")}

    def engine(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engine", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            cwd=paths.REPO_ROOT,
        )

    up = engine("cluster", "up", "--nodes", "1", "--json")
    assert up.returncode == 0, up.stderr
    try:
        status = engine("cluster", "status", "--json")
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert data["backend"] == "local"
        assert data["reachable"] is True
        assert {"direct_bootstrap", "proxied_bootstrap", "nodes"} <= set(data)
        assert data["nodes"][0]["state"] == "running"
        listing = subprocess.run(
            ["kcat", "-L", "-b", data["proxied_bootstrap"]],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "1 brokers:" in listing
        assert f"broker 1 at {data['proxied_bootstrap']}" in listing
        # A second `up` reuses the running cluster instead of starting another.
        again = engine("cluster", "up", "--json")
        assert again.returncode == 0 and "reusing" in again.stderr
        node_pid = data["nodes"][0]["pid"]
    finally:
        down = engine("cluster", "down")
    assert down.returncode == 0, down.stderr
    assert not pid_alive(node_pid)
    after = engine("cluster", "status")
    assert after.returncode == 2
    assert "No cluster is running" in after.stderr
    assert "Traceback" not in after.stderr


def test_watchdog_ends_the_cluster_when_its_owner_is_sigkilled():
    owner = subprocess.Popen(["sleep", "600"])
    cluster = EmbeddedCluster("owned", node_count=1, owner_pid=owner.pid)
    cluster.start(timeout=120)
    pids = [n.pid for n in cluster.nodes()] + [cluster.proxy.pid]
    assert all(pid_alive(p) for p in pids)
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        any(pid_alive(p) for p in pids) or cluster.state_file.exists()
    ):
        time.sleep(0.2)
    assert not any(pid_alive(p) for p in pids), "every process is gone within 10 s"
    assert not cluster.state_file.exists(), "and the cluster's state is cleaned up"
