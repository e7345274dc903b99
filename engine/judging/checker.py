"""The checker: judges a run afterwards, message by message, from what Kafka really holds.

Inputs are the workload's ledger (the ids it meant to deliver), the run's history (what each
client did and when), and the judged topic read back after the run through the brokers'
direct listener, at the level's isolation and also at the other one.

Definitions (shown in the dashboard's help, used by the PySpark job too):

- copies: records of a message id in the judged topic, read at the level's isolation.
- delivered: ids with at least one copy. duplicates: copies beyond the first, summed.
- lost: ids of the ledger with no copy that a producer sent, except those the workload
  aborted on purpose (their verdict is "aborted, as intended"). An id no producer ever sent
  (the producer stopped first: fenced, crashed without a replacement, or the run stopped)
  is "never sent": Kafka was never asked to keep it. In a processor pipeline, an id whose
  input sits at or past the processor group's committed offset at the end (the runner's
  `group_committed` events) is "not processed yet": the work was not done, and a restarted
  processor would do it; Kafka holds the input.
- reordered: within a partition, in offset order, an id with a copy stored after a copy of a
  larger id (the workload creates ids in increasing order). Every copy counts, retries too:
  a reader that applies each record in turn (last write wins, a compacted topic, a state
  store) sees that id come back after a later one.
- visible although aborted: a copy that a read_uncommitted reader sees but a read_committed
  reader does not, once every transaction has ended (it belonged to an aborted transaction).
- refusals, counted apart by what was refused (`count_refusals`), each a distinct refusal
  however many lines report it:
  - writes refused (`writes_refused`): Produce requests a partition leader refused for their
    producer epoch (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), one per request as the fault
    proxy saw the broker's answer (node, connection, correlation id). A client's own report
    of such a refusal (failed deliveries with that error, or a fence whose text names the
    ProduceRequest) counts once per producer instance only when the proxy saw no such answer
    in the level: otherwise it is the same refusal.
  - refused by the consumer group (`commits_refused`): each `commit_rejected` whose error
    says the group coordinator refused an out-of-date member's commit (UNKNOWN_MEMBER_ID,
    ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS ...; a commit that timed out was not refused),
    plus one per consumer instance the group coordinator fenced (`fenced` by the group
    coordinator: FENCED_INSTANCE_ID, a commit failed for a stale generation), however many
    lines that instance wrote about it. A fenced member's commits are all refused, but the
    fence may come from its heartbeat before it commits anything (a transactional
    processor commits through its transaction): so the count is the group's refusals of
    the member, not only of commits.
  - transaction calls refused (`txn_calls_refused`): one per producer instance (a new
    producer after a `restart` is a new instance) fenced on the transaction side (`fenced`
    not by the group coordinator, or a commit whose failure says the transaction was aborted
    under it with an epoch error), unless a write of that instance was refused first (its
    own report, or a refused Produce the proxy saw between the instance's start and the
    fence): then the fence is that write's refusal, counted as a write. Otherwise the
    transaction coordinator refused a call of the transaction for its epoch
    (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn); after it the client is
    fenced and sends nothing more, so one fence is one refusal.
- end-to-end latency: the first moment the sink consumer saw an id, minus the moment the
  workload created the message (`created_at` in its value); percentiles by nearest rank.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.model.events import Event, ProxyRecord
from engine.model.records import StoredRecord

LATENCY_DEFINITION = (
    "End-to-end latency is the moment the sink consumer first read a message, at the level's "
    "isolation, minus the moment the workload created it (the created_at field of its value). "
    "Percentiles are by nearest rank over the delivered messages."
)


@dataclass
class Verdict:
    id: int
    # delivered once | duplicated | lost | reordered | visible although aborted |
    # aborted, as intended | never sent | not processed yet
    verdict: str
    copies: int
    offsets: list[str] = field(default_factory=list)  # "partition:offset"
    sent_at: float | None = None
    acked_at: float | None = None
    ack: str = "unsent"  # acked | failed | unacked | unsent
    consumed_at: float | None = None
    latency_ms: float | None = None
    reordered: bool = False
    aborted_copies: int = 0


@dataclass
class LevelCounts:
    sent: int
    acked: int
    delivered: int
    duplicates: int
    lost: int
    reordered: int
    aborted_visible: int
    latency_ms: dict[str, float | None]
    # Stored at the level's isolation but never read by the sink: no latency for them.
    unseen_by_sink: int = 0
    # Ids no producer sent (not lost: Kafka was never asked to keep them).
    never_sent: int = 0
    # Inputs the processor had not processed when the run ended (Kafka holds them).
    not_processed: int = 0
    # What a zombie (or any out-of-date instance) was refused, by kind (count_refusals):
    # writes for their epoch, the group's refusals (commits, or the fenced member), and
    # transactional calls for their epoch.
    writes_refused: int = 0
    commits_refused: int = 0
    txn_calls_refused: int = 0
    # Every refusal of any kind, the three above summed: the name scenario and lesson files
    # read until they name the kind they mean (it once counted every `fenced` line).
    fenced: int = 0


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(latencies: Sequence[float]) -> dict[str, float | None]:
    def rounded(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {
        "p50": rounded(percentile(latencies, 50)),
        "p95": rounded(percentile(latencies, 95)),
        "p99": rounded(percentile(latencies, 99)),
        "max": rounded(max(latencies) if latencies else None),
    }


def reordered_ids(records: Iterable[StoredRecord]) -> set[int]:
    """Ids with a copy stored after a copy of a larger id in the same partition.

    Every copy counts, not only the first: a retry stored after later ids is seen out of
    order by any reader that applies each record (retry-reorder's duplicate is one).
    """
    by_partition: dict[int, list[StoredRecord]] = defaultdict(list)
    for record in records:
        if record.id is not None:
            by_partition[record.partition].append(record)
    out: set[int] = set()
    for recs in by_partition.values():
        highest = -1
        for record in sorted(recs, key=lambda r: r.offset):
            if record.id < highest:
                out.add(record.id)
            highest = max(highest, record.id)
    return out


def check(
    *,
    ledger: Sequence[int],
    history: Sequence[dict[str, Any]],
    stored: Sequence[StoredRecord],
    committed_view: Sequence[StoredRecord] | None = None,
    proxy_faults: Sequence[dict[str, Any]] = (),
    producer_procs: Iterable[str] = ("producer", "source"),
    sink_proc: str = "sink",
) -> tuple[list[Verdict], LevelCounts]:
    """Judge every message of the ledger; returns the verdicts and the level's counts.

    `stored` is the judged topic at the level's isolation. `committed_view` is the same topic
    read at read_committed; when given, copies in `stored` missing from it are aborted.
    `proxy_faults` are the fault proxy's records of this level's connections (the broker's
    answers it saw), for the refusals.
    """
    producers = set(producer_procs)
    sent_at: dict[int, float] = {}
    acked_at: dict[int, float] = {}
    failed: set[int] = set()
    consumed_at: dict[int, float] = {}
    aborted_txn_ids: set[int] = set()
    committed_txn_ids: set[int] = set()
    group_committed: dict[int, int] = {}  # input partition -> the group's offset at the end
    input_at: dict[int, tuple[int, int]] = {}  # id -> where the source's write landed
    for event in history:
        if event.get("ev") == Event.GROUP_COMMITTED and event.get("partition") is not None:
            group_committed[int(event["partition"])] = int(event["offset"])
        elif (
            event.get("proc") == "source"
            and event.get("ev") == Event.ACK
            and event.get("id") is not None
            and event.get("offset") is not None
        ):
            input_at.setdefault(event["id"], (int(event["partition"]), int(event["offset"])))
        if event.get("proc", "").split("#")[0] in producers and event.get("ev") in (
            Event.TXN_ABORT,
            Event.TXN_COMMIT,
        ):
            target = aborted_txn_ids if event["ev"] == Event.TXN_ABORT else committed_txn_ids
            target.update(event.get("ids", []))
        proc, ev, message_id = event.get("proc", ""), event.get("ev"), event.get("id")
        if message_id is None:
            continue
        if proc.split("#")[0] in producers:
            if ev == Event.SEND:
                sent_at.setdefault(message_id, event["t"])
            elif ev == Event.ACK:
                acked_at.setdefault(message_id, event["t"])
            elif ev == Event.FAIL:
                failed.add(message_id)
        elif proc == sink_proc and ev == Event.CONSUMED:
            consumed_at.setdefault(message_id, event["t"])

    # Messages the workload itself aborted (never committed): not delivering them is correct.
    aborted_by_design = aborted_txn_ids - committed_txn_ids
    committed_positions = (
        {(r.partition, r.offset) for r in committed_view} if committed_view is not None else None
    )
    copies: dict[int, list[StoredRecord]] = defaultdict(list)
    for record in stored:
        if record.id is not None:
            copies[record.id].append(record)
    reordered = reordered_ids(stored)

    verdicts: list[Verdict] = []
    latencies: list[float] = []
    for message_id in ledger:
        recs = sorted(copies.get(message_id, []), key=lambda r: (r.partition, r.offset))
        aborted = (
            sum(1 for r in recs if (r.partition, r.offset) not in committed_positions)
            if committed_positions is not None
            else 0
        )
        if message_id in acked_at:
            ack = "acked"
        elif message_id in failed:
            ack = "failed"
        elif message_id in sent_at:
            ack = "unacked"
        else:
            ack = "unsent"
        created = recs[0].created_at if recs else None
        consumed = consumed_at.get(message_id)
        latency = (consumed - created) * 1000.0 if consumed and created and recs else None
        if latency is not None:
            latencies.append(latency)
        if aborted:
            verdict = "visible although aborted"
        elif not recs and message_id in aborted_by_design:
            verdict = "aborted, as intended"
        elif not recs and ack == "unsent":
            verdict = "never sent"
        elif not recs and _pending(input_at.get(message_id), group_committed):
            verdict = "not processed yet"
        elif not recs:
            verdict = "lost"
        elif len(recs) > 1:
            verdict = "duplicated"
        elif message_id in reordered:
            verdict = "reordered"
        else:
            verdict = "delivered once"
        verdicts.append(
            Verdict(
                id=message_id,
                verdict=verdict,
                copies=len(recs),
                offsets=[f"{r.partition}:{r.offset}" for r in recs],
                sent_at=sent_at.get(message_id),
                acked_at=acked_at.get(message_id),
                ack=ack,
                consumed_at=consumed,
                latency_ms=None if latency is None else round(latency, 2),
                reordered=message_id in reordered,
                aborted_copies=aborted,
            )
        )
    ledger_ids = set(ledger)
    refusals = count_refusals(history, proxy_faults)
    counts = LevelCounts(
        sent=len(set(sent_at) & ledger_ids),
        acked=len(set(acked_at) & ledger_ids),
        delivered=sum(1 for v in verdicts if v.copies > 0),
        duplicates=sum(max(0, v.copies - 1) for v in verdicts),
        lost=sum(1 for v in verdicts if v.verdict == "lost"),
        reordered=sum(1 for v in verdicts if v.reordered),
        aborted_visible=sum(v.aborted_copies for v in verdicts),
        latency_ms=latency_summary(latencies),
        unseen_by_sink=sum(1 for v in verdicts if v.copies and v.consumed_at is None),
        never_sent=sum(1 for v in verdicts if v.verdict == "never sent"),
        not_processed=sum(1 for v in verdicts if v.verdict == "not processed yet"),
        **asdict(refusals),
        fenced=refusals.total,
    )
    return verdicts, counts


def _pending(position: tuple[int, int] | None, group_committed: dict[int, int]) -> bool:
    """An input at or past its partition's committed offset: its work is not done yet."""
    if position is None or position[0] not in group_committed:
        return False
    return position[1] >= group_committed[position[0]]


# A partition leader's answers to a Produce whose producer epoch is out of date: a newer
# instance of the transactional.id (or the coordinator's timeout abort) bumped it.
EPOCH_ANSWERS = frozenset({"INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"})
# A client's failed delivery that says the broker refused the write for its epoch. Not the
# Java client's ProducerFencedException: it also fails, locally, the batches still queued
# once the producer is fenced by another call, which no broker refused.
WRITE_REFUSED_ERRORS = EPOCH_ANSWERS | {"InvalidProducerEpochException"}
# Errors of a failed commit_transaction that mean an epoch fence, as the roles write them.
EPOCH_FENCE_ERRORS = EPOCH_ANSWERS | {
    "_FENCED",
    "ProducerFencedException",
    "InvalidProducerEpochException",
}
GROUP = "group coordinator"
# A commit the group coordinator refused because the member is out of date (librdkafka's
# and the Java client's names). A commit that timed out or found no coordinator was not
# refused, and is not counted.
GROUP_REFUSALS = frozenset(
    {
        "UNKNOWN_MEMBER_ID",
        "ILLEGAL_GENERATION",
        "REBALANCE_IN_PROGRESS",
        "FENCED_INSTANCE_ID",
        "STALE_MEMBER_EPOCH",
        "CommitFailedException",
        "RebalanceInProgressException",
        "FencedInstanceIdException",
        "UnknownMemberIdException",
        "IllegalGenerationException",
        "StaleMemberEpochException",
    }
)
# The events count_refusals reads (the metrics job selects these rows only).
REFUSAL_EVENTS = ("fenced", "commit_rejected", "txn_abort", "restart", "fail", "output_failed")


@dataclass(frozen=True)
class Refusals:
    """What was refused, by kind (the module's definitions list says how each is counted)."""

    writes_refused: int = 0
    commits_refused: int = 0
    txn_calls_refused: int = 0

    @property
    def total(self) -> int:
        return self.writes_refused + self.commits_refused + self.txn_calls_refused


def count_refusals(
    history: Iterable[dict[str, Any]], proxy_faults: Iterable[dict[str, Any]] = ()
) -> Refusals:
    """Count each distinct refusal once, from the history and the proxy's broker answers."""
    refused_produce = {
        (f.get("node"), f.get("conn"), f.get("correlation_id")): _time(f)
        for f in proxy_faults
        if f.get("kind") == ProxyRecord.PRODUCE_ERROR and f.get("error") in EPOCH_ANSWERS
    }
    proxy_times = sorted(refused_produce.values())
    # Each event with the life of its process's producer: a `restart` starts a new one.
    restarts: dict[str, int] = defaultdict(int)
    born: dict[tuple[str, int], float] = {}
    lived: list[tuple[tuple[str, int], dict[str, Any]]] = []
    # In time order whatever the input's order of equal times (the metrics job collects the
    # rows in any order), a restart after the lines its fence wrote at the same moment.
    for event in sorted(history, key=lambda e: (_time(e), e.get("ev") == Event.RESTART)):
        proc = str(event.get("proc") or "")
        if event.get("ev") == Event.RESTART:
            restarts[proc] += 1
            born[(proc, restarts[proc])] = _time(event)
        lived.append(((proc, restarts[proc]), event))
    # A client's report of a refused write may come before or after its fence line (delivery
    # reports are served when the client polls): the whole life is searched for one.
    wrote_refused = {
        key
        for key, e in lived
        if e.get("ev") in (Event.FAIL, Event.OUTPUT_FAILED)
        and e.get("error") in WRITE_REFUSED_ERRORS
    }
    txn_fenced: set[tuple[str, int]] = set()
    fenced_by_write: set[tuple[str, int]] = set()
    group_fenced: set[str] = set()
    commits_rejected = 0
    for key, event in lived:
        ev = event.get("ev")
        if ev == Event.COMMIT_REJECTED and event.get("error") in GROUP_REFUSALS:
            commits_rejected += 1
        elif ev == Event.FENCED and event.get("by") == GROUP:
            group_fenced.add(key[0])
        elif key not in txn_fenced | fenced_by_write and _txn_fence(event):
            # A fence after a refused write is that write's refusal, not a call's.
            start, now = born.get(key, float("-inf")), _time(event)
            # librdkafka names the refused request in the fence's text ("ProduceRequest for
            # TOPIC [0] with 1 message(s) failed").
            says_write = "producerequest" in str(event.get("reason", "")).lower()
            if says_write or key in wrote_refused or any(start <= t <= now for t in proxy_times):
                fenced_by_write.add(key)
            else:
                txn_fenced.add(key)
    by_clients = 0 if refused_produce else len(wrote_refused | fenced_by_write)
    return Refusals(
        writes_refused=len(refused_produce) + by_clients,
        commits_refused=commits_rejected + len(group_fenced),
        txn_calls_refused=len(txn_fenced),
    )


def _time(event: dict[str, Any]) -> float:
    return float(event.get("t") or 0.0)


def _txn_fence(event: dict[str, Any]) -> bool:
    """A producer fenced for its epoch: a `fenced` line not by the group, or a commit that
    failed because the transaction was aborted under it with an epoch error."""
    ev = event.get("ev")
    if ev == Event.FENCED:
        return event.get("by") != GROUP
    if ev == Event.TXN_ABORT and event.get("by"):
        reason = str(event.get("reason", "")).lower()
        return event.get("error") in EPOCH_FENCE_ERRORS or "fenced" in reason or "epoch" in reason
    return False


def verdicts_to_rows(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    return [asdict(v) for v in verdicts]
