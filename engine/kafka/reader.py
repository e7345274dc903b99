"""Reading a topic back to its end, at an isolation level: what the checker and a replacement see.

The runner reads the judged topic through the brokers' direct listener after a level; a
replacement transactional producer reads its own topic at read_committed to learn what is
already committed (what Kafka holds, not what a dead process knew).
"""

from __future__ import annotations

import secrets
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from engine.checker import StoredRecord
from engine.errors import LabError
from engine.kafka import admin
from engine.roles.common import parse_value


def read_topic(
    bootstrap: str, topic: str, isolation: str, partitions: int, timeout: float = 30.0
) -> list[StoredRecord]:
    """Every record of a topic up to its end, at an isolation level, through `bootstrap`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lab-checker-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "logger": admin.log,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[StoredRecord] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise LabError(f"Could not read {topic} to its end within {timeout:.0f} s.")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            value = parse_value(msg.value())
            records.append(
                StoredRecord(
                    partition=msg.partition(),
                    offset=msg.offset(),
                    id=value["id"] if value else None,
                    created_at=value.get("created_at") if value else None,
                )
            )
        return records
    finally:
        consumer.close()
