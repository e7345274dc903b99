"""A new topic's leader is named in the metadata before it serves the partition: the lab asks
again (create_topic, the warm-up's watermark). Stubs of the clients: the retry logic only."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from engine.kafka import admin
from engine.metrics.warm_up import high_watermark


class _Consumer:
    """Answers get_watermark_offsets with the errors given, then with (0, high)."""

    def __init__(self, errors: list[int], high: int = 7) -> None:
        self.errors, self.high, self.asked = list(errors), high, 0

    def get_watermark_offsets(self, _partition, timeout: float, cached: bool):
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, self.high


def test_a_leader_not_serving_yet_is_asked_again():
    # What a new 1-node cluster answered right after create_topic saw the leader in the
    # metadata; the code before asked once and the warm-up's Kafka round failed.
    consumer = _Consumer([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    assert high_watermark(consumer, TopicPartition("t", 0), timeout_s=5) == 7
    assert consumer.asked == 3


def test_other_errors_and_a_leader_that_never_serves_are_raised():
    with pytest.raises(KafkaException):
        high_watermark(_Consumer([KafkaError._AUTHENTICATION]), TopicPartition("t", 0))
    never = _Consumer([KafkaError.NOT_LEADER_FOR_PARTITION] * 100)
    with pytest.raises(KafkaException):
        high_watermark(never, TopicPartition("t", 0), timeout_s=0.3)
    assert 1 < never.asked < 100


class _Admin:
    """create_topics succeeds, the metadata names leader 1 at once, and ListOffsets answers
    with the errors given before it answers."""

    def __init__(self, errors: list[int]) -> None:
        self.errors, self.asked = list(errors), 0

    def create_topics(self, topics, operation_timeout: float):
        done: Future = Future()
        done.set_result(None)
        return {t.topic: done for t in topics}

    def list_topics(self, topic: str, timeout: float):
        partitions = {p: SimpleNamespace(leader=1) for p in range(2)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=partitions)})

    def list_offsets(self, wanted, request_timeout: float):
        self.asked += 1
        answers = {}
        for tp in wanted:
            answer: Future = Future()
            if self.errors:
                answer.set_exception(KafkaException(KafkaError(self.errors[0])))
            else:
                answer.set_result(SimpleNamespace(offset=0))
            answers[tp] = answer
        if self.errors:
            self.errors.pop(0)
        return answers


def test_create_topic_returns_once_every_partition_is_served(monkeypatch):
    # The code before returned as soon as the metadata named the leaders: asked == 0.
    stub = _Admin([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART])
    monkeypatch.setattr(admin, "admin_client", lambda *_a, **_k: stub)
    admin.create_topic("stub:9092", "t", partitions=2, timeout=5)
    assert stub.asked == 3


def test_create_topic_gives_up_on_a_partition_never_served(monkeypatch):
    stub = _Admin([KafkaError.NOT_LEADER_FOR_PARTITION] * 100)
    monkeypatch.setattr(admin, "admin_client", lambda *_a, **_k: stub)
    with pytest.raises(TimeoutError, match="does not serve yet"):
        admin.create_topic("stub:9092", "t", partitions=2, timeout=0.5)
    other = _Admin([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    monkeypatch.setattr(admin, "admin_client", lambda *_a, **_k: other)
    with pytest.raises(KafkaException):
        admin.create_topic("stub:9092", "t", partitions=2, timeout=5)
