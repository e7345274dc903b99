"""Reading a partition from its first offset to its end, and writing the demos' records.

A consumer on the direct listener reads every offset; ListOffsets gives the log start and the
end (the high watermark, or the last stable offset at read_committed).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from engine.kafka import admin
from engine.logs.errors import LogViewError, TopicGoneError

Progress = Callable[[str], None]


# ---- reading a partition ---------------------------------------------------------------------
@dataclass(frozen=True)
class LogRecord:
    """One record as a consumer read it back; value None is a tombstone."""

    offset: int
    key: str | None
    value: str | None

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "key": self.key, "value": self.value}


@dataclass(frozen=True)
class PartitionRead:
    records: list[LogRecord]
    end_offset: int  # where the consumer hit the end: the HW, or the LSO at read_committed


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


def new_topic_name(kind: str) -> str:
    return f"lab.{kind}.{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def require_partition(bootstrap: str, topic: str, partition: int, timeout: float = 5.0) -> int:
    """Check that a topic and partition exist; return the partition's leader (-1 if none)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic or ""):
        raise LogViewError(
            f"'{topic}' is not a Kafka topic name (letters, digits, '.', '_' and '-' only)."
        )
    try:
        md = admin.admin_client(bootstrap).list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise LogViewError(
            f"The cluster did not answer ({exc}); check it with `python -m engine cluster status`."
        ) from exc
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        raise TopicGoneError(f"Topic '{topic}' does not exist; pick one the cluster has.")
    if partition not in meta.partitions:
        raise LogViewError(
            f"Topic '{topic}' has partitions 0-{len(meta.partitions) - 1}, not {partition}."
        )
    return meta.partitions[partition].leader


def list_topic_names(bootstrap: str, timeout: float = 5.0) -> list[str]:
    """Topics a person may look at (Kafka's internal ones left out), newest lab topics last."""
    try:
        md = admin.admin_client(bootstrap).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise LogViewError(f"The cluster did not answer ({exc}).") from exc
    return sorted(name for name in md.topics if not name.startswith("__"))


class PartitionReader:
    """Reads one partition from its first offset to its end, as often as asked.

    One consumer serves every read (re-assigning rewinds it), so polling the log while the
    cleaner works costs a fetch, not a new connection.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int = 0,
        *,
        isolation: str = "read_uncommitted",
        timeout: float = 20.0,
    ) -> None:
        self.topic, self.partition, self.timeout = topic, partition, timeout
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lab-logs-{secrets.token_hex(4)}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
                # The end of a short log should show up at once, not after a long fetch wait.
                "fetch.wait.max.ms": 50,
                "logger": admin.log,
            }
        )
        self._generation = 0

    def read(self) -> PartitionRead:
        tp = TopicPartition(self.topic, self.partition, OFFSET_BEGINNING)
        self._consumer.unassign()
        self._consumer.assign([tp])
        records: list[LogRecord] = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                code = msg.error().code()
                if code == KafkaError._PARTITION_EOF:
                    return PartitionRead(records, msg.offset())
                if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    raise LogViewError(f"Topic '{self.topic}' has no partition {self.partition}.")
                continue  # transient: the broker is briefly unreachable, librdkafka retries
            records.append(LogRecord(msg.offset(), _text(msg.key()), _text(msg.value())))
        raise LogViewError(
            f"Could not read {self.topic}-{self.partition} to its end within "
            f"{self.timeout:.0f}s; check the cluster with `python -m engine cluster status`."
        )

    def end_offsets(self) -> tuple[int, int]:
        """(log start, end) from ListOffsets at this reader's isolation: HW, or LSO."""
        tp = TopicPartition(self.topic, self.partition)
        try:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)
        except KafkaException as exc:
            raise LogViewError(
                f"The broker did not report the offsets of {self.topic}-{self.partition} "
                f"({exc}); check the cluster with `python -m engine cluster status`."
            ) from exc
        return low, high

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> PartitionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_partition(
    bootstrap: str, topic: str, partition: int = 0, *, isolation: str = "read_uncommitted"
) -> PartitionRead:
    with PartitionReader(bootstrap, topic, partition, isolation=isolation) as reader:
        return reader.read()


def _producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "logger": admin.log,
            **extra,
        }
    )


def _produce_all(
    producer: Producer, topic: str, records: Iterable[tuple[str, str | None]]
) -> list[int]:
    """Produce keyed records and wait for each delivery; return their offsets."""
    outcomes: list[tuple[KafkaError | None, int]] = []
    for key, value in records:
        producer.produce(
            topic,
            key=key.encode(),
            value=None if value is None else value.encode(),
            partition=0,
            on_delivery=lambda err, msg: outcomes.append((err, msg.offset())),
        )
    left = producer.flush(30)
    errors = [err for err, _ in outcomes if err is not None]
    if left or errors:
        why = errors[0].str() if errors else f"{left} record(s) undelivered after 30s"
        raise LogViewError(
            f"Writing to {topic} failed ({why}); check the cluster with "
            "`python -m engine cluster status`."
        )
    return [offset for _, offset in outcomes]
