"""The share worker's own logic, without Kafka: what it records of commit_sync's answer and of
an error (the behaviour against a real broker is tests/integration/test_share_groups.py)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from engine.model.history import HistoryWriter, read_jsonl
from engine.roles.share_worker import (
    commit_acknowledgements,
    error_code,
    is_fatal_error,
    share_consumer_config,
)
from engine.roles.specs import ShareWorkerSpec


class AnsweringConsumer:
    """Stands in for ShareConsumer.commit_sync: returns the per-partition answer it is given."""

    def __init__(self, answers: dict) -> None:
        self.answers = answers

    def commit_sync(self, timeout: float) -> dict:
        return self.answers


def recorded(tmp_path: Path, answers: dict) -> tuple[bool, list[dict]]:
    history = HistoryWriter(tmp_path / "worker.jsonl", "worker")
    taken = commit_acknowledgements(AnsweringConsumer(answers), history)  # type: ignore[arg-type]
    history.close()
    return taken, read_jsonl(tmp_path / "worker.jsonl")


def test_each_partitions_answer_is_recorded_and_one_refusal_means_not_taken(tmp_path):
    refusal = KafkaException(KafkaError(KafkaError.INVALID_RECORD_STATE, "not the owner"))
    taken, events = recorded(
        tmp_path, {TopicPartition("queue", 0): None, TopicPartition("queue", 1): refusal}
    )
    assert not taken
    assert [(e["ev"], e["partition"]) for e in events] == [
        ("ack_committed", 0),
        ("ack_refused", 1),
    ]
    assert events[1]["code"] == "INVALID_RECORD_STATE"


def test_all_partitions_taken_and_nothing_pending(tmp_path):
    taken, events = recorded(tmp_path, {TopicPartition("queue", 0): None})
    assert taken and [e["ev"] for e in events] == ["ack_committed"]
    # An empty answer: nothing was pending, nothing is recorded.
    (tmp_path / "empty").mkdir()
    taken, events = recorded(tmp_path / "empty", {})
    assert taken and events == []


def test_error_code_names_the_kafka_error_else_the_class():
    fatal = KafkaException(KafkaError(KafkaError.UNSUPPORTED_VERSION, "heartbeat", fatal=True))
    assert error_code(fatal) == "UNSUPPORTED_VERSION" and is_fatal_error(fatal)
    passing = KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))
    assert error_code(passing) == "_TRANSPORT" and not is_fatal_error(passing)
    assert error_code(KafkaException("no error object")) == "KafkaException"


def test_the_consumer_acknowledges_explicitly_and_takes_extra_settings():
    spec = ShareWorkerSpec(
        bootstrap="127.0.0.1:9092",
        group="workers",
        name="worker-a",
        history="worker-a.jsonl",
        input="queue",
        output="queue-out",
        consumer={"fetch.wait.max.ms": 100},
    )
    config = share_consumer_config(spec)
    assert config["share.acknowledgement.mode"] == "explicit"
    assert config["group.id"] == "workers" and config["fetch.wait.max.ms"] == 100
