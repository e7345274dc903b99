"""The warm-up's topic on a new cluster: its leader is named before it serves the partition."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

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
