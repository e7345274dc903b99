"""The read-process-write processor: consumes the input topic, writes one output per input.

How it commits its input offsets is what the guarantee level decides:

- `commit-before` (at-most-once): commit the batch's offsets, then process it;
- `commit-after` (at-least-once, idempotent-only): process, wait until every output is
  acknowledged, then commit; a batch with an output that failed is read again, not committed;
- `transactional` (exactly-once): the outputs and the input offsets go in one transaction
  (`send_offsets_to_transaction`), so either both happen or neither does; an abortable error
  aborts the transaction and the batch is read again; a fenced producer exits;
- `auto-commit` (a scenario's `auto_commit` block, any non-transactional level): the
  consumer's own timer commits (enable.auto.commit=true, the clients' default), whenever it
  fires, whatever the batch's state.

It subscribes in a consumer group, as applications do, with static membership
(`group.instance.id`, KIP-345): a replacement joins with the same instance id, so the group
coordinator hands it the dead or frozen instance's partitions at once instead of after a
session timeout, and fences the old instance (FENCED_INSTANCE_ID) if it comes back.

Each batch has one `commit_gap` event, written at the moment the batch is exposed: offsets
committed but no output written (commit-before), outputs acknowledged but offsets not
committed (commit-after), outputs in the open transaction (transactional). Scenarios arm
their crash and pause fault points on it (engine.proc.failpoints).

Events: `assigned`, `revoked`, `partitions_lost`, `consumed`, `commit_gap`, `committed`,
`commit_rejected`, `batch_failed`, `output_acked`, `output_failed`, `txn_begin`,
`txn_commit`, `txn_abort`, `fenced`, `error`, `auto_committed`, `idle` (caught up), `done`.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from engine.base.values import parse_value
from engine.model.events import Event
from engine.model.history import HistoryWriter
from engine.proc.failpoints import ArmedFailPoint
from engine.roles.common import (
    FENCED_CODES,
    MAX_RESTARTS,
    FatalErrors,
    StopFlag,
    claim_ownership,
    client_logger,
    failpoint_of,
    is_fatal,
    load_spec,
    owner_of,
    printable,
    still_owner,
)
from engine.roles.registry import Role
from engine.roles.specs import ProcessorSpec

ROLE = Role(
    name="processor",
    entry="processor",
    java=False,
    part="processor",
    spec_model=ProcessorSpec,
    events=frozenset(
        {
            Event.START,
            Event.ASSIGNED,
            Event.REVOKED,
            Event.PARTITIONS_LOST,
            Event.CONSUMED,
            Event.OUTPUT_ACKED,
            Event.OUTPUT_FAILED,
            Event.BATCH_FAILED,
            Event.COMMITTED,
            Event.AUTO_COMMITTED,
            Event.COMMIT_GAP,
            Event.COMMIT_REJECTED,
            Event.RESUME,
            Event.RESTART,
            Event.FENCED,
            Event.TXN_INIT,
            Event.TXN_BEGIN,
            Event.TXN_COMMIT,
            Event.TXN_ABORT,
            Event.IDLE,
            Event.DONE,
        }
    ),
    about="A consume-process-produce application on librdkafka, committing as its level says.",
)

# How long past its own timeout a transactional call may block before the processor gives up
# on it (see bounded()).
HANG_MARGIN_S = 15.0
# The exit status of a processor that gave up on a hung client call.
HUNG_EXIT = 4


@dataclass
class Processor:
    spec: ProcessorSpec
    history: HistoryWriter
    consumer: Consumer
    producer: Producer
    stop: StopFlag
    mode: str
    fatal: FatalErrors
    consumer_config: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    failed_outputs: list[int] = field(default_factory=list)

    def loop(self) -> None:
        batch_size = self.spec.commit_every
        idle_reported = False
        while not self.stop.stopped:
            messages = self.consume(batch_size)
            if not messages:
                if not idle_reported:
                    self.history.write(Event.IDLE)
                    idle_reported = True
                continue
            idle_reported = False
            self.batches += 1
            for msg in messages:
                self.history.write(
                    Event.CONSUMED, id=parse_id(msg), partition=msg.partition(), offset=msg.offset()
                )
            if self.mode == "commit-before":
                self.commit_before(messages)
            elif self.mode == "commit-after":
                self.commit_after(messages)
            elif self.mode == "auto-commit":
                self.auto_commit(messages)
            else:
                self.transactional(messages)

    def consume(self, batch_size: int) -> list[Message]:
        messages = []
        for msg in self.consumer.consume(batch_size, timeout=0.5):
            error = msg.error()
            if error is None:
                messages.append(msg)
            elif is_fatal(error):
                raise KafkaException(error)
        if self.fatal.errors:
            # A fatal error reaches error_cb, not always consume(): for example this
            # instance fenced by its group (a static member that came back after a stall).
            raise KafkaException(self.fatal.errors[-1])
        return messages

    # ---- the three ways to commit ------------------------------------------------------
    def commit_before(self, messages: list[Message]) -> None:
        if not self.commit(messages):
            # Nothing of the batch is processed: read it again if the partitions stay ours
            # (their new owner reads it from the committed offset otherwise).
            self.rewind(messages)
            return
        self.gap(messages, "offsets committed, no output written yet")
        self.write_outputs(messages)
        left = self.producer.flush(60)
        if left or self.failed_outputs:
            # At most once: a failed output is not retried (its input is committed).
            self.history.write(Event.BATCH_FAILED, ids=ids_of(messages), unflushed=left)

    def commit_after(self, messages: list[Message]) -> None:
        self.write_outputs(messages)
        left = self.producer.flush(60)
        if left or self.failed_outputs:
            # Never commit input whose output is not acknowledged: read the batch again.
            self.history.write(
                Event.BATCH_FAILED,
                ids=ids_of(messages),
                unflushed=left,
                failed=list(self.failed_outputs),
                then="read again from its first offset",
            )
            self.rewind(messages)
            return
        self.gap(messages, "outputs acknowledged, offsets not committed yet")
        self.commit(messages)

    def transactional(self, messages: list[Message]) -> None:
        ids = ids_of(messages)
        offsets = next_offsets(messages)
        try:
            self.producer.begin_transaction()
            self.history.write(Event.TXN_BEGIN, ids=ids)
            self.write_outputs(messages)
            self.producer.flush(60)
            self.gap(messages, "outputs in the open transaction, offsets not committed yet")
            group = self.consumer.consumer_group_metadata()
            self.retried(
                "send_offsets",
                lambda: bounded(
                    "send_offsets_to_transaction",
                    lambda: self.producer.send_offsets_to_transaction(offsets, group, 30),
                    30,
                ),
            )
            self.retried(
                "commit",
                lambda: bounded(
                    "commit_transaction", lambda: self.producer.commit_transaction(30), 30
                ),
            )
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                raise  # fenced or fatal: run() records why and exits
            self.producer.abort_transaction(30)
            self.history.write(Event.TXN_ABORT, ids=ids, error=error.name(), reason=error.str())
            self.rewind(messages)
            return
        self.history.write(Event.TXN_COMMIT, ids=ids, offsets=offsets_json(offsets))

    def auto_commit(self, messages: list[Message]) -> None:
        """enable.auto.commit=true: a timer commits, whatever the batch's state.

        librdkafka stores each message's offset as consume() hands it over
        (enable.auto.offset.store=true), and its background timer commits the stored offsets
        every auto.commit.interval.ms. So the commit may land before the batch's outputs
        (a crash then loses the batch) or after them (a crash before it repeats the batch).
        With `await_auto_commit` the processor is slower than the timer: it starts writing
        only once the timer has committed the batch, so a fault point on `auto_committed`
        lands exactly there.
        """
        end = next_offsets(messages)
        if self.spec.await_auto_commit:
            committed = self.wait_until_committed(end)
            self.history.write(
                Event.AUTO_COMMITTED,
                batch=self.batches,
                ids=ids_of(messages),
                offsets=offsets_json(committed),
                state="offsets committed by the auto-commit timer, no output written yet",
            )
        self.write_outputs(messages)
        left = self.producer.flush(60)
        if left or self.failed_outputs:
            # Nothing to undo: the timer commits the stored offsets whatever happened.
            self.history.write(Event.BATCH_FAILED, ids=ids_of(messages), unflushed=left)
        committed = self.consumer.committed(end, timeout=10)
        if any(c.offset < e.offset for c, e in zip(committed, end, strict=True)):
            self.history.write(
                Event.COMMIT_GAP,
                batch=self.batches,
                ids=ids_of(messages),
                first=offsets_json(first_offsets(messages)),
                offsets=offsets_json(end),
                committed=offsets_json(committed),
                state="outputs acknowledged, the auto-commit timer has not committed them yet",
            )

    def wait_until_committed(self, end: list[TopicPartition]) -> list[TopicPartition]:
        """Ask the group coordinator until the committed offsets reach `end`."""
        interval_s = int(self.consumer_config.get("auto.commit.interval.ms", 5000)) / 1000.0
        deadline = time.monotonic() + 3 * interval_s + 10
        while True:
            committed = self.consumer.committed(end, timeout=10)
            if all(c.offset >= e.offset for c, e in zip(committed, end, strict=True)):
                return committed
            if time.monotonic() > deadline:
                raise KafkaException(
                    KafkaError(
                        KafkaError._TIMED_OUT,
                        f"the auto-commit timer did not commit {offsets_json(end)} within "
                        f"{3 * interval_s + 10:g} s",
                    )
                )
            time.sleep(0.05)

    # ---- steps -------------------------------------------------------------------------
    def retried(self, what: str, call: Callable[[], None], attempts: int = 5) -> None:
        """A transactional call, made again on a retriable error, as librdkafka asks.

        A leader or coordinator that has just died answers with retriable errors (timeouts,
        NOT_COORDINATOR) until the controller has moved it; an abortable error is raised for
        the caller to abort and rewind, a fatal one ends the instance.
        """
        for attempt in range(attempts):
            try:
                call()
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or error.txn_requires_abort() or attempt == attempts - 1:
                    raise
                self.history.write(f"txn_{what}_retry", error=error.name(), reason=error.str())

    def commit(self, messages: list[Message]) -> bool:
        offsets = next_offsets(messages)
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if is_fatal(error) or error.code() == KafkaError.FENCED_INSTANCE_ID:
                raise
            # For example UNKNOWN_MEMBER_ID after a stall: the group moved on without us.
            self.history.write(
                Event.COMMIT_REJECTED,
                offsets=offsets_json(offsets),
                error=error.name(),
                reason=error.str(),
            )
            return False
        self.history.write(Event.COMMITTED, offsets=offsets_json(offsets))
        return True

    def gap(self, messages: list[Message], state: str) -> None:
        self.history.write(
            Event.COMMIT_GAP,
            batch=self.batches,
            ids=ids_of(messages),
            first=offsets_json(first_offsets(messages)),
            offsets=offsets_json(next_offsets(messages)),
            state=state,
        )

    def rewind(self, messages: list[Message]) -> None:
        for tp in first_offsets(messages):
            self.consumer.seek(tp)

    def write_outputs(self, messages: list[Message]) -> None:
        processing_s = self.spec.processing_ms / 1000.0
        self.failed_outputs = []
        for msg in messages:
            if processing_s:
                time.sleep(processing_s)  # the work itself; gives a fault somewhere to land
            self.write_output(msg)

    def write_output(self, msg: Message) -> None:
        value = parse_value(msg.value())
        if value is None:
            return
        message_id = value["id"]
        out = dict(value, processed_by=self.spec.name, processed_at=time.time())
        history, failed = self.history, self.failed_outputs

        def on_delivery(err: KafkaError | None, delivered: Any) -> None:
            if err is None:
                history.write(
                    Event.OUTPUT_ACKED,
                    id=message_id,
                    partition=delivered.partition(),
                    offset=delivered.offset(),
                )
            else:
                failed.append(message_id)
                history.write(Event.OUTPUT_FAILED, id=message_id, error=err.name())

        while True:
            try:
                self.producer.produce(
                    self.spec.output,
                    json.dumps(out).encode(),
                    key=str(message_id),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)


class HungCallError(Exception):
    """A librdkafka call still blocked well past its own timeout."""


def bounded(what: str, call: Callable[[], None], timeout_s: float) -> None:
    """Make a transactional call whose timeout librdkafka may not keep, under a watchdog.

    send_offsets_to_transaction() can block past its timeout for good when the group
    coordinator's broker has left the cluster (a killed leader): librdkafka issues #5456
    and #5511, open for 2.16. A real application cannot cancel the call either; this one
    waits HANG_MARGIN_S past the timeout, then gives up and exits (run() says why), so that
    a new instance takes over: its init_transactions() aborts the open transaction.
    """
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed back to the caller's thread below
            outcome.append(exc)

    worker = threading.Thread(target=target, name=what, daemon=True)
    worker.start()
    worker.join(timeout_s + HANG_MARGIN_S)
    if worker.is_alive():
        raise HungCallError(
            f"{what}() had not returned {timeout_s + HANG_MARGIN_S:g} s after it was called "
            f"with a {timeout_s:g} s timeout (a known librdkafka hang when the group "
            "coordinator's broker has left the cluster: confluentinc/librdkafka#5456, #5511); "
            "the processor exits so that a new instance takes over"
        )
    if outcome and outcome[0] is not None:
        raise outcome[0]


def run(spec: ProcessorSpec) -> int:
    point = failpoint_of(spec)
    history = HistoryWriter(spec.history, spec.name, point and ArmedFailPoint(point))
    stop = StopFlag()
    logger = client_logger()
    mode = spec.mode
    fatal = FatalErrors()
    cconf = {
        **spec.consumer_config,  # levels.PROCESSOR_CONSUMER, as the Guarantees page shows it
        "bootstrap.servers": spec.bootstrap,
        "client.id": spec.client_id + "-in",
        "group.id": spec.group,
        "group.instance.id": spec.instance_id,
        "error_cb": fatal,
        "logger": logger,
    }
    consumer = Consumer(cconf)
    pconf = {
        "bootstrap.servers": spec.bootstrap,
        "client.id": spec.client_id,
        "linger.ms": 5,
        "logger": logger,
        **spec.config,
    }
    pconf["error_cb"] = fatal
    if mode == "transactional":
        pconf["transactional.id"] = spec.transactional_id
    producer = Producer(pconf)
    history.write(
        Event.START,
        mode=mode,
        config=printable(pconf),
        consumer_config=printable(cconf),
        failpoint=point.name if point else None,
    )

    def assigned(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.write(Event.ASSIGNED, partitions=[tp.partition for tp in partitions])

    def revoked(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.write(Event.REVOKED, partitions=[tp.partition for tp in partitions])

    def lost(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.write(Event.PARTITIONS_LOST, partitions=[tp.partition for tp in partitions])

    try:
        if mode == "transactional":
            claim_ownership(owner_of(spec), spec.name)
            # Registering the transactional.id fences an earlier instance and aborts its open
            # transaction, so the offsets this instance starts from are final.
            producer.init_transactions(30)
            history.write(Event.TXN_INIT, transactional_id=spec.transactional_id)
        consumer.subscribe([spec.input], on_assign=assigned, on_revoke=revoked, on_lost=lost)
        processor = Processor(spec, history, consumer, producer, stop, mode, fatal, cconf)
        for restart in itertools.count():
            try:
                processor.loop()
                break
            except KafkaException as exc:
                fence = restartable_fence(exc, processor, restart)
                if fence is None:
                    raise
                producer = restart_producer(processor, pconf, fence)
        history.write(Event.DONE)
        return 0
    except HungCallError as exc:
        history.write(Event.ERROR, error="CALL_HUNG", reason=str(exc))
        history.flush()
        # Closing a client with a call still blocked inside it may block as well: leave now.
        os._exit(HUNG_EXIT)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError._FATAL:
            fatal.await_cause(consumer)  # a fenced static member's cause: the next poll's error
        kind, error = fatal.classify(exc.args[0], producer)
        if kind == "fenced":
            history.write(kind, error=error.name(), reason=error.str(), by=fenced_by(error))
            # Its producer and its consumer may both have been fenced, each by its own
            # coordinator (a zombie that woke before its transaction began: AddPartitionsToTxn
            # refused, and its heartbeat refused): each fence is said, not only the first.
            for other in other_fences(fatal.errors, fenced_by(error)):
                history.write(kind, error=other.name(), reason=other.str(), by=fenced_by(other))
        else:
            history.write(kind, error=error.name(), reason=error.str())
        return 3
    finally:
        consumer.close()


def fenced_by(error: KafkaError) -> str:
    """Who fenced this instance: its group (a static member's id) or its transaction
    coordinator (the transactional id's epoch)."""
    if error.code() == KafkaError.FENCED_INSTANCE_ID or "group.instance.id" in error.str():
        return "group coordinator"
    return "transaction coordinator"


def other_fences(errors: list[KafkaError], said_by: str) -> list[KafkaError]:
    """The first fence by each coordinator other than `said_by`, among the fatal errors."""
    out: dict[str, KafkaError] = {}
    for error in errors:
        fence = error.code() in FENCED_CODES or "fenced" in error.str().lower()
        if fence and fenced_by(error) != said_by:
            out.setdefault(fenced_by(error), error)
    return list(out.values())


def restartable_fence(
    exc: KafkaException, processor: Processor, restarts: int
) -> KafkaError | None:
    """The fence to restart after, or None. A transactional processor fenced by its
    transaction coordinator while it still owns its transactional.id (nobody replaced it:
    its own transaction timed out) may go on with a new producer; a fence by its group (a
    newer member) or by a newer instance may not."""
    if processor.mode != "transactional" or restarts >= MAX_RESTARTS:
        return None
    kind, error = processor.fatal.classify(exc.args[0], processor.producer)
    if kind != "fenced" or fenced_by(error) != "transaction coordinator":
        return None
    return error if still_owner(owner_of(processor.spec), processor.spec.name) else None


def restart_producer(processor: Processor, pconf: dict[str, Any], fence: KafkaError) -> Producer:
    """The application's choice, as a real one would make it: librdkafka's fenced producer
    can do nothing more, so start a new one with the same transactional.id (its
    init_transactions takes the next epoch) and read again from the group's committed
    offsets, since nothing of the aborted transaction counts."""
    history, spec = processor.history, processor.spec
    history.write(Event.FENCED, error=fence.name(), reason=fence.str(), by=fenced_by(fence))
    processor.fatal.errors.clear()  # the consumer shares the callback: start afresh
    producer = Producer(pconf)
    history.write(Event.RESTART, by="the application", transactional_id=spec.transactional_id)
    producer.init_transactions(30)
    history.write(Event.TXN_INIT, transactional_id=spec.transactional_id)
    processor.producer = producer
    consumer = processor.consumer
    assignment = consumer.assignment()
    if assignment:
        committed = consumer.committed(assignment, timeout=10)
        said = {str(tp.partition): tp.offset if tp.offset >= 0 else "start" for tp in committed}
        for tp in committed:
            if tp.offset < 0:  # nothing committed yet: from the partition's start
                tp.offset = OFFSET_BEGINNING
            consumer.seek(tp)
        history.write(Event.RESUME, policy="group-committed", offsets=said, restart=True)
    return producer


def parse_id(msg: Message) -> int | None:
    value = parse_value(msg.value())
    return value["id"] if value else None


def ids_of(messages: list[Message]) -> list[int | None]:
    return [parse_id(m) for m in messages]


def next_offsets(messages: list[Message]) -> list[TopicPartition]:
    """The offsets to commit: one past the last consumed message of each partition."""
    last: dict[tuple[str, int], int] = {}
    for msg in messages:
        key = (msg.topic(), msg.partition())
        last[key] = max(last.get(key, -1), msg.offset())
    return [TopicPartition(t, p, o + 1) for (t, p), o in sorted(last.items())]


def first_offsets(messages: list[Message]) -> list[TopicPartition]:
    """The first consumed offset of each partition: where to read a batch again."""
    first: dict[tuple[str, int], int] = {}
    for msg in messages:
        key = (msg.topic(), msg.partition())
        first[key] = min(first.get(key, msg.offset()), msg.offset())
    return [TopicPartition(t, p, o) for (t, p), o in sorted(first.items())]


def offsets_json(offsets: list[TopicPartition]) -> dict[str, int]:
    return {str(tp.partition): tp.offset for tp in offsets}


if __name__ == "__main__":
    raise SystemExit(run(load_spec(ProcessorSpec)))
