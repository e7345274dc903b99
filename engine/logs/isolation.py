"""The isolation view: read_committed next to read_uncommitted, live, from a recorded run, or
around a transaction the lab holds open.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from engine.kafka import admin
from engine.logs.batches import Batch
from engine.logs.errors import LogViewError
from engine.model.events import Event

if TYPE_CHECKING:
    from engine.run.record import RecordedRun
from engine.logs.reading import (
    LogRecord,
    PartitionRead,
    PartitionReader,
    Progress,
    _produce_all,
    _producer,
    new_topic_name,
    require_partition,
)


# ---- read_committed next to read_uncommitted ------------------------------------------------
@dataclass
class IsolationRow:
    offset: int
    key: str | None
    value: str | None
    read_uncommitted: bool
    read_committed: bool
    kind: str  # committed | aborted | open | marker | not transactional
    marker: str | None = None  # COMMIT / ABORT / None for an unknown marker
    exact: bool = True  # False when the marker's type is inferred rather than dumped
    producer: str | None = None  # "id/epoch" from the dump
    txn: str | None = None  # the recorded run's transaction, e.g. "producer txn 1: aborted"
    sink_wait_ms: float | None = None  # recorded run: the broker's ack -> the sink got it


@dataclass
class IsolationView:
    topic: str
    partition: int
    source: str  # "live" or "recorded run RUN_ID, level LEVEL"
    rows: list[IsolationRow]
    log_start: int
    high_watermark: int
    last_stable_offset: int
    value_label: str = "value"
    notes: list[str] = field(default_factory=list)

    @property
    def aborted(self) -> list[int]:
        return [r.offset for r in self.rows if r.kind == "aborted"]

    @property
    def markers(self) -> list[IsolationRow]:
        return [r for r in self.rows if r.kind == "marker"]

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source": self.source,
            "log_start": self.log_start,
            "high_watermark": self.high_watermark,
            "last_stable_offset": self.last_stable_offset,
            "aborted": self.aborted,
            "markers": [
                {"offset": r.offset, "type": r.marker, "exact": r.exact} for r in self.markers
            ],
            "rows": [asdict(r) for r in self.rows],
            "notes": self.notes,
        }


def build_isolation_rows(
    uncommitted: list[LogRecord],
    committed: list[LogRecord],
    *,
    start: int,
    end: int,
    lso: int,
    markers: dict[int, str] | None = None,
) -> list[IsolationRow]:
    """Line two reads of one partition up by offset and say what each offset is.

    An offset in neither read, between `start` and `end`, is a control marker: consumers
    never receive markers. Its type comes from `markers` (the dump) when given, and is
    inferred otherwise: a marker right after aborted records is an ABORT.
    """
    unc = {r.offset: r for r in uncommitted}
    com = {r.offset: r for r in committed}
    rows: list[IsolationRow] = []
    last_data_kind: str | None = None
    for offset in range(start, max(end, max([*unc, *com], default=-1) + 1)):
        record = unc.get(offset) or com.get(offset)
        if record is not None:
            if offset in com:
                kind = "committed"
            elif offset >= lso:
                kind = "open"
            else:
                kind = "aborted"
            rows.append(
                IsolationRow(
                    offset, record.key, record.value, offset in unc, offset in com, kind=kind
                )
            )
            last_data_kind = kind
            continue
        if markers is not None:
            rows.append(
                IsolationRow(offset, None, None, False, False, "marker", markers.get(offset))
            )
        else:
            guess = "ABORT" if last_data_kind == "aborted" else "COMMIT"
            rows.append(IsolationRow(offset, None, None, False, False, "marker", guess, False))
    return rows


INFERRED_MARKERS = (
    "Offsets in neither read are control markers; their types are inferred from the records "
    "before them until the batches are dumped."
)


def apply_batches(view: IsolationView, batches: list[Batch]) -> IsolationView:
    """Replace inferred marker types by the dump's, and add each offset's producer id/epoch."""
    marker_types: dict[int, str] = {}
    producers: dict[int, str] = {}
    transactional: set[int] = set()
    for b in batches:
        for offset in range(b.base_offset, b.last_offset + 1):
            producers[offset] = f"{b.producer_id}/{b.producer_epoch}"
            if b.is_transactional:
                transactional.add(offset)
            if b.is_control:
                marker_types[offset] = b.control_type or "control"
    for row in view.rows:
        row.producer = producers.get(row.offset)
        if row.kind == "marker" and row.offset in marker_types:
            row.marker, row.exact = marker_types[row.offset], True
        elif row.kind == "committed" and row.producer and row.offset not in transactional:
            row.kind = "not transactional"
    view.notes = [n for n in view.notes if n != INFERRED_MARKERS]
    view.notes.append("Markers, producer ids and epochs come from Kafka's DumpLogSegments.")
    return view


def isolation_live(bootstrap: str, topic: str, partition: int = 0) -> IsolationView:
    """One partition as read_uncommitted and read_committed consumers see it right now.

    The high watermark and the last stable offset are ListOffsets answers at each isolation
    level; a read_committed consumer stops at the LSO while a transaction is open.
    """
    require_partition(bootstrap, topic, partition)
    readers = {
        iso: PartitionReader(bootstrap, topic, partition, isolation=iso)
        for iso in ("read_uncommitted", "read_committed")
    }
    try:
        low, hw = readers["read_uncommitted"].end_offsets()
        _, lso = readers["read_committed"].end_offsets()
        reads: dict[str, PartitionRead] = {}
        failures: list[BaseException] = []

        def read(iso: str) -> None:
            try:
                reads[iso] = readers[iso].read()
            except BaseException as exc:  # re-raised in the caller's thread below
                failures.append(exc)

        # Both reads at once: each mostly waits on the broker.
        threads = [threading.Thread(target=read, args=(iso,)) for iso in readers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
    finally:
        for reader in readers.values():
            reader.close()
    rows = build_isolation_rows(
        reads["read_uncommitted"].records,
        reads["read_committed"].records,
        start=low,
        end=hw,
        lso=lso,
    )
    notes = [f"read_committed stopped at offset {reads['read_committed'].end_offset} (the LSO)."]
    if any(r.kind == "marker" for r in rows):
        notes.append(INFERRED_MARKERS)
    return IsolationView(topic, partition, "live", rows, low, hw, lso, notes=notes)


def _run_txn_labels(
    history: list[dict[str, Any]], partition: int, writes: tuple[str, ...]
) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """From a run's history: each written offset's transaction, and every transaction.

    Returns (offset -> label, transactions in order). A
    transaction is a txn_begin with its ids, ended by txn_commit or txn_abort of the same
    client process; one without an end was fenced or crashed, and the coordinator aborts it.
    """
    open_txn: dict[str, dict[str, Any]] = {}
    txns: list[dict[str, Any]] = []
    labels: dict[int, str] = {}
    for event in sorted(history, key=lambda e: e.get("t", 0)):
        proc, ev = str(event.get("proc", "")), event.get("ev")
        if ev == Event.TXN_BEGIN:
            txn = {"proc": proc, "n": sum(1 for t in txns if t["proc"] == proc), "end": None}
            txn["offsets"] = []
            txns.append(txn)
            open_txn[proc] = txn
        elif ev in (Event.TXN_COMMIT, Event.TXN_ABORT) and proc in open_txn:
            open_txn.pop(proc)["end"] = "commit" if ev == Event.TXN_COMMIT else "abort"
        elif ev in writes and event.get("partition") == partition and "offset" in event:
            txn = open_txn.get(proc)
            if txn is not None:
                txn["offsets"].append(event["offset"])
    for txn in txns:
        outcome = {"commit": "committed", "abort": "aborted"}.get(
            txn["end"], "never ended (aborted by the coordinator)"
        )
        for offset in txn["offsets"]:
            labels[offset] = f"{txn['proc']} txn {txn['n']}: {outcome}"
    return labels, txns


def _sink_waits(
    history: list[dict[str, Any]], partition: int, writes: tuple[str, ...]
) -> dict[int, float]:
    """Offset -> ms from the writer's ack to the level's sink consuming the record.

    Negative when the sink had the record before the ack reached the writer (a
    read_uncommitted sink can).
    """
    acked: dict[int, float] = {}
    consumed: dict[int, float] = {}
    for event in history:
        if event.get("partition") != partition or event.get("offset") is None:
            continue
        base = str(event.get("proc", "")).split("#")[0]
        if event.get("ev") in writes and base != "sink":
            acked[event["offset"]] = min(event["t"], acked.get(event["offset"], event["t"]))
        elif base == "sink" and event.get("ev") == Event.CONSUMED:
            consumed[event["offset"]] = min(event["t"], consumed.get(event["offset"], event["t"]))
    return {o: round((consumed[o] - acked[o]) * 1000) for o in consumed if o in acked}


def isolation_from_run(run: RecordedRun, level: str, partition: int = 0) -> IsolationView:
    """A recorded run's judged topic at both isolation levels, from runs/RUN_ID (no Kafka).

    The record holds the read_committed read, and the read at the level's own isolation. For
    a read_committed level the read_uncommitted side is what the broker acknowledged to the
    writer (an offset per ack); markers are the offsets in neither, typed by the run's
    transaction events.
    """
    data = run.levels.get(level)
    result = run.results.get(level)
    if data is None or result is None:
        raise LogViewError(f"Run {run.run_id} has no level '{level}'; pick one of its levels.")
    stored, history = data.stored, data.history
    topic = result.get("sink_topic", "?")
    # The judged topic is the processor's output for a processor pipeline, else the input.
    writes = ("output_acked",) if topic.endswith(".out") else ("ack",)

    def as_records(items: Iterable[dict[str, Any]]) -> list[LogRecord]:
        found = {
            int(i["offset"]): LogRecord(int(i["offset"]), None, str(i.get("id")))
            for i in items
            if i.get("partition", 0) == partition and i.get("offset") is not None
        }
        return [found[o] for o in sorted(found)]

    committed = as_records(stored.get("read_committed", []))
    notes: list[str] = []
    if stored.get("isolation") == "read_uncommitted":
        uncommitted = as_records(stored.get("at_level", []))
        notes.append("Both reads were recorded by the run (read back from the broker).")
    else:
        acked = [
            e
            for e in history
            if e.get("ev") in writes and str(e.get("proc", "")).split("#")[0] != "sink"
        ]
        uncommitted = as_records(acked)
        notes.append(
            "This level read at read_committed, so its record has no read_uncommitted read: "
            "that side shows what the broker acknowledged to the writer (offset per ack). "
            "Open the run's read_uncommitted level for a real read at that isolation."
        )
    labels, txns = _run_txn_labels(history, partition, writes)
    waits = _sink_waits(history, partition, writes)
    seen = {r.offset for r in uncommitted} | {r.offset for r in committed}
    last = max(seen, default=-1)
    # Markers: after each ended transaction's last record, the first offset nobody read.
    # The last transaction's marker lies past the last record, beyond both reads.
    marker_at: dict[int, str] = {}
    for txn in sorted((t for t in txns if t["offsets"]), key=lambda t: max(t["offsets"])):
        outcome = {"commit": "COMMIT", "abort": "ABORT", None: "ABORT"}[txn["end"]]
        candidate = max(txn["offsets"]) + 1
        while candidate in seen or candidate in marker_at:
            candidate += 1
        if candidate <= last or txn["end"] is not None:
            marker_at[candidate] = outcome
    end = max([last, *marker_at]) + 1
    rows = build_isolation_rows(uncommitted, committed, start=0, end=end, lso=end)
    for row in rows:
        row.txn = labels.get(row.offset)
        row.sink_wait_ms = waits.get(row.offset)
        if row.kind == "marker":
            row.exact = False
            if row.offset in marker_at:
                row.marker = marker_at[row.offset]
    if any(e.get("ev") == Event.TXN_OPEN for e in history):
        notes.append(
            f"The run held a transaction open on purpose. The level's sink read at "
            f"{stored.get('isolation')}. 'Sink got it' is the time from the broker's ack to "
            "the sink receiving the record (negative: before the ack reached the writer); a "
            "read_committed sink waits at the LSO until the commit."
        )
    if txns:
        notes.append(
            "Markers are the offsets in neither read; their types follow the run's "
            "transaction events. High watermark and LSO are inferred: every transaction had "
            "ended when the run read the topic, so the LSO equals the high watermark."
        )
    else:
        notes.append("This level wrote no transactions: both isolation levels read the same.")
    return IsolationView(
        topic,
        partition,
        f"recorded run {run.run_id}, level {level}",
        rows,
        0,
        end,
        end,
        value_label="message id",
        notes=notes,
    )


def run_has_transactions(run: RecordedRun, level: str) -> bool:
    data = run.levels.get(level)
    return data is not None and any(e.get("ev") == Event.TXN_BEGIN for e in data.history)


def wait_until_stable(bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
    """Wait until no transaction is open on the partition (LSO = HW); return that offset."""
    with (
        PartitionReader(bootstrap, topic, partition) as unc,
        PartitionReader(bootstrap, topic, partition, isolation="read_committed") as com,
    ):
        deadline = time.monotonic() + timeout
        while True:
            hw, lso = unc.end_offsets()[1], com.end_offsets()[1]
            if lso == hw or time.monotonic() > deadline:
                return lso
            time.sleep(0.05)


@dataclass
class OpenTransactionDemo:
    topic: str
    while_open: IsolationView
    after_commit: IsolationView

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "while_open": self.while_open.to_json(),
            "after_commit": self.after_commit.to_json(),
        }


def open_transaction_demo(
    bootstrap: str, *, open_records: int = 3, progress: Progress | None = None
) -> OpenTransactionDemo:
    """Commit one transaction, abort one, hold a third open and look, then commit it and look.

    While the third is open, read_committed stops at the last stable offset (its first
    record), below the high watermark; after the commit the two offsets meet.
    """
    if not 1 <= open_records <= 100:
        raise LogViewError(f"The open transaction takes 1 to 100 records, not {open_records}.")
    say = progress or (lambda _step: None)
    topic = new_topic_name("isolation")
    say(f"Creating {topic}")
    try:
        admin.create_topic(bootstrap, topic)
    except (KafkaException, TimeoutError) as exc:
        raise LogViewError(f"Could not create the topic {topic} ({exc}).") from exc
    producer = _producer(
        bootstrap, **{"transactional.id": f"{topic}-txn", "transaction.timeout.ms": 30000}
    )
    try:
        producer.init_transactions(30)
        say("Transaction 1: three records, committed")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"c{i}", f"committed {i}") for i in range(1, 4)])
        producer.commit_transaction(30)
        say("Transaction 2: two records, aborted")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"a{i}", f"aborted {i}") for i in range(1, 3)])
        producer.abort_transaction(30)
        say(f"Transaction 3: {open_records} record(s), left open")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"o{i}", f"open {i}") for i in range(1, open_records + 1)])
        say("Reading both isolation levels while transaction 3 is open")
        while_open = isolation_live(bootstrap, topic)
        say("Committing transaction 3")
        producer.commit_transaction(30)
        # The commit returns once the coordinator has decided; its marker follows shortly.
        wait_until_stable(bootstrap, topic)
    except BaseException as exc:
        # Never leave the transaction open: it would hold read_committed readers for 30 s.
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(10)
        if isinstance(exc, KafkaException):
            raise LogViewError(f"The transactional producer failed ({exc}).") from exc
        raise
    after_commit = isolation_live(bootstrap, topic)
    return OpenTransactionDemo(topic, while_open, after_commit)
