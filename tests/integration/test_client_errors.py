"""What each client tells its application when the leader refuses writes for want of in-sync
replicas (NOT_ENOUGH_REPLICAS), on a real 3-node cluster.

A partition on two nodes with min.insync.replicas=2; its follower stopped (SIGSTOP) until the
controller fences it and the ISR is the leader alone. Then both producer roles (librdkafka
from Python, kafka-clients at the lab's Kafka version from Java) write with acks=all and
the same settings, and the test reads what each one's delivery report said. The fault proxy
is not in the way: the roles talk to the brokers directly, so every answer is the broker's
own.

Measured here: retrying, neither application sees the broker's refusal. librdkafka reports
each message as timed out (`_MSG_TIMED_OUT`) when message.timeout.ms is spent; the Java
client's Sender expires the batch after delivery.timeout.ms with a TimeoutException of its
own ("... ms has passed since batch creation"), which the Java role names `_MSG_TIMED_OUT`
too (JavaProducer.describe), not REQUEST_TIMED_OUT, the broker's code that the same Java
class also carries. Without retries both name the broker's NOT_ENOUGH_REPLICAS at once
(the contrast: the timeout is the clients' retrying, not the broker's answer).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine.kafka import admin
from engine.kafka.quorum import active_controller
from engine.model.history import read_jsonl
from engine.model.java_client import JAVA_PRODUCER_MAIN, to_java
from engine.proc.java_roles import ensure_java_roles
from engine.proc.processes import RoleProcess

pytestmark = pytest.mark.kafka

MESSAGES = 3
# Short timeouts so a refused write gives up within the follower's stop; Java wants
# delivery.timeout.ms >= linger.ms + request.timeout.ms.
RETRYING = {
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 0,
    "request.timeout.ms": 2000,
    "message.timeout.ms": 6000,
}
NO_RETRIES = {**RETRYING, "retries": 0}


def isr(bootstrap: str, topic: str) -> set[int]:
    md = admin.admin_client(bootstrap).list_topics(topic=topic, timeout=5)
    return set(md.topics[topic].partitions[0].isrs)


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.2)


def produce(cluster: Any, tmp_path: Path, client: str, topic: str, config: dict) -> list[dict]:
    """One producer role's run of MESSAGES messages; its history's `ack` and `fail` events."""
    name = f"{client}-{len(list(tmp_path.iterdir()))}"
    folder = tmp_path / name
    folder.mkdir()
    history = folder / "producer.jsonl"
    spec = {
        "bootstrap": cluster.direct_bootstrap,
        "client_id": f"nerr-{name}",
        "topic": topic,
        "ids": list(range(MESSAGES)),
        "partitions": 1,
        "outbox": None,
        "rate": 20.0,
        # Sent without waiting for the one before: the messages time out together, in one
        # message.timeout.ms, not one after another (the test took 13 s, 39 s that way).
        "batch": True,
        "config": to_java(config).config if client == "java" else config,
        "transactional": None,
        "name": "producer",
        "history": str(history),
        "run_id": name,
        "level": "probe",
    }
    java = client == "java"
    role = JAVA_PRODUCER_MAIN if java else "producer"
    process = RoleProcess("producer", role, history, spec, java=java)
    process.start(folder)
    wait_until(lambda: any(e["ev"] == "done" for e in read_jsonl(history)), 120, f"{name}'s done")
    process.stop(timeout=10)
    return [e for e in read_jsonl(history) if e["ev"] in ("ack", "fail")]


@pytest.fixture(scope="module")
def short_isr(cluster3):
    """A topic whose ISR is its leader alone, below min.insync.replicas=2, for the module."""
    bootstrap = cluster3.direct_bootstrap
    controller = active_controller(bootstrap)
    leader, follower = [n for n in cluster3.node_ids if n != controller][:2]
    topic = "lab.not-enough-replicas"
    admin.create_topic(
        bootstrap,
        topic,
        replica_assignment=[[leader, follower]],
        config={"min.insync.replicas": "2"},
    )
    wait_until(lambda: isr(bootstrap, topic) == {leader, follower}, 60, "a full ISR")
    ensure_java_roles()
    cluster3.pause_node(follower)
    try:
        # broker.session.timeout.ms later the controller fences the stopped follower.
        wait_until(lambda: isr(bootstrap, topic) == {leader}, 60, "the ISR to shrink")
        yield topic
    finally:
        cluster3.resume_node(follower)
        admin.wait_for_full_isr(bootstrap, topic, timeout=60)


def errors(reports: list[dict]) -> Counter:
    return Counter((e["ev"], e.get("error"), e.get("exception")) for e in reports)


def test_retrying_both_clients_report_a_timeout_not_the_brokers_refusal(
    cluster3, short_isr, tmp_path
):
    librdkafka = produce(cluster3, tmp_path, "librdkafka", short_isr, RETRYING)
    java = produce(cluster3, tmp_path, "java", short_isr, RETRYING)
    assert errors(librdkafka) == Counter({("fail", "_MSG_TIMED_OUT", None): MESSAGES})
    expired = ("fail", "_MSG_TIMED_OUT", "TimeoutException")
    assert errors(java) == Counter({expired: MESSAGES}), errors(java)
    assert all("since batch creation" in e["reason"] for e in java)


def test_without_retries_both_clients_name_the_brokers_refusal(cluster3, short_isr, tmp_path):
    """The contrast: the timeout above is librdkafka's retrying, not the broker's answer."""
    librdkafka = errors(produce(cluster3, tmp_path, "librdkafka", short_isr, NO_RETRIES))
    java = errors(produce(cluster3, tmp_path, "java", short_isr, NO_RETRIES))
    assert librdkafka == Counter({("fail", "NOT_ENOUGH_REPLICAS", None): MESSAGES}), librdkafka
    refused = ("fail", "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasException")
    assert java == Counter({refused: MESSAGES}), java
