"""The workload's producer: writes uniquely identified JSON messages and records each fate.

Events: `ready` (started and waiting at the start gate, when the spec has one), `send` (the
message is about to be handed to librdkafka), `ack` (the broker confirmed
it, with its partition and offset), `fail` (librdkafka gave up), and for transactional
producers `txn_begin`, `txn_commit`, `txn_abort`, `txn_open` (held open on purpose) and
`fenced`.

Non-batch workloads flush after every message, so each message is its own Produce request
and "the third request" in a scenario means the third message.

The history costs little per message, so that the role keeps up with a bare confluent_kafka
loop (issue 8): `send` lines are written a chunk at a time *before* that chunk is produced
(a message in Kafka always has its `send` line, even after a SIGKILL), and delivery reports
are formatted in the callback and written after each poll or flush slice, at most 0.1 s late.

With `outbox` in its spec the role also keeps the application's own record of what it sent
and what was acknowledged (a JSONL file, as an outbox table would be): "sent" marks go down
before the send, "acked" marks with the delivery reports. A replacement instance (`resume`
in its spec) decides what to send from that record or from what Kafka holds, never from
another process's history:

- `never-resend`: only ids the outbox never marked sent (at most once);
- `resend-unacked`: every id the outbox has not marked acknowledged (at least once);
- `read-committed`: after `init_transactions` has aborted the dead instance's transaction,
  every id not in the topic at read_committed (exactly once).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from engine.base.values import Stamp, value_maker
from engine.kafka.reader import read_topic
from engine.model.events import Event
from engine.model.history import HistoryWriter, read_jsonl
from engine.proc.failpoints import ArmedFailPoint
from engine.roles.common import (
    FENCED_CODES,
    MAX_RESTARTS,
    FatalErrors,
    StopFlag,
    claim_ownership,
    client_logger,
    failpoint_of,
    load_spec,
    printable,
    still_owner,
)
from engine.roles.registry import Role
from engine.roles.specs import ProducerSpec

ROLE = Role(
    name="producer",
    entry="producer",
    java=False,
    part="producer",
    spec_model=ProducerSpec,
    events=frozenset(
        {
            Event.START,
            Event.READY,
            Event.SEND,
            Event.ACK,
            Event.FAIL,
            Event.RESUME,
            Event.RESTART,
            Event.FENCED,
            Event.TXN_INIT,
            Event.TXN_BEGIN,
            Event.TXN_FLUSHED,
            Event.TXN_OPEN,
            Event.TXN_COMMIT,
            Event.TXN_ABORT,
            Event.TXN_COMMIT_UNKNOWN,
            Event.DONE,
        }
    ),
    about="The producing application on librdkafka (confluent_kafka), at the level's settings.",
)

# The hot lines' "ev" fields, formatted once: formatting a member per message costs 0.2 µs.
SEND_EV, ACK_EV = f'"ev":"{Event.SEND}"', f'"ev":"{Event.ACK}"'
# Messages per chunk in batch mode: one write of send lines, then their produce() calls.
CHUNK = 1000
# Delivery reports are written to the history at least this often while a flush waits.
FLUSH_SLICE_S = 0.1
# History lines are stamped to the millisecond (see Stamp).
HISTORY_RESOLUTION_S = 0.001


class ProducerHistory:
    """The role's send/ack/fail lines, formatted by hand in bulk.

    Same lines as `HistoryWriter.write` gives (the tests compare them), without a json.dumps
    per event: that alone would cost more than the produce() call it records.
    """

    def __init__(self, history: HistoryWriter, outbox: str | None = None) -> None:
        self.history = history
        self._proc = json.dumps(history.proc)
        self._stamp = Stamp(HISTORY_RESOLUTION_S)
        self._reports: list[str] = []
        # The application's record of sends and acks (see the module's docstring).
        self._outbox = HistoryWriter(outbox, history.proc) if outbox else None
        self._acked: list[str] = []

    def sends(self, ids: Sequence[int]) -> None:
        head = f'{{"t":{self._stamp()},"proc":{self._proc},{SEND_EV},"id":'
        if self._outbox is not None:
            self._outbox.write_text("".join(f'{{"id":{i},"state":"sent"}}\n' for i in ids))
        self.history.write_text("".join([f"{head}{message_id}}}\n" for message_id in ids]))

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        """librdkafka's delivery report: kept until `write_reports`."""
        if err is None:
            key = msg.key().decode()
            # None when the broker did not say where the write is: an idempotent retry of a
            # batch it already holds is acknowledged as a duplicate, without its offset.
            offset = msg.offset()
            self._reports.append(
                f'{{"t":{self._stamp()},"proc":{self._proc},{ACK_EV},"id":{key},'
                f'"partition":{msg.partition()},"offset":{"null" if offset is None else offset}}}\n'
            )
            if self._outbox is not None:
                self._acked.append(f'{{"id":{key},"state":"acked"}}\n')
        else:
            self._reports.append(
                self.history.line(Event.FAIL, id=int(msg.key()), error=err.name(), reason=err.str())
            )

    def write_reports(self) -> None:
        if self._reports:
            self.history.write_text("".join(self._reports))
            self._reports.clear()
        if self._acked and self._outbox is not None:
            self._outbox.write_text("".join(self._acked))
            self._acked.clear()


def committed_ids(spec: ProducerSpec) -> set[int]:
    """The ids the topic holds at read_committed: what a transactional restart skips."""
    stored = read_topic(spec.bootstrap, spec.topic, "read_committed", spec.partitions)
    return {r.id for r in stored if r.id is not None}


def ids_to_send(spec: ProducerSpec, history: HistoryWriter, *, restart: bool = False) -> list[int]:
    """What this instance sends: all of `ids`, or for a replacement what its policy leaves.

    `restart`: a new producer in this process after fencing, which sends what the topic
    lacks at read_committed, as a transactional replacement does.
    """
    ids: list[int] = spec.ids
    if restart:
        policy, outbox = "read-committed", None
    elif spec.resume is not None:
        policy, outbox = spec.resume.policy, spec.resume.outbox
    else:
        return ids
    marks = read_jsonl(outbox) if outbox and policy != "read-committed" else []
    if policy == "never-resend":
        done = {m["id"] for m in marks if m.get("state") == "sent"}
        source = "its outbox's sent marks"
    elif policy == "resend-unacked":
        done = {m["id"] for m in marks if m.get("state") == "acked"}
        source = "its outbox's acknowledged marks"
    else:  # read-committed, after init_transactions aborted the dead instance's transaction
        done = committed_ids(spec)
        source = "the topic read at read_committed"
    todo = [i for i in ids if i not in done]
    said = {"restart": True} if restart else {}
    history.write(
        Event.RESUME, policy=policy, source=source, ids=todo, skipped=len(ids) - len(todo), **said
    )
    return todo


class IdempotenceState:
    """An idempotent librdkafka producer's id state, from its statistics (librdkafka's
    STATISTICS.md, `eos.idemp_state`: "Assigned" once it holds a producer id)."""

    def __init__(self) -> None:
        self.state = "unknown"

    def __call__(self, stats_json: str) -> None:
        if self.state == "Assigned":  # the statistics go on every 100 ms; the id is known
            return
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            self.state = str(json.loads(stats_json).get("eos", {}).get("idemp_state"))

    def wait_assigned(self, producer: Producer, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.state != "Assigned" and time.monotonic() < deadline:
            producer.poll(0.05)  # serves the statistics callback
        return self.state == "Assigned"


def run(spec: ProducerSpec) -> int:
    # A fault point on a transaction step (engine.faults.clients.ARMABLE_EVENTS), if one is armed.
    point = failpoint_of(spec)
    history = HistoryWriter(spec.history, spec.name, point and ArmedFailPoint(point))
    events = ProducerHistory(history, spec.outbox)
    stop = StopFlag()
    batch = spec.batch
    conf = {
        "bootstrap.servers": spec.bootstrap,
        "client.id": spec.client_id,
        # Batch mode: hold messages until the final flush (which sends at once), so that a
        # slow moment on a busy machine cannot split "the batch" into two requests.
        "linger.ms": 5000 if batch else 0,
        "logger": client_logger(),
        **spec.config,
    }
    fatal = FatalErrors()
    conf["error_cb"] = fatal
    txn = spec.transactional
    if txn:
        conf["transactional.id"] = txn["id"]
    gate = spec.start_gate
    # Waits at the gate for its producer id: an idempotent, non-transactional producer
    # (a transactional one has its id from init_transactions, after the gate).
    awaits_id = bool(gate) and conf.get("enable.idempotence") in (True, "true") and not txn
    idempotence = IdempotenceState()
    if awaits_id:
        conf["statistics.interval.ms"] = 100
        conf["stats_cb"] = idempotence
    producer = Producer(conf)
    history.write(Event.START, config=printable(conf))
    if gate:
        # Learn the topic's leader while waiting, as a producer already running would know
        # it: the first write then goes out at once when the gate opens.
        with contextlib.suppress(KafkaException):
            producer.list_topics(spec.topic, timeout=10)
        if awaits_id:
            # And its producer id: an idempotent producer asks for one first (InitProducerId;
            # a broker's first asks the controller for a block of ids), which took 1.1 s
            # on a loaded machine while a non-idempotent producer beside it had sent 6 of
            # its 7 messages, and a fault meant for both levels' first message struck late.
            idempotence.wait_assigned(producer, timeout_s=30.0)
            history.write(Event.READY, idemp_state=idempotence.state)
        else:
            history.write(Event.READY)  # the runner opens the gate once every producer is ready
        wait_for_gate(gate, stop)
    topic = spec.topic
    # value_bytes: pad each value to this size (the cost benchmark's 1 KB messages).
    make_value = value_maker(spec.run_id, spec.level, spec.name, spec.value_bytes or 0)
    on_delivery = events.on_delivery

    def send(chunk: Sequence[int]) -> None:
        events.sends(chunk)
        for message_id in chunk:
            value = make_value(message_id)
            while True:
                try:
                    producer.produce(topic, value, key=str(message_id), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
                    events.write_reports()

    def flush(timeout_s: float) -> int:
        """producer.flush in slices, writing the delivery reports after each; what is left."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = producer.flush(max(0.0, min(FLUSH_SLICE_S, deadline - time.monotonic())))
            events.write_reports()
            if left == 0 or time.monotonic() >= deadline:
                return left

    interval = 1.0 / spec.rate if spec.rate else 0.0
    timeout_s = spec.flush_timeout_s
    try:
        if txn:
            claim_ownership(txn, spec.name)
            producer.init_transactions(30)
            history.write(Event.TXN_INIT, transactional_id=txn["id"])
            ids = ids_to_send(spec, history)
            numbers = itertools.count()  # transaction numbers go on across restarts
            for restart in itertools.count():
                try:
                    run_transactions(producer, history, stop, ids, send, flush, txn, batch, numbers)
                    break
                except KafkaException as exc:
                    kind, error = fatal.classify(exc.args[0], producer)
                    if (
                        kind != "fenced"
                        or restart >= MAX_RESTARTS
                        or not still_owner(txn, spec.name)
                    ):
                        raise
                    events.write_reports()
                    history.write(Event.FENCED, error=error.name(), reason=error.str())
                    # The application's choice: librdkafka's fenced producer can do nothing
                    # more, and no newer instance owns the transactional.id, so (as a real
                    # application would) start a new producer with the same id. Its
                    # init_transactions fences the old epoch and finishes any transaction
                    # still open; then send what the topic lacks at read_committed.
                    fatal = FatalErrors()
                    conf["error_cb"] = fatal
                    producer = Producer(conf)
                    history.write(Event.RESTART, by="the application", transactional_id=txn["id"])
                    producer.init_transactions(30)
                    history.write(Event.TXN_INIT, transactional_id=txn["id"])
                    ids = ids_to_send(spec, history, restart=True)
        else:
            ids = ids_to_send(spec, history)
            step = CHUNK if batch and not interval else 1
            for start in range(0, len(ids), step):
                if stop.stopped:
                    break
                began = time.monotonic()
                send(ids[start : start + step])
                if batch:
                    producer.poll(0)
                    events.write_reports()
                else:
                    flush(timeout_s)
                if interval and start + step < len(ids):
                    # Wait out the pace serving delivery reports, so that each ack is
                    # stamped when it arrives, not at the next send.
                    next_send = began + interval
                    while (left := next_send - time.monotonic()) > 0:
                        producer.poll(left)
                        events.write_reports()
        remaining = flush(timeout_s)
        history.write(Event.DONE, unflushed=remaining)
        return 0
    except KafkaException as exc:
        events.write_reports()
        kind, error = fatal.classify(exc.args[0], producer)
        history.write(kind, error=error.name(), reason=error.str())
        return 3


def wait_for_gate(path: str, stop: StopFlag, timeout_s: float = 120.0) -> None:
    """Wait, started, until the runner creates `path`: levels that share one broker fault
    begin sending together, whatever each process's start-up cost on a busy machine."""
    deadline = time.monotonic() + timeout_s
    while not Path(path).exists() and not stop.stopped and time.monotonic() < deadline:
        time.sleep(0.005)


def run_transactions(
    producer: Producer,
    history: HistoryWriter,
    stop: StopFlag,
    ids: list[int],
    send: Callable[[Sequence[int]], None],
    flush: Callable[[float], int],
    txn: dict[str, Any],
    batch: bool,
    numbers: Iterator[int],
) -> None:
    """Send `ids` in transactions of `size`; abort the ones listed, hold one open if asked.

    `numbers` gives each transaction its number, and goes on after a restart.
    """
    size = int(txn.get("size", 5))
    aborts = set(txn.get("abort", []))
    hold = txn.get("hold_open") or {}
    # range first: zip stops on it without taking a number the next restart should use.
    for start, index in zip(range(0, len(ids), size), numbers, strict=False):
        if stop.stopped:
            break
        chunk = ids[start : start + size]
        producer.begin_transaction()
        history.write(Event.TXN_BEGIN, txn=index, ids=chunk)
        if batch:
            send(chunk)
        else:
            for message_id in chunk:
                send([message_id])
                flush(120)  # one Produce request per message, as outside transactions
        flush(120)
        # Every record of the transaction appended, the commit not asked for yet: the point
        # where a producer that stalls leaves its transaction open (transaction-timeout).
        history.write(Event.TXN_FLUSHED, txn=index, ids=chunk)
        if hold.get("txn") == index:
            history.write(Event.TXN_OPEN, txn=index, seconds=hold["seconds"])
            time.sleep(float(hold["seconds"]))
        if index in aborts:
            producer.abort_transaction(30)
            flush(0)  # reports of anything the abort purged
            history.write(Event.TXN_ABORT, txn=index, ids=chunk)
        else:
            commit(producer, history, index, chunk)
            flush(0)
            history.write(Event.TXN_COMMIT, txn=index, ids=chunk)


def commit(producer: Producer, history: HistoryWriter, index: int, chunk: Sequence[int]) -> None:
    """commit_transaction, saying in the history when the transaction was aborted instead.

    A producer that stalled past transaction.timeout.ms finds its transaction aborted by the
    coordinator (and its epoch bumped): the commit fails with a fenced or abortable error, and
    the application knows that nothing of the transaction was committed. Any other failure
    (a timeout, the coordinator unreachable) leaves the outcome unknown, and says so.
    """
    try:
        producer.commit_transaction(30)
    except KafkaException as exc:
        error = exc.args[0]
        aborted = (
            error.txn_requires_abort()
            or error.code() in FENCED_CODES
            or "fenced" in error.str().lower()
        )
        if aborted:
            history.write(
                Event.TXN_ABORT,
                txn=index,
                ids=list(chunk),
                error=error.name(),
                reason=error.str(),
                by="the commit failed: the transaction was aborted",
            )
            if error.txn_requires_abort():
                producer.abort_transaction(30)
        else:
            history.write(Event.TXN_COMMIT_UNKNOWN, txn=index, ids=list(chunk), error=error.name())
        raise


if __name__ == "__main__":
    raise SystemExit(run(load_spec(ProducerSpec)))
