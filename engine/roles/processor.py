"""The read-process-write processor: consumes the input topic, writes one output per input.

How it commits its input offsets is what the guarantee level decides:

- `commit-before` (at-most-once): commit the batch's offsets, then process it;
- `commit-after` (at-least-once, idempotent-only): process and flush, then commit;
- `transactional` (exactly-once): the outputs and the input offsets go in one transaction
  (`send_offsets_to_transaction`), so either both happen or neither does.

Partitions are assigned, not subscribed: a replacement instance takes over at once from the
committed offsets, which makes crash and zombie timings reproducible.

Events: `consumed`, `committed`, `output_acked`, `txn_begin`, `txn_commit`, `txn_abort`,
`fenced`, `error`, `idle` (caught up), `done`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from engine.history import HistoryWriter
from engine.roles.common import (
    FatalErrors,
    StopFlag,
    client_logger,
    load_spec,
    parse_value,
    printable,
)


def run(spec: dict[str, Any]) -> int:
    history = HistoryWriter(spec["history"], spec["name"])
    stop = StopFlag()
    logger = client_logger()
    mode = spec["mode"]
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "client.id": spec["client_id"] + "-in",
            "group.id": spec["group"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": spec.get("input_isolation", "read_committed"),
            "logger": logger,
        }
    )
    pconf = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": spec["client_id"],
        "linger.ms": 5,
        "logger": logger,
        **spec["config"],
    }
    fatal = FatalErrors()
    pconf["error_cb"] = fatal
    if mode == "transactional":
        pconf["transactional.id"] = spec["transactional_id"]
    producer = Producer(pconf)
    partitions = [TopicPartition(spec["input"], p) for p in range(spec["partitions"])]
    history.write(
        "start",
        mode=mode,
        config=printable(pconf),
    )
    try:
        if mode == "transactional":
            producer.init_transactions(30)
            history.write("txn_init", transactional_id=spec["transactional_id"])
        # Assign after init_transactions: fencing the previous instance first also aborts its
        # open transaction, so the committed offsets read here are final.
        consumer.assign(partitions)
        loop(spec, mode, consumer, producer, history, stop)
        history.write("done")
        return 0
    except KafkaException as exc:
        kind, error = fatal.classify(exc.args[0], producer)
        history.write(kind, error=error.name(), reason=error.str())
        return 3
    finally:
        consumer.close()


def loop(spec, mode, consumer, producer, history, stop) -> None:
    processing_s = spec.get("processing_ms", 0) / 1000.0
    batch_size = int(spec.get("commit_every", 5))
    idle_reported = False
    while not stop.stopped:
        messages = [m for m in consumer.consume(batch_size, timeout=0.5) if not m.error()]
        if not messages:
            if not idle_reported:
                history.write("idle")
                idle_reported = True
            continue
        idle_reported = False
        for msg in messages:
            value = parse_value(msg.value())
            history.write(
                "consumed",
                id=value["id"] if value else None,
                partition=msg.partition(),
                offset=msg.offset(),
            )
        offsets = next_offsets(messages)
        if mode == "commit-before":
            consumer.commit(offsets=offsets, asynchronous=False)
            history.write("committed", offsets=offsets_json(offsets))
        if mode == "transactional":
            producer.begin_transaction()
            history.write("txn_begin", ids=[parse_id(m) for m in messages])
        for msg in messages:
            if processing_s:
                time.sleep(processing_s)  # the work itself; gives a crash somewhere to land
            write_output(spec, producer, history, msg)
        if mode == "transactional":
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            history.write(
                "txn_commit", ids=[parse_id(m) for m in messages], offsets=offsets_json(offsets)
            )
        else:
            producer.flush(60)
            if mode == "commit-after":
                consumer.commit(offsets=offsets, asynchronous=False)
                history.write("committed", offsets=offsets_json(offsets))


def write_output(spec, producer, history, msg) -> None:
    value = parse_value(msg.value())
    if value is None:
        return
    message_id = value["id"]
    out = dict(value, processed_by=spec["name"], processed_at=time.time())

    def on_delivery(err: KafkaError | None, delivered: Any) -> None:
        if err is None:
            history.write(
                "output_acked",
                id=message_id,
                partition=delivered.partition(),
                offset=delivered.offset(),
            )
        else:
            history.write("output_failed", id=message_id, error=err.name())

    while True:
        try:
            producer.produce(
                spec["output"],
                json.dumps(out).encode(),
                key=str(message_id),
                on_delivery=on_delivery,
            )
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


def parse_id(msg) -> int | None:
    value = parse_value(msg.value())
    return value["id"] if value else None


def next_offsets(messages) -> list[TopicPartition]:
    """The offsets to commit: one past the last consumed message of each partition."""
    last: dict[tuple[str, int], int] = {}
    for msg in messages:
        key = (msg.topic(), msg.partition())
        last[key] = max(last.get(key, -1), msg.offset())
    return [TopicPartition(t, p, o + 1) for (t, p), o in sorted(last.items())]


def offsets_json(offsets: list[TopicPartition]) -> dict[str, int]:
    return {str(tp.partition): tp.offset for tp in offsets}


if __name__ == "__main__":
    raise SystemExit(run(load_spec()))
