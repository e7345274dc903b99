"""Explains a level's numbers from the run's own evidence, after the checker has counted.

Three kinds of sentence, each built only from the history and the counts of this run:

- evidence: what the faults did and how Kafka answered (where a fault point stopped a
  process, who was fenced and with which error, where a replacement started reading);
- why: for every count that a level's promise excludes, or that a room would ask about
  (duplicates under at-most-once, loss under at-least-once, reordering), which ids, who wrote
  them, and the mechanism the evidence shows;
- choices: what the lab decided as the application would (how a replacement joins, what a
  replacement producer resends). The page labels these as the application's, not Kafka's.

And one headline: the level's verdict in a sentence a room reads from the back, built from
the same counts and evidence ("1 duplicate: id 2 sent again after its ack was lost").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.faults import KINDS, takes_leader_away, wakes
from engine.judging.checker import EPOCH_ANSWERS, LevelCounts, Verdict
from engine.judging.client_evidence import client_evidence
from engine.model.events import Event, NemesisRecord, ProxyRecord
from engine.model.levels import LEVELS
from engine.model.words import nodes_words, point_words, process_words, say_error
from engine.scenarios.streams import store_evidence

# What each level's promise rules out, by count.
EXCLUDED = {
    "at-most-once": {"duplicates"},
    "at-least-once": {"lost"},
    "exactly-once": {"duplicates", "lost"},
    "idempotent-only": set(),  # its promise covers retries within one producer session
    "idempotency-key": {"lost"},
}


@dataclass
class Explanation:
    evidence: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    headline: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def id_ranges(ids: Iterable[int]) -> str:
    """[5, 6, 7, 9] -> "5–7, 9"."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    start = prev = None
    for i in ordered:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(str(start) if start == prev else f"{start}–{prev}")
            start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}–{prev}")
    return ", ".join(parts)


def ids_phrase(ids: Iterable[int]) -> str:
    """ "id 5" or "ids 5–9, 12"."""
    ordered = sorted(set(ids))
    return f"id {ordered[0]}" if len(ordered) == 1 else f"ids {id_ranges(ordered)}"


def _offsets_text(first: dict[str, int], next_: dict[str, int]) -> str:
    return "; ".join(
        f"partition {p} offsets {first[p]}–{next_[p] - 1}" for p in sorted(first, key=int)
    )


def _point_sentence(event: dict[str, Any]) -> str | None:
    if not event.get("point"):
        return None
    at = event.get("at") or {}
    if at.get("ev") == Event.AUTO_COMMITTED:
        return (
            f"at its fault point ({point_words(event['point'])}): batch "
            f"{at.get('batch')}, ids "
            f"{id_ranges(i for i in at.get('ids', []) if i is not None)}, {at.get('state')}"
        )
    if at.get("ev") != Event.COMMIT_GAP:
        return f"at its fault point ({point_words(event['point'])})"
    return (
        f"at its fault point ({point_words(event['point'])}): batch "
        f"{at.get('batch')}, ids "
        f"{id_ranges(i for i in at.get('ids', []) if i is not None)} "
        f"({_offsets_text(at.get('first', {}), at.get('offsets', {}))}), {at.get('state')}"
    )


def explain(
    level: str,
    pipeline: str,
    history: Sequence[dict[str, Any]],
    counts: LevelCounts,
    verdicts: Sequence[Verdict],
) -> Explanation:
    out = Explanation()
    writer = "output_acked" if pipeline == "processor" else "ack"
    writers_of: dict[int, set[str]] = defaultdict(set)
    first_read: dict[str, dict[str, Any]] = {}
    resumed_at: dict[str, float] = {}
    written_after_wake: dict[str, list[int]] = defaultdict(list)
    resumed = False  # a replacement producer decided what to send again
    # Did another instance of a role ever start (a replacement)? Then "fenced" may mean it.
    replaced = any(e.get("ev") == Event.START and "#" in str(e.get("proc", "")) for e in history)
    for event in history:
        proc, ev = str(event.get("proc", "")), event.get("ev")
        if proc == "source" or proc == "sink":
            continue
        if ev == writer and event.get("id") is not None:
            writers_of[event["id"]].add(proc)
            if proc in resumed_at:
                written_after_wake[proc].append(event["id"])
        elif ev == Event.CONSUMED and proc not in first_read:
            first_read[proc] = event
        elif ev == Event.NEMESIS:
            _nemesis_evidence(event, out)
            if wakes(event):
                resumed_at[str(event.get("target"))] = event["t"]
        elif ev == Event.FENCED and not replaced and event.get("by") != "group coordinator":
            # No other instance ran: the coordinator's abort of a timed-out transaction bumped
            # the epoch (the txn_abort line before says so), whatever librdkafka's text says.
            out.evidence.append(
                f"{proc} was fenced: its epoch was no longer the newest "
                f":small[`{event.get('error')}`] ({event.get('reason')}). No other instance "
                "ran: the transaction coordinator bumps the epoch when it aborts a transaction "
                "that outlived transaction.timeout.ms."
            )
        elif ev == Event.FENCED:
            by = f" by the {event['by']}" if event.get("by") else ""
            out.evidence.append(
                f"{proc} was fenced{by}: "
                f"{fenced_words(event.get('error'), event.get('reason'))} "
                f"({event.get('reason')})."
            )
        elif ev == Event.RESTART:
            # A new producer in the same process: what it writes is its own, not a zombie's.
            resumed_at.pop(proc, None)
        elif ev == Event.COMMIT_REJECTED:
            out.evidence.append(
                f"{proc}'s commit of offsets {event.get('offsets')} was rejected: "
                f"{say_error(event.get('error'), event.get('reason')).markdown()} "
                f"({event.get('reason')})."
            )
        elif ev == Event.TXN_ABORT and event.get("by") and proc.split("#")[0] == "producer":
            # The producer's commit failed: its transaction had been aborted meanwhile.
            out.evidence.append(
                f"{proc}'s commit of the transaction of ids {id_ranges(event.get('ids', []))} "
                f"failed ({say_error(event.get('error'), event.get('reason')).markdown()}): the "
                "transaction had been aborted, and "
                "nothing of it was committed (resending it is the application's to decide)."
                + (
                    " librdkafka words it as fenced by a newer instance, but no other instance "
                    "ran: a transaction coordinator that aborts a transaction for outliving "
                    "transaction.timeout.ms also bumps the producer's epoch."
                    if "fenced" in str(event.get("reason", "")).lower() and not replaced
                    else ""
                )
            )
        elif ev == Event.TXN_ABORT and proc.startswith("processor"):
            out.evidence.append(
                f"{proc} aborted the transaction of ids {id_ranges(event.get('ids', []))} after "
                f"{say_error(event.get('error'), event.get('reason')).markdown()}, and read the "
                "batch again."
            )
        elif ev == Event.RESUME:
            resumed = True
            out.choices.append(_resume_choice(proc, event))
        elif ev == Event.BATCH_FAILED:
            batch = id_ranges(i for i in event.get("ids", []) if i is not None)
            then = event.get("then") or "the batch was not retried"
            out.evidence.append(
                f"{proc}: not every output of ids {batch} was acknowledged; {then}."
            )
    for proc, event in first_read.items():
        if "#" in proc:
            out.evidence.append(
                f"{proc} (the replacement) started reading partition {event.get('partition')} at "
                f"offset {event.get('offset')}, the group's committed offset."
            )
    transactional = level in LEVELS and LEVELS[level].transactional
    for proc, ids in written_after_wake.items():
        if ids and transactional:
            # Acknowledged after the wake, but written into the transaction it had open when
            # it froze: the replacement's init_transactions aborted that transaction.
            out.evidence.append(
                f"After waking, {proc} got the acknowledgements of ids {id_ranges(ids)}, "
                "written into the transaction it had open when it froze; the replacement's "
                "registration had bumped the epoch and aborted that transaction, so a "
                "read_committed reader never sees those copies."
            )
        elif ids:
            out.evidence.append(
                f"After waking, {proc} wrote ids {id_ranges(ids)} before it stopped: a consumer "
                "group fences a member's commits, not its producer's writes (only a "
                "transactional producer's epoch stops those)."
            )

    # The Java client's own reports.
    out.evidence.extend(client_evidence(history, level, reordered=counts.reordered))
    if (stall := longest_lso_stall(history)) is not None:
        out.evidence.append(stall)
    if (late := wrote_after_leader_loss(history)) is not None:
        out.evidence.append(late)
    out.evidence.extend(store_evidence(history, [v.id for v in verdicts]))
    duplicated = [v for v in verdicts if v.copies > 1]
    if counts.duplicates and duplicated:
        ids = [v.id for v in duplicated]
        both = sorted({p for v in duplicated for p in writers_of.get(v.id, set())})
        if pipeline == "processor" and len(both) > 1:
            writers = " and by ".join(both)
            sentence = f"Duplicates: outputs for {ids_phrase(ids)} were written by {writers}."
        else:
            sentence = f"Duplicates: {ids_phrase(ids)} stored more than once."
        if "duplicates" in EXCLUDED.get(level, set()):
            sentence += " This level's promise excludes duplicates"
            sentence += (
                ": two instances processed the same input, which it assumes cannot happen."
                if len(both) > 1
                else "."
            )
        elif level in ("at-least-once", "idempotency-key"):
            sentence += (
                " At least once allows this: the replacement read the input again from the last "
                "committed offset."
                if pipeline == "processor"
                else " At least once allows this: the message was sent again and stored again."
            )
        elif level == "idempotent-only" and resumed:
            sentence += (
                " The resend came from a new producer instance with a new producer id, so the "
                "broker could not tell it from a new message: idempotence lasts one session."
            )
        if pipeline == "producer":  # a retry overtaken; a processor redoes whole batches
            sentence += overtaken_sentence(duplicated, verdicts)
        out.why.append(sentence)
    never_sent = [v.id for v in verdicts if v.verdict == "never sent"]
    if never_sent:
        stopped = [
            f"{process_words(e.get('proc', ''))} ("
            + (say_error(e.get("error"), e.get("reason")).markdown() if e.get("error") else e["ev"])
            + ")"
            for e in history
            if e.get("ev") in (Event.FENCED, Event.ERROR)
            and e.get("proc", "").startswith(("producer", "source"))
        ]
        out.why.append(
            f"Never sent: {ids_phrase(never_sent)}. No producer handed them to Kafka"
            + (f": {', '.join(stopped)} stopped first" if stopped else " before the run ended")
            + ". Kafka was never asked to keep them, so they are not counted as lost; an "
            "application would start a new producer and send them (the application's part)."
        )
    not_processed = [v.id for v in verdicts if v.verdict == "not processed yet"]
    if not_processed:
        out.why.append(
            f"Not processed yet: {ids_phrase(not_processed)}. Their inputs are in the input "
            "topic at or past the offsets the processor's group had committed when the run "
            "ended: the processor had not done that work (it was stopped, stuck or still "
            "behind). Kafka holds the inputs and a restarted processor would process them, "
            "so they are not counted as lost."
        )
    lost = [v.id for v in verdicts if v.verdict == "lost"]
    replication = ""
    if lost:
        acked = [v.id for v in verdicts if v.verdict == "lost" and v.ack == "acked"]
        sentence = f"Lost: {ids_phrase(lost)} not in the topic."
        auto_commit = any(
            e.get("ev") == Event.START and e.get("mode") == "auto-commit" for e in history
        )
        input_failed = [
            v.id for v in verdicts if v.verdict == "lost" and v.ack in ("failed", "unacked")
        ]
        if pipeline == "processor" and input_failed and set(lost) <= set(input_failed):
            sentence += (
                " The source's writes of these inputs failed (its verdict rows say so), so "
                "they never reached the input topic and the processor never saw them."
            )
        elif pipeline == "processor" and auto_commit:
            sentence += (
                " The consumer's auto-commit timer (enable.auto.commit=true) committed their "
                "input offsets before the processor had written their outputs, and the process "
                "died in between; the replacement started after them. The level's own rule, "
                "commit after processing, was not in force."
            )
        elif pipeline == "processor":
            sentence += (
                " Their offsets were committed before their outputs were written, and the "
                "process died in between; the replacement started after them."
                if level == "at-most-once"
                else " Their input offsets were committed without their outputs."
            )
        elif acked:
            sentence += f" Acknowledged before: {ids_phrase(acked)}."
            replication = replication_loss_sentence(history)
            sentence += replication
        if replication:
            sentence += (
                " An acks=all acknowledgement keeps its promise only while an in-sync replica "
                "that holds the message survives and leads; here none did."
            )
        elif "lost" in EXCLUDED.get(level, set()):
            sentence += (
                " This level's promise excludes this loss: the evidence lists what happened."
            )
        out.why.append(sentence)
    reordered = [v.id for v in verdicts if v.reordered]
    if reordered:
        late = [i for ids in written_after_wake.values() for i in ids]
        again = [v.id for v in verdicts if v.reordered and v.copies > 1]
        copy = "a later copy of " if again and len(again) == len(reordered) else ""
        sentence = (
            f"Reordered: {copy}{ids_phrase(reordered)} stored after later ids, so a reader "
            "that applies each record in turn (last write wins, a compacted topic, a state "
            "store) sees it come back."
        )
        if late and set(reordered) <= set(late):
            sentence += (
                " The frozen instance wrote them when it woke, after the replacement had moved on."
            )
        out.why.append(sentence)
    if counts.aborted_visible:
        shown = [v.id for v in verdicts if v.aborted_copies]
        out.why.append(
            f"Visible although aborted: {plural(counts.aborted_visible, 'record')} of aborted "
            f"transactions ({ids_phrase(shown)}). This level's reader uses read_uncommitted, "
            "which returns every record in offset order; a read_committed reader skips them "
            "(Kafka's aborted-transaction index)."
        )

    late_writes = [i for ids in written_after_wake.values() for i in ids]
    out.headline = headline(
        pipeline,
        counts,
        duplicated=[v.id for v in duplicated],
        lost=lost,
        lost_acked=[v.id for v in verdicts if v.verdict == "lost" and v.ack == "acked"],
        lost_unacked=[
            v.id for v in verdicts if v.verdict == "lost" and v.ack in ("failed", "unacked")
        ],
        reordered=reordered,
        writers=sorted({p for v in duplicated for p in writers_of.get(v.id, set())}),
        resumed=resumed,
        late=late_writes,
        replaced=replaced,
        aborted_under=[
            i
            for e in history
            if e.get("ev") == Event.TXN_ABORT
            and e.get("by")
            and e["proc"].split("#")[0] == "producer"
            for i in e.get("ids", [])
        ],
    )
    if pipeline == "processor":
        out.choices.append(
            "The processor subscribes in a consumer group with static membership "
            "(group.instance.id), and a replacement joins with the same id, so the group "
            "coordinator hands it the partitions at once. Without a static id the coordinator "
            "waits for the session timeout (6 s) before it reassigns them."
        )
    return out


def longest_lso_stall(history: Sequence[dict[str, Any]]) -> str | None:
    """The longest time the leader reported the LSO stuck behind the high watermark (an open
    transaction), from the run's `offsets` readings; None under half a second."""
    readings = [
        e
        for e in history
        if e.get("ev") == Event.NEMESIS and e.get("kind") == NemesisRecord.OFFSETS
    ]
    if not readings:
        return None
    best: tuple[float, dict[str, Any], float, int] | None = None
    start: dict[str, Any] | None = None
    top = 0
    # A last reading that ends whatever stall is still running when the readings stop.
    for reading in [*readings, {"t": readings[-1]["t"], "lso": None}]:
        if start is not None and reading.get("lso") != start["lso"]:
            waited = reading["t"] - start["t"]
            if best is None or waited > best[0]:
                best = (waited, start, reading["t"], top)
            start = None
        lso, hw = reading.get("lso"), reading.get("high_watermark")
        if start is None and lso is not None and hw is not None and lso < hw:
            start, top = reading, hw
        elif start is not None and hw is not None:
            top = max(top, hw)
    if best is None or best[0] < 0.5:
        return None
    waited, first, _, top = best
    return (
        f"The leader reported the last stable offset at {first['lso']} for {waited:.1f} s "
        f"while the high watermark stood at up to {top}: a transaction was open, and a "
        f"read_committed reader got nothing from offset {first['lso']} on meanwhile (read "
        "every 0.1 s with ListOffsets at both isolation levels)."
    )


def wrote_after_leader_loss(history: Sequence[dict[str, Any]]) -> str | None:
    """A producer whose first write came only after the leader was killed or stopped: its
    counts say nothing about writes the dead leader held, and the room must be told so."""
    lost_at = next(
        (e["t"] for e in history if e.get("ev") == Event.NEMESIS and takes_leader_away(e)),
        None,
    )
    if lost_at is None:
        return None
    sends = [e["t"] for e in history if e.get("proc") == "producer" and e.get("ev") == Event.SEND]
    if not sends or min(sends) < lost_at:
        return None
    began = min((e["t"] for e in history if e.get("proc") == "producer"), default=lost_at)
    init = next(
        (e["t"] for e in history if e.get("proc") == "producer" and e.get("ev") == Event.TXN_INIT),
        None,
    )
    why = ""
    if init is not None and init >= lost_at:
        why = (
            f" init_transactions, for which the transaction coordinator records the producer "
            f"in its own replicated log (__transaction_state, on the same brokers), returned "
            f"only {init - began:.1f} s after the producer started."
        )
    return (
        f"This level's producer sent its first message {min(sends) - lost_at:.1f} s after the "
        f"leader was lost.{why} None of its writes was on the node that died: this run shows "
        "it waiting out the failover, not what happens to writes a dead leader held."
    )


def replication_loss_sentence(history: Sequence[dict[str, Any]]) -> str:
    """Why acknowledged messages left the partition, when the run killed its replicas: from
    the nodes it killed, the ISR the cluster reported, and the brokers' own log lines."""
    nemesis = [e for e in history if e.get("ev") == Event.NEMESIS]
    killed = {
        role: e.get("node")
        for e in nemesis
        if (kind := KINDS.get(str(e.get("kind")))) and (role := kind.kills_node)
    }
    leader, follower = killed.get("leader"), killed.get("follower")
    if leader is None or follower is None:
        return ""
    alone = any(e.get("kind") == NemesisRecord.ISR and e.get("isr") == [leader] for e in nemesis)
    wiped = any(e.get("kind") == "wipe-partition" and e.get("node") == leader for e in nemesis)
    logged = [str(e.get("line", "")) for e in nemesis if e.get("kind") == NemesisRecord.BROKER_LOG]
    unclean = any("UNCLEAN" in line for line in logged)
    truncated = any("runcat" in line for line in logged)
    text = ""
    if alone:
        text += (
            f" After follower node {follower} was killed, the cluster reported the ISR as "
            f"[{leader}]: min.insync.replicas=1 let node {leader} acknowledge acks=all writes "
            "with its own copy only."
        )
    if wiped:
        text += (
            f" Node {leader}'s copy was deleted while it was down, and it came back empty"
            + (
                "; the controller's log shows the partition handed to it again (an election "
                "the controller logs as unclean: the last known leader, chosen when no ISR or "
                "ELR member is left)"
                if unclean
                else ""
            )
            + "."
        )
    elif unclean:
        text += (
            f" Node {follower} came back without them, and the controller elected it although "
            "it was not in sync (unclean leader election, which the topic allows; the "
            "controller's log line is above)."
        )
    if truncated:
        text += (
            " A returning replica truncated its log to the new leader's (its own log line is "
            "above): what the new leader lacked is deleted from that disk too."
        )
    return text


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def broker_answers(faults: Sequence[dict[str, Any]]) -> list[str]:
    """The errors the brokers answered Produce requests with, as the fault proxy saw them.

    One line per error and node; a client that retries every 100 ms gets dozens of the same.
    NOT_LEADER_OR_FOLLOWER means "not the current leader" from any node; from a node the
    nemesis did not take down, and that led the partition afterwards, it is the new leader
    answering before it had applied its own election, which is said so.
    """
    by_error: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    taken_down = set()
    for fault in faults:
        if fault.get("source") == "proxy" and fault.get("kind") == ProxyRecord.PRODUCE_ERROR:
            by_error[(fault.get("node"), fault.get("error"))].append(fault)
        elif takes_leader_away(fault):
            taken_down.add(fault.get("node"))
    out = []
    for (node, error), seen in by_error.items():
        meaning = PRODUCE_ERROR_MEANING.get(error)
        if error == "NOT_LEADER_OR_FOLLOWER" and taken_down and node not in taken_down:
            later = [
                f
                for f in faults
                if f.get("kind") == NemesisRecord.ISR and f.get("t", 0) >= seen[0].get("t", 0)
            ]
            took_over = any(f.get("leader") == node for f in later)
            meaning = (NOT_LEADER_YET if took_over else NOT_LEADER_ELSEWHERE).format(node=node)
        first = seen[0]
        if len(seen) == 1:
            which = f"the Produce request with correlation id {first.get('correlation_id')}"
        else:
            # Correlation ids count per connection: requests on several connections are not
            # in id order, so the range is given low to high, not first to last.
            ids = sorted(
                int(e["correlation_id"]) for e in seen if e.get("correlation_id") is not None
            )
            span = f" (correlation ids {ids[0]} to {ids[-1]})" if ids else ""
            which = f"{len(seen)} Produce requests{span}"
        who = (
            "fatal for a transactional producer in librdkafka, which does not retry it"
            if error in FENCING_ERRORS
            else "the client retries such an error on its own, if its settings allow"
        )
        out.append(
            f"Node {node} answered {which}: {say_error(error).markdown()}, after "
            f"{first.get('waited_ms'):g} ms for the first (seen by the fault proxy; {who})."
            + (f" {meaning}" if meaning else "")
        )
    return out


# Answers that mean "a newer producer with your id holds a higher epoch": librdkafka raises
# them as fatal (_FENCED) for a transactional producer instead of retrying (rdkafka_txnmgr.c,
# rdkafka_request.c). The Java client treats a timeout's epoch bump as abortable (KIP-588).
FENCING_ERRORS = EPOCH_ANSWERS


# NOT_LEADER_OR_FOLLOWER from the node about to lead (leader-moves): Kafka's text for the error
# is "the broker is not the current leader", which was true for that node at that moment.
NOT_LEADER_YET = (
    "Node {node} did not lead the partition yet when the request arrived, and led it soon "
    "after: the controller had chosen it and the client already sent its writes there, but "
    "node {node} had not yet applied that choice (each broker applies the controller's "
    "metadata records on its own). Nothing was appended; the client retried."
)
NOT_LEADER_ELSEWHERE = (
    "Node {node} was not the partition's leader when the request arrived (what the error "
    "means): nothing was appended, and the client retried."
)


def lost_coordinator_messages(faults: Sequence[dict[str, Any]]) -> list[str]:
    """What the fault proxy lost between a client and its group or transaction coordinator."""
    words = {
        "offset_commit_response_dropped": (
            "The network lost the group coordinator's answer to the OffsetCommit request with "
            "correlation id {cid}: the coordinator had handled the commit (it answered), and "
            "the client never heard; the replacement's starting offset shows what it stored."
        ),
        "offset_commit_request_dropped": (
            "The network lost the OffsetCommit request with correlation id {cid} before the "
            "group coordinator saw it: nothing of it was stored."
        ),
        "end_txn_response_dropped": (
            "The network lost the transaction coordinator's answer to the EndTxn request with "
            "correlation id {cid}: the coordinator had handled the commit (it answered), and "
            "the producer never heard."
        ),
        "end_txn_request_dropped": (
            "The network lost the EndTxn request with correlation id {cid} before the "
            "transaction coordinator saw it: the transaction stayed open."
        ),
    }
    out = []
    for fault in faults:
        text = words.get(str(fault.get("kind"))) if fault.get("source") == "proxy" else None
        if text is not None:
            held = (
                " The lab then kept the connection silent, as a network path that stays down "
                "would (one lost segment TCP retransmits within about a second), until the "
                "client would give up on it (socket.timeout.ms)."
                # A lost request always stalls its connection (engine/proxy/server.py).
                if fault.get("after") == "hold" or str(fault["kind"]).endswith("request_dropped")
                else ""
            )
            out.append(text.format(cid=fault.get("correlation_id")) + held)
    return out


# What a Produce error says about the write, from Kafka's protocol documentation and the
# broker's code paths (the error is answered before the append, or after it).
PRODUCE_ERROR_MEANING = {
    "NOT_ENOUGH_REPLICAS": "The leader checks min.insync.replicas before it appends: the "
    "write was not stored.",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "The write was appended and every replica then in "
    "the ISR had it, but the ISR had shrunk below min.insync.replicas: the write is stored, "
    "and a retry may store it twice.",
    "REQUEST_TIMED_OUT": "The leader gave up waiting for the in-sync replicas, the write "
    "already in its log: a retry may store it twice, after later writes.",
    "INVALID_PRODUCER_EPOCH": "The write carried an epoch older than the transaction "
    "coordinator's for this transactional.id: a newer producer with the same id was "
    "initialised, or the coordinator aborted a transaction that outlived "
    "transaction.timeout.ms and bumped the epoch. The broker refused it (nothing appended), "
    "and this producer is fenced.",
    "PRODUCER_FENCED": "The transactional.id's epoch has moved past this producer's (a newer "
    "producer with the same id, or the coordinator's abort of a timed-out transaction): the "
    "broker refused the write (nothing appended), and this producer is fenced.",
    "NOT_LEADER_OR_FOLLOWER": "The node no longer leads the partition, and the write may be "
    "stored all the same: Kafka gives this answer to a write it had appended once it stops "
    "leading. If the new leader had not copied it, it is cut from the old leader's log when "
    "that node follows; if it had, the retry stores it a second time (idempotence rules that "
    "out). The retry goes to the new leader.",
}


def overtaken_sentence(duplicated: Sequence[Verdict], verdicts: Sequence[Verdict]) -> str:
    """Later ids whose first copy a retried id's last copy landed after, from the offsets."""

    def position(text: str) -> tuple[int, int]:
        partition, offset = text.split(":")
        return int(partition), int(offset)

    first = {v.id: position(v.offsets[0]) for v in verdicts if v.offsets}
    parts = []
    for v in duplicated:
        if len(v.offsets) < 2:
            continue
        (p0, o0), (p1, o1) = position(v.offsets[0]), position(v.offsets[-1])
        if p0 != p1:
            continue
        passed = sorted(i for i, (p, o) in first.items() if i > v.id and p == p1 and o0 < o < o1)
        if passed:
            parts.append(
                f"id {v.id}'s last copy (partition {p1}, offset {o1}) landed after "
                f"{ids_phrase(passed)}, sent later"
            )
    text = "; ".join(parts)
    return f" {text[0].upper()}{text[1:]}." if parts else ""


def headline(
    pipeline: str,
    counts: LevelCounts,
    *,
    duplicated: list[int],
    lost: list[int],
    lost_acked: list[int],
    reordered: list[int],
    lost_unacked: list[int] | None = None,
    writers: list[str],
    resumed: bool,
    late: list[int],
    aborted_under: list[int] | None = None,
    replaced: bool = True,
) -> str:
    """The level's verdict in one sentence, from the worst count the run shows."""
    if counts.duplicates and duplicated:
        what = plural(counts.duplicates, "duplicate")
        if pipeline == "processor" and len(writers) > 1:
            return f"{what}: {ids_phrase(duplicated)} written by {' and '.join(writers)}"
        if pipeline == "processor":
            return f"{what}: {ids_phrase(duplicated)} processed again after the restart"
        if resumed:
            return f"{what}: the replacement producer sent {ids_phrase(duplicated)} again"
        return f"{what}: {ids_phrase(duplicated)} retried and appended again"
    if counts.lost and lost:
        what = plural(counts.lost, "message") + " lost"
        if pipeline == "processor" and lost_unacked and set(lost) <= set(lost_unacked):
            # The input itself never made it: the source's write failed (the verdict rows
            # say its ack failed), so the processor had nothing to commit or write.
            return f"{what}: the source's writes of {ids_phrase(lost)} failed"
        if pipeline == "processor":
            return f"{what}: {ids_phrase(lost)} committed but never written"
        if lost_acked:
            return f"{what}: {ids_phrase(lost)} not in the topic, although acknowledged"
        return f"{what}: {ids_phrase(lost)} not in the topic"
    if counts.reordered and reordered:
        what = plural(counts.reordered, "message") + " out of order"
        if late and set(reordered) <= set(late):
            return f"{what}: {ids_phrase(reordered)} written late by the woken zombie"
        return f"{what}: {ids_phrase(reordered)} stored after later ids"
    if counts.aborted_visible:
        return f"{plural(counts.aborted_visible, 'aborted record')} visible to this reader"
    sentence = f"{plural(counts.delivered, 'message')}, each stored once"
    if counts.never_sent:  # the producer stopped first: not Kafka's to lose
        sentence += f"; {counts.never_sent} never sent"
    if counts.not_processed:  # the processor stopped first: Kafka holds the inputs
        sentence += f"; {counts.not_processed} not processed yet"
    if aborted_under:  # the producer's commit failed: its transaction was aborted under it
        sentence += f"; {ids_phrase(aborted_under)} aborted with their transaction"
    else:
        sentence += refusals_phrase(counts, replaced)
    return sentence


def refusals_phrase(counts: LevelCounts, replaced: bool) -> str:
    """What the out-of-date instance was refused, each kind in its own words (a refused
    commit is never called a fenced write)."""
    epoch = counts.writes_refused + counts.txn_calls_refused
    if epoch and not replaced:  # nobody replaced it: the coordinator's timeout abort
        return "; fenced after its transaction outlived its timeout"
    parts = []
    if counts.writes_refused:
        parts.append(f"{plural(counts.writes_refused, 'zombie write')} fenced")
    if counts.txn_calls_refused:
        calls = plural(counts.txn_calls_refused, "zombie transaction call")
        parts.append(f"{calls} refused")
    if counts.commits_refused:  # a refused commit, or the member fenced before its commit
        times = "" if counts.commits_refused == 1 else f" {counts.commits_refused} times"
        parts.append(f"the consumer group refused the zombie{times}")
    return "".join(f"; {p}" for p in parts)


POLICIES = {
    "never-resend": "sent only the ids its outbox had never marked as sent: at most once "
    "never sends a message twice, so a message sent but unacknowledged is not sent again",
    "resend-unacked": "sent again every id its outbox had not marked acknowledged, as an "
    "outbox relay would",
    "read-committed": "read the topic at read_committed (after init_transactions had aborted "
    "the dead instance's open transaction, which is Kafka's part) and sent the ids not there",
}


def _resume_choice(proc: str, event: dict[str, Any]) -> str:
    what = POLICIES.get(str(event.get("policy")), str(event.get("policy")))
    ids = event.get("ids") or []
    sent = ids_phrase(ids) if ids else "nothing"
    restarted = (
        f"{proc} was fenced with no newer instance of its transactional.id, so the "
        "application started a new producer with that id (a fenced librdkafka producer can do "
        "nothing more), whose init_transactions took the next epoch"
    )
    if event.get("policy") == "group-committed":  # a processor: its input, read again
        offsets = ", ".join(
            f"partition {p} at {o}" for p, o in (event.get("offsets") or {}).items()
        )
        return (
            f"{restarted}; it read its input again from the group's committed offsets ({offsets})."
        )
    if event.get("restart"):  # the same process, after its producer was fenced
        return (
            f"{proc} was fenced with no newer instance of its transactional.id, so the "
            "application started a new producer with that id (a fenced librdkafka producer "
            f"can do nothing more), whose init_transactions took the next epoch; it {what}: "
            f"{sent}."
        )
    return f"The replacement producer ({proc}) {what}: {sent}."


def fenced_words(code: str | None, reason: str | None) -> str:
    """Why a client was fenced, in the room's words, its code in small type."""
    said = say_error(code, reason)
    words = said.words.removeprefix("fenced: ")
    return f"{words} :small[`{said.raw}`]" if said.raw else words


def _nemesis_evidence(event: dict[str, Any], out: Explanation) -> None:
    kind, target = event.get("kind"), event.get("target")
    if (fault := KINDS.get(str(kind))) is not None:
        if (sentence := fault.evidence(event, _point_sentence(event))) is not None:
            out.evidence.append(sentence)
    elif kind == NemesisRecord.ISR and (event.get("leader") or 0) < 0:
        out.evidence.append(
            f"The cluster reported the partition without a leader (offline; in-sync replicas: "
            f"{nodes_words(event.get('isr'))}): nothing could be written to it or read from it."
        )
    elif kind == NemesisRecord.ISR:
        hw = event.get("high_watermark")
        mark = "its high watermark not read in time" if hw is None else f"high watermark {hw}"
        out.evidence.append(
            f"The cluster reported the partition's in-sync replicas as "
            f"{nodes_words(event.get('isr'))}, "
            f"led by node {event.get('leader')}, {mark}."
        )
    elif kind == NemesisRecord.ELR:
        leader = event.get("leader")
        who = f"led by node {leader}" if (leader or 0) >= 0 else "without a leader"
        final = " as the run ended" if event.get("final") else ""
        out.evidence.append(
            f"Kafka's topic tool read the partition{final}: {who}; in-sync replicas: "
            f"{nodes_words(event.get('isr'))}; eligible leader replicas: "
            f"{nodes_words(event.get('elr'))}; last known leader: "
            f"{nodes_words(event.get('last_known_elr'))}."
        )
    elif kind == NemesisRecord.BROKER_LOG:
        out.evidence.append(f"Node {event.get('node')} logged: {event.get('line')}")
    elif kind == NemesisRecord.FAULT_NOT_REACHED:
        out.evidence.append(
            f"The {event.get('fault')} of {target} ({event.get('point')}) never fired: "
            f"{event.get('reason')}."
        )
