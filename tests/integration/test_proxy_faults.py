"""Real network faults through the Kafka-aware proxy, judged by what the topic holds.

A dropped Produce response means the broker appended the batch and the ack never reached
the client: librdkafka retries on its own, and whether the retry becomes a duplicate is
decided by the broker (idempotence) alone.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from engine.kafka import admin
from engine.proxy.control import read_events
from tests.kafkatools import kcat_values, produce_one_by_one, read_all, unique

pytestmark = pytest.mark.kafka

MESSAGES = [f"payment-{i:02d}" for i in range(10)]


def run_with_dropped_ack(cluster, proxy, *, idempotent: bool) -> tuple[str, list[str]]:
    topic = unique("ackloss")
    admin.create_topic(cluster.direct_bootstrap, topic)
    client_id = unique("producer")
    since = time.time()
    # The 3rd Produce request from this client is appended, but its response never arrives.
    proxy.drop_produce_responses(nth=3, client_id_prefix=client_id, after="reset")
    conf = {
        "client.id": client_id,
        "acks": "all",
        "enable.idempotence": idempotent,
        "retries": 5,
        "retry.backoff.ms": 100,
        "max.in.flight.requests.per.connection": 1,
    }
    outcomes = produce_one_by_one(cluster.proxied_bootstrap, topic, MESSAGES, conf)
    assert outcomes == ["ok"] * len(MESSAGES), "every message is acknowledged in the end"
    drops = [
        e
        for e in read_events(cluster.proxy.events_path, since_ts=since)
        if e["kind"] == "produce_response_dropped" and e.get("client_id") == client_id
    ]
    assert len(drops) == 1
    return topic, decode_all(cluster, topic)


def decode_all(cluster, topic: str) -> list[str]:
    return [v.decode() for _, _, v in read_all(cluster.direct_bootstrap, topic)]


def test_dropped_ack_without_idempotence_makes_a_real_duplicate(cluster1, proxy):
    topic, stored = run_with_dropped_ack(cluster1, proxy, idempotent=False)
    counts = Counter(stored)
    assert len(stored) == len(MESSAGES) + 1
    assert counts["payment-02"] == 2
    assert all(counts[m] == 1 for m in MESSAGES if m != "payment-02")
    # An independent reader sees exactly the same log.
    assert kcat_values(cluster1.direct_bootstrap, topic) == stored


def test_dropped_ack_with_idempotence_is_deduplicated_by_the_broker(cluster1, proxy):
    topic, stored = run_with_dropped_ack(cluster1, proxy, idempotent=True)
    assert stored == MESSAGES
    assert kcat_values(cluster1.direct_bootstrap, topic) == MESSAGES


def test_hold_after_drop_makes_the_client_time_out_and_retry(cluster1, proxy):
    topic = unique("ackhold")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    client_id = unique("holder")
    proxy.drop_produce_responses(nth=1, client_id_prefix=client_id, after="hold")
    conf = {
        "client.id": client_id,
        "acks": "all",
        "enable.idempotence": False,
        "retries": 5,
        "socket.timeout.ms": 3000,
        "max.in.flight.requests.per.connection": 1,
    }
    began = time.monotonic()
    outcomes = produce_one_by_one(cluster1.proxied_bootstrap, topic, ["held"], conf)
    elapsed = time.monotonic() - began
    assert outcomes == ["ok"]
    # librdkafka's local timeout for a ProduceRequest is socket.timeout.ms; after it, the
    # connection is closed (socket.max.fails=1) and the batch is retried on a new one.
    assert elapsed >= 2.5, "the ack only came after librdkafka's request timeout"
    assert decode_all(cluster1, topic) == ["held", "held"]


def test_latency_is_added_to_every_request(cluster1, proxy):
    topic = unique("latency")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    produce_one_by_one(cluster1.proxied_bootstrap, topic, ["warm-up"], {"acks": "all"})
    proxy.set_latency(400)
    began = time.monotonic()
    outcomes = produce_one_by_one(cluster1.proxied_bootstrap, topic, ["slow"], {"acks": "all"})
    assert outcomes == ["ok"]
    assert time.monotonic() - began >= 0.4
    proxy.set_latency(0)


def test_blackhole_stalls_clients_until_it_heals(cluster1, proxy):
    topic = unique("blackhole")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    since = time.time()
    proxy.blackhole(2.0)
    began = time.monotonic()
    outcomes = produce_one_by_one(
        cluster1.proxied_bootstrap, topic, ["through"], {"acks": "all", "message.timeout.ms": 30000}
    )
    assert outcomes == ["ok"]
    assert time.monotonic() - began >= 1.5
    kinds = [e["kind"] for e in read_events(cluster1.proxy.events_path, since_ts=since)]
    assert "blackhole_start" in kinds and "blackhole_end" in kinds
    assert decode_all(cluster1, topic) == ["through"]


def test_reset_connections_is_survived_by_clients(cluster1, proxy):
    topic = unique("reset")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster1.proxied_bootstrap, "acks": "all"})
    producer.produce(topic, b"before")
    assert producer.flush(30) == 0
    since = time.time()
    proxy.reset_connections()
    producer.produce(topic, b"after")
    assert producer.flush(30) == 0
    assert decode_all(cluster1, topic) == ["before", "after"]
    resets = [
        e
        for e in read_events(cluster1.proxy.events_path, since_ts=since)
        if e["kind"] == "connection_reset"
    ]
    assert resets, "the producer's open connection was reset"
