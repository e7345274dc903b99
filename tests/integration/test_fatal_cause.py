"""How librdkafka tells a static member that it was fenced, on a real broker.

A zombie processor (the zombie scenario) wakes up and commits. Which answer it gets depends
on a race inside librdkafka: if its commit reaches the group coordinator first, the commit
fails as FENCED_INSTANCE_ID; if its heartbeat got there first, the consumer is already in a
fatal state, the commit fails as the generic _FATAL, and the cause only comes as the error of
the consumer's next poll. The processor must name both as "fenced" (FatalErrors).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from engine.kafka import admin
from engine.roles.common import FatalErrors
from tests.kafkatools import unique

pytestmark = pytest.mark.kafka


def static_member_and_its_replacement(
    bootstrap: str, heartbeat_ms: int
) -> tuple[Consumer, FatalErrors, str]:
    """A static member that has read a message, then a second consumer with the same
    group.instance.id that took its partition over (fencing the first)."""
    topic = unique("fence")
    admin.create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": topic,
        "group.instance.id": f"{topic}-1",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 30_000,
        "heartbeat.interval.ms": heartbeat_ms,
    }
    fatal = FatalErrors()
    # No `logger`: confluent_kafka would queue librdkafka's log lines for poll(), and
    # the test must not poll the zombie before its commit. Without one, librdkafka
    # writes them to stderr from its own threads, where capfd reads them.
    zombie = Consumer({**conf, "error_cb": fatal})
    zombie.subscribe([topic])
    deadline = time.monotonic() + 60
    while zombie.poll(0.5) is None:
        assert time.monotonic() < deadline, "the first member never read a message"
    replacement = Consumer(conf)
    replacement.subscribe([topic])
    while replacement.poll(0.5) is None:
        assert time.monotonic() < deadline, "the replacement never read a message"
    replacement.close()
    return zombie, fatal, topic


def test_a_zombie_fenced_by_its_heartbeat_commits_as_fatal_and_its_next_poll_names_the_fence(
    cluster1, capfd
):
    zombie, fatal, topic = static_member_and_its_replacement(
        cluster1.direct_bootstrap, heartbeat_ms=500
    )
    try:
        stderr, deadline = "", time.monotonic() + 30
        while "Static consumer fenced" not in stderr:  # librdkafka's FATAL line
            assert time.monotonic() < deadline, "the heartbeat was never fenced"
            time.sleep(0.1)
            stderr += capfd.readouterr().err
        with pytest.raises(KafkaException) as raised:
            zombie.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        failure = raised.value.args[0]
        assert failure.code() == KafkaError._FATAL
        assert "fenced" not in failure.str().lower()  # the commit itself does not say why
        assert fatal.classify(failure)[0] == "error"  # nor does anything the client handed over
        assert not fatal.errors  # error_cb never carried the cause

        fatal.await_cause(zombie)
        kind, cause = fatal.classify(failure)
        assert kind == "fenced", cause.str()
        assert "group.instance.id" in cause.str()
    finally:
        zombie.close()


def test_a_zombie_whose_commit_arrives_first_is_refused_as_fenced_instance_id(cluster1):
    # A heartbeat every 20 s: the commit, sent at once, reaches the coordinator first.
    zombie, fatal, topic = static_member_and_its_replacement(
        cluster1.direct_bootstrap, heartbeat_ms=20_000
    )
    try:
        with pytest.raises(KafkaException) as raised:
            zombie.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        failure = raised.value.args[0]
        assert failure.code() == KafkaError.FENCED_INSTANCE_ID
        assert fatal.classify(failure)[0] == "fenced"
    finally:
        zombie.close()
