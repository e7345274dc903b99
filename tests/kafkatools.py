"""Test-side helpers: produce, read back, and count topics independently of the engine."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_all(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_uncommitted",
    partitions: int = 1,
    timeout: float = 20.0,
) -> list[tuple[int, int, bytes | None]]:
    """Every record of a topic, as (partition, offset, value), read up to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,  # the end at once, not after a 500 ms empty fetch
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[tuple[int, int, bytes | None]] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    continue
                raise RuntimeError(msg.error())
            at_eof.discard(msg.partition())
            records.append((msg.partition(), msg.offset(), msg.value()))
        if len(at_eof) < partitions:
            raise TimeoutError(f"did not reach the end of {topic} in {timeout}s")
        return records
    finally:
        consumer.close()


def kcat_values(bootstrap: str, topic: str, *, isolation: str = "read_uncommitted") -> list[str]:
    """Read a topic with kcat, an independent client, and return the values."""
    return [value for _, _, value in kcat_records(bootstrap, topic, isolation=isolation)]


def kcat_lines(
    bootstrap: str, topic: str, line_format: str, *, isolation: str = "read_uncommitted"
) -> list[str]:
    """Read a topic from its start to its end with kcat, an independent client: one line per
    record, as kcat's `-f` format `line_format` prints it."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by `./lab test`; install it to run this test by hand"
    out = subprocess.run(
        [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
         "-X", f"isolation.level={isolation}", "-f", f"{line_format}\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )  # fmt: skip
    return out.stdout.splitlines()


def kcat_records(
    bootstrap: str, topic: str, *, isolation: str = "read_uncommitted"
) -> list[tuple[int, int, str]]:
    """Read a topic with kcat: (partition, offset, value) each."""
    records = []
    for line in kcat_lines(bootstrap, topic, "%p %o %s", isolation=isolation):
        partition, offset, value = [*line.split(" ", 2), ""][:3]
        if value:
            records.append((int(partition), int(offset), value))
    return records


def kcat_headers(bootstrap: str, topic: str) -> list[tuple[str, dict[str, str]]]:
    """Read a topic with kcat: each record's (value, headers). kcat prints the headers as
    `name=value,...`, so a header value holding a comma would read wrong: none here does."""
    records = []
    for line in kcat_lines(bootstrap, topic, "%h\t%s"):
        headers, _, value = line.partition("\t")
        pairs = [pair.split("=", 1) for pair in headers.split(",") if "=" in pair]
        records.append((value, dict(pairs)))
    return records


def produce_one_by_one(bootstrap: str, topic: str, values: list[str], conf: dict) -> list[str]:
    """Produce each value and wait for its delivery before the next: one request per value.

    Returns the delivery outcome per value ("ok" or the error's name).
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    outcomes: list[str] = []
    for value in values:
        result: list[str] = []
        producer.produce(
            topic,
            value.encode(),
            on_delivery=lambda err, msg, r=result: r.append("ok" if err is None else err.name()),
        )
        producer.flush(60)
        outcomes.append(result[0] if result else "undelivered")
    return outcomes


def copies(values: list[str]) -> Counter:
    return Counter(values)


def decode(records: list[tuple[int, int, bytes | None]]) -> list[str]:
    return [v.decode() for _, _, v in records if v is not None]


def as_json(values: list[str]) -> list[dict]:
    return [json.loads(v) for v in values]
