"""The docker backend against a real Docker engine: the compose cluster, hurt and healed.

Needs a Docker engine with the compose plugin, the apache/kafka image (pulled on first use)
and the fixed host ports 1909N, 2909N, 3909N free. Skipped, with the reason, when the engine
or the plugin is missing. Run alone with `pytest -m docker`.
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
from engine.errors import LabError
from engine.kafka import admin

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def _engine_unavailable() -> str | None:
    """Why no Docker engine can be used here, or None when one answers."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        return f"the docker SDK is not installed: {exc}"
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        docker.from_env().ping()
    except Exception as exc:
        return f"no Docker engine answers at {host}: {exc}"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    reason = _engine_unavailable()
    if reason:
        pytest.skip(reason)
    from engine.cluster import docker_backend as db

    try:
        db.compose_command()
    except LabError as exc:
        pytest.skip(str(exc))

    with pytest.MonkeyPatch.context() as mp:
        # A state dir of its own, so the test never meets (or removes) a user's cluster state.
        mp.setenv("LAB_STATE_DIR", str(tmp_path_factory.mktemp("lab-state")))
        for var in (db.ENV_UPSTREAMS, db.ENV_DIRECT, db.ENV_LISTEN_HOST):
            mp.delenv(var, raising=False)
        c = db.DockerCluster(owner_pid=os.getpid())
        if any(n.state != NodeState.DOWN for n in c.nodes()):
            pytest.skip(
                f"the {db.PROJECT} compose project already has broker containers; the test "
                "would remove them. Stop that cluster first."
            )
        c.start(timeout=300)
        try:
            yield c
        finally:
            c.stop()
            assert all(n.state == NodeState.DOWN for n in c.nodes())
            assert not Path(c.state_file).exists()


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
