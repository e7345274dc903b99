"""Broker faults on a 3-node cluster: a killed leader hands over, a paused node stalls."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from engine.kafka import admin, quorum
from tests.kafkatools import read_all, unique

pytestmark = pytest.mark.kafka


def wait_for(predicate, timeout: float, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met")


def test_killing_the_leader_moves_leadership_and_clients_continue(cluster3):
    topic = unique("failover")
    admin.create_topic(
        cluster3.direct_bootstrap, topic, replication=3, config={"min.insync.replicas": "2"}
    )
    leader = cluster3.leader_of(topic)
    assert leader in cluster3.node_ids

    delivered: list[str] = []
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster3.proxied_bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )

    def on_delivery(err, msg):
        (errors.append(err.name()) if err else delivered.append(msg.value().decode()))

    for i in range(100):
        producer.produce(topic, f"before-{i}".encode(), on_delivery=on_delivery)
    producer.flush(30)
    cluster3.kill_node(leader)
    try:
        new_leader = wait_for(
            lambda: (lambda lead: lead if lead not in (-1, leader) else None)(
                cluster3.leader_of(topic)
            ),
            timeout=30,
        )
        assert new_leader != leader
        for i in range(100):
            producer.produce(topic, f"after-{i}".encode(), on_delivery=on_delivery)
        assert producer.flush(60) == 0
        assert errors == []
        assert len(delivered) == 200
        stored = sorted(v.decode() for _, _, v in read_all(cluster3.direct_bootstrap, topic))
        assert stored == sorted(delivered)
        assert [n.state for n in cluster3.nodes() if n.node_id == leader] == ["down"]
    finally:
        cluster3.restart_node(leader)
    assert all(n.state == "running" for n in cluster3.nodes())


def test_paused_leader_stalls_clients_then_they_recover(cluster3):
    topic = unique("pause")
    admin.create_topic(cluster3.direct_bootstrap, topic, replication=3)
    producer = Producer(
        {
            "bootstrap.servers": cluster3.proxied_bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 60000,
        }
    )
    producer.produce(topic, b"warm-up")
    assert producer.flush(30) == 0
    leader = cluster3.leader_of(topic)

    delivered_at: list[float] = []
    cluster3.pause_node(leader)
    assert [n.state for n in cluster3.nodes() if n.node_id == leader] == ["paused"]
    paused_at = time.monotonic()
    producer.produce(
        topic, b"during-pause", on_delivery=lambda err, msg: delivered_at.append(time.monotonic())
    )
    # While the leader is frozen (and before the controller fences it), nothing is acked.
    producer.poll(2.0)
    assert delivered_at == [], "a paused leader acknowledges nothing"
    resume = threading.Timer(1.0, cluster3.resume_node, args=(leader,))
    resume.start()
    assert producer.flush(60) == 0
    resume.join()
    assert delivered_at and delivered_at[0] - paused_at >= 2.5
    stored = [v.decode() for _, _, v in read_all(cluster3.direct_bootstrap, topic)]
    assert stored == ["warm-up", "during-pause"]
    assert all(n.state == "running" for n in cluster3.nodes())


def test_the_active_controller_is_the_metadata_quorum_leader(cluster3):
    """What the lab calls the active controller is the node the other voters replace when it
    dies; the "controller" in KRaft's metadata answers is a random live broker instead."""
    bootstrap = cluster3.direct_bootstrap
    named = {admin.admin_client(bootstrap).list_topics(timeout=5).controller_id for _ in range(30)}
    assert len(named) > 1, "KRaft brokers name a random live broker as the controller"

    before = quorum.quorum_leader(bootstrap)
    assert before.node_id in cluster3.node_ids
    others = ",".join(
        node.direct_address for node in cluster3.nodes() if node.node_id != before.node_id
    )
    cluster3.kill_node(before.node_id)
    try:
        after = wait_for(
            lambda: (lambda q: q if q and q.node_id != before.node_id else None)(
                _quorum_leader_or_none(others)
            ),
            timeout=60,
        )
    finally:
        cluster3.restart_node(before.node_id)
    assert after.node_id in cluster3.node_ids and after.epoch > before.epoch
    # The node, started again, follows the new leader: every node names the same one.
    wait_for(
        lambda: (
            {
                getattr(_quorum_leader_or_none(n.direct_address), "node_id", None)
                for n in cluster3.nodes()
            }
            == {after.node_id}
        ),
        timeout=60,
    )


def _quorum_leader_or_none(bootstrap: str) -> quorum.QuorumLeader | None:
    try:
        return quorum.quorum_leader(bootstrap, timeout=3)
    except quorum.QuorumUnknown:
        return None
