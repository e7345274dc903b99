"""A share-group worker (KIP-932, "queues for Kafka"): reads the input topic with librdkafka's
ShareConsumer, writes one output per record, and acknowledges each record by itself.

A share group has no offsets to commit. The broker hands each record to one member under an
acquisition lock; the member acknowledges it (ACCEPT, RELEASE or REJECT); a record whose lock
expires, or whose member leaves, goes back to the group with its delivery count raised; after
the group's delivery limit it is archived. How the worker orders its work is the
application's choice, and it is the guarantee level here:

- `after-output` (at-least-once): write the output, wait for its ack, then ACCEPT the record;
- `before-processing` (at-most-once): ACCEPT and commit the acknowledgement, then write.

A record whose id is in the spec's `poison_ids` fails its processing every time; the worker
RELEASEs it (the application's choice: give it back for another try), so the broker hands it
out again until the delivery limit archives it.

librdkafka's share consumer (confluent-kafka 2.16, marked preview) has no RENEW type and sets
no lock duration of its own: the lock is the group's `share.record.lock.duration.ms`. A spec
asking for RENEW (`renew_every_ms`, which the Java worker honours) is refused at the start.

Events: `subscribed`, `delivered` (id, partition, offset, delivery_count), `processing_failed`,
`output_acked`, `output_failed`, `acknowledged` (type), `ack_committed`, `ack_refused`,
`error`, `idle`, `done`. Fault points (engine.proc.failpoints) arm on any of them.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    ShareConsumer,
)

from engine.base.values import parse_value
from engine.model.events import Event
from engine.model.history import HistoryWriter
from engine.proc.failpoints import ArmedFailPoint
from engine.roles.common import StopFlag, client_logger, failpoint_of, is_fatal, load_spec
from engine.roles.registry import Role
from engine.roles.specs import ShareWorkerSpec

ROLE = Role(
    name="share-worker",
    entry="share_worker",
    java=False,
    part="worker",
    spec_model=ShareWorkerSpec,
    events=frozenset(
        {
            Event.SUBSCRIBED,
            Event.DELIVERED,
            Event.PROCESSING_FAILED,
            Event.OUTPUT_ACKED,
            Event.OUTPUT_FAILED,
            Event.ACKNOWLEDGED,
            Event.ACK_COMMITTED,
            Event.ACK_REFUSED,
            Event.IDLE,
            Event.DONE,
        }
    ),
    about="A share group's member on librdkafka (ShareConsumer, preview), explicit acks.",
    serves=lambda scenario, level: False,
)


def share_consumer_config(spec: ShareWorkerSpec) -> dict[str, Any]:
    """Explicit acknowledgement: the worker says what became of each record itself."""
    return {
        "bootstrap.servers": spec.bootstrap,
        "group.id": spec.group,
        "client.id": spec.name,
        "share.acknowledgement.mode": "explicit",
        **spec.consumer,
    }


def kafka_error_of(exc: Exception) -> KafkaError | None:
    """The KafkaError a KafkaException carries, if it carries one."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


def error_code(exc: Exception) -> str:
    """The Kafka error's name, else the exception's class."""
    error = kafka_error_of(exc)
    return error.name() if error is not None else type(exc).__name__


def is_fatal_error(exc: KafkaException) -> bool:
    error = kafka_error_of(exc)
    return error is not None and is_fatal(error)


def commit_acknowledgements(consumer: ShareConsumer, history: HistoryWriter) -> bool:
    """Send the pending acknowledgements and record the broker's answer per partition.

    commit_sync returns a map of partition to None (taken) or the exception that refused it;
    an empty map means nothing was pending.
    """
    answers = consumer.commit_sync(30.0)
    taken = True
    for tp, refusal in answers.items():
        if refusal is None:
            history.write(Event.ACK_COMMITTED, partition=tp.partition)
        else:
            taken = False
            history.write(
                Event.ACK_REFUSED,
                partition=tp.partition,
                code=error_code(refusal),
                error=str(refusal),
            )
    return taken


def run(spec: ShareWorkerSpec) -> int:
    failpoint = failpoint_of(spec)
    history = HistoryWriter(
        spec.history, spec.name, ArmedFailPoint(failpoint) if failpoint else None
    )
    logger = client_logger()
    stop = StopFlag()
    if spec.renew_every_ms:
        # Said, not worked around: without RENEW the lock runs out while it works.
        raise SystemExit(
            "renew_every_ms: this worker cannot renew; librdkafka's ShareConsumer "
            "(confluent-kafka 2.16) has no RENEW acknowledgement (AcknowledgeType: ACCEPT, "
            "RELEASE, REJECT); the Java client has"
        )
    ack_mode = spec.ack  # one of the two (ShareWorkerSpec refuses any other)
    poison = set(spec.poison_ids)
    work_s = spec.work_ms / 1000
    idle_after_s = spec.idle_after_s

    consumer = ShareConsumer({**share_consumer_config(spec), "logger": logger})
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "logger": logger})
    consumer.subscribe([spec.input])
    history.write(Event.SUBSCRIBED, topic=spec.input, group=spec.group)
    last_record = time.monotonic()
    idle_written = False
    try:
        while not stop.stopped:
            try:
                batch = consumer.poll(1.0)
            except KafkaException as exc:
                history.write(Event.ERROR, where="poll", code=error_code(exc), error=str(exc))
                if is_fatal_error(exc):
                    # librdkafka will not recover from a fatal error: the worker ends, as a
                    # real application would, with the cause in its history.
                    return 1
                time.sleep(0.5)
                continue
            records = [m for m in batch if _record_or_error(m, history)]
            if not records:
                if not idle_written and time.monotonic() - last_record > idle_after_s:
                    history.write(Event.IDLE)
                    idle_written = True
                continue
            last_record = time.monotonic()
            idle_written = False
            for message in records:
                handle(message, consumer, producer, spec, history, ack_mode, poison, work_s)
            commit_acknowledgements(consumer, history)
        history.write(Event.DONE)
        return 0
    finally:
        producer.flush(10)
        consumer.close()
        history.close()


def _record_or_error(message: Message, history: HistoryWriter) -> bool:
    error = message.error()
    if error is None:
        return True
    history.write(Event.ERROR, where="poll", code=error.name(), error=error.str())
    return False


def handle(
    message: Message,
    consumer: ShareConsumer,
    producer: Producer,
    spec: ShareWorkerSpec,
    history: HistoryWriter,
    ack_mode: str,
    poison: set[int],
    work_s: float,
) -> None:
    """One record: processed, written and acknowledged in the order the level says."""
    value = parse_value(message.value()) or {}
    message_id = value.get("id")
    where = {"id": message_id, "partition": message.partition(), "offset": message.offset()}
    history.write(Event.DELIVERED, **where, delivery_count=message.delivery_count())
    if message_id in poison:
        history.write(Event.PROCESSING_FAILED, **where)
        consumer.acknowledge(message, AcknowledgeType.RELEASE)
        history.write(Event.ACKNOWLEDGED, **where, type="RELEASE")
        return
    if ack_mode == "before-processing":
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        history.write(Event.ACKNOWLEDGED, **where, type="ACCEPT")
        commit_acknowledgements(consumer, history)
    if work_s:
        time.sleep(work_s)
    if write_output(producer, spec, message, history, where) and ack_mode == "after-output":
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        history.write(Event.ACKNOWLEDGED, **where, type="ACCEPT")
    elif ack_mode == "after-output":
        # The output failed: give the record back for another try (the application's choice).
        consumer.acknowledge(message, AcknowledgeType.RELEASE)
        history.write(Event.ACKNOWLEDGED, **where, type="RELEASE")


def write_output(
    producer: Producer,
    spec: ShareWorkerSpec,
    message: Message,
    history: HistoryWriter,
    where: dict[str, Any],
) -> bool:
    """Write the record's output and wait for its ack; flush's count of undelivered is checked."""
    outcome: dict[str, Any] = {}

    def report(err: Any, _msg: Any) -> None:
        outcome["error"] = err

    producer.produce(spec.output, key=message.key(), value=message.value(), on_delivery=report)
    left = producer.flush(30)
    if left or outcome.get("error") is not None:
        history.write(Event.OUTPUT_FAILED, **where, error=str(outcome.get("error") or "timed out"))
        return False
    history.write(Event.OUTPUT_ACKED, **where, by=spec.name)
    return True


if __name__ == "__main__":
    raise SystemExit(run(load_spec(ShareWorkerSpec)))
