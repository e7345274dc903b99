"""The docker backend against a real Docker engine: the compose cluster, hurt and healed.

The engine is the machine's own, or a dockerd the session starts (tests/dockerenv.py); the
brokers' image is apache/kafka, or the stand-in built from the pinned jars where it cannot
be pulled. The fixed host ports 1909N, 2909N and 3909N must be free. One cluster serves the
module; its teardown checks that `cluster down` leaves nothing of the compose project.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from engine.cluster.base import NodeState
from engine.kafka import admin

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def project_leftovers(client) -> list[str]:
    """Every container, network and volume of the lab's compose project, by name."""
    from engine.cluster.docker_backend import PROJECT

    label = {"label": f"com.docker.compose.project={PROJECT}"}
    return (
        [f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
        + [f"network {n.name}" for n in client.networks.list(filters=label)]
        + [f"volume {v.name}" for v in client.volumes.list(filters=label)]
    )


@pytest.fixture(scope="module")
def cluster(docker_env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from engine.cluster import docker_backend as db

    docker_env.require("kafka")
    with pytest.MonkeyPatch.context() as mp:
        # A state dir of its own, so the test never meets (or removes) a user's cluster state.
        mp.setenv("LAB_STATE_DIR", str(tmp_path_factory.mktemp("lab-state")))
        for var in (db.ENV_UPSTREAMS, db.ENV_DIRECT, db.ENV_LISTEN_HOST):
            mp.delenv(var, raising=False)
        c = db.DockerCluster(owner_pid=os.getpid())
        began = time.monotonic()
        c.start(timeout=300)
        print(f"docker cluster started in {time.monotonic() - began:.1f}s")
        try:
            yield c
        finally:
            c.stop()
            assert all(n.state == NodeState.DOWN for n in c.nodes())
            assert not Path(c.state_file).exists()
            assert project_leftovers(docker_env.client) == []


def _roundtrip(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Produce `count` messages with acks=all and read them back, all through `bootstrap`."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"m{i}".encode())
    assert producer.flush(60) == 0, "messages left unsent"

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"it-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _wait_state(c, node_id: int, state: NodeState, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if {n.node_id: n.state for n in c.nodes()}[node_id] == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"node {node_id} did not become {state} within {timeout}s")


def test_all_nodes_run_behind_the_proxy(cluster) -> None:
    assert [n.state for n in cluster.nodes()] == [NodeState.RUNNING] * 3
    proxied = admin.describe(cluster.proxied_bootstrap)
    # Metadata read through the proxy names the proxy's ports, so clients never bypass it.
    assert proxied.brokers == {n: f"127.0.0.1:{19090 + n}" for n in (1, 2, 3)}
    direct = admin.describe(cluster.direct_bootstrap)
    assert direct.brokers == {n: f"127.0.0.1:{39090 + n}" for n in (1, 2, 3)}
    assert cluster.proxy_control().ping()


def test_produce_and_consume_through_the_proxy(cluster) -> None:
    topic = f"it-roundtrip-{uuid.uuid4().hex[:8]}"
    admin.create_topic(
        cluster.direct_bootstrap, topic, replication=3, config={"min.insync.replicas": "2"}
    )
    assert sorted(_roundtrip(cluster.proxied_bootstrap, topic, 20)) == sorted(
        f"m{i}".encode() for i in range(20)
    )


def test_kill_and_restart_a_broker(cluster) -> None:
    topic = f"it-kill-{uuid.uuid4().hex[:8]}"
    admin.create_topic(
        cluster.direct_bootstrap, topic, replication=3, config={"min.insync.replicas": "2"}
    )
    victim = cluster.leader_of(topic)
    assert victim in (1, 2, 3)
    cluster.kill_node(victim)
    _wait_state(cluster, victim, NodeState.DOWN)

    # RF 3, min ISR 2: the two survivors elect a new leader and keep accepting acks=all.
    deadline = time.monotonic() + 60
    while cluster.leader_of(topic) in (victim, -1) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.leader_of(topic) not in (victim, -1)
    assert len(_roundtrip(cluster.proxied_bootstrap, topic, 10)) == 10

    cluster.restart_node(victim, timeout=120)
    assert {n.node_id: n.state for n in cluster.nodes()}[victim] == NodeState.RUNNING
    assert victim in admin.describe(cluster.direct_bootstrap).brokers


def test_pause_and_resume_a_broker(cluster) -> None:
    cluster.pause_node(3)
    _wait_state(cluster, 3, NodeState.PAUSED)
    # A frozen broker stops heartbeating; after broker.session.timeout.ms (6 s) it is fenced
    # and leaves the metadata. (A read may pick the frozen node and time out: try again.)
    fenced = False
    deadline = time.monotonic() + 30
    while not fenced and time.monotonic() < deadline:
        view = admin.try_describe(cluster.direct_bootstrap)
        fenced = view is not None and 3 not in view.brokers
        time.sleep(0.5)
    assert fenced, "the paused node was never fenced"

    cluster.resume_node(3)
    _wait_state(cluster, 3, NodeState.RUNNING)
    admin.wait_for_brokers(cluster.direct_bootstrap, {1, 2, 3}, timeout=60)
