"""The explanations of a level's numbers come from the run's history, sentence by sentence."""

from __future__ import annotations

from engine.judging.checker import check
from engine.judging.explain import explain, id_ranges, ids_phrase
from engine.model.records import StoredRecord
from engine.model.words import say_error


def test_id_ranges_and_phrases():
    assert id_ranges([9, 5, 6, 7, 12]) == "5–7, 9, 12"
    assert ids_phrase([4]) == "id 4"
    assert ids_phrase([4, 5]) == "ids 4–5"


def zombie_history() -> list[dict]:
    gap = {
        "ev": "commit_gap",
        "batch": 2,
        "ids": [2, 3],
        "first": {"0": 2},
        "offsets": {"0": 4},
        "state": "outputs acknowledged, offsets not committed yet",
    }
    h = [
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
        {"t": 1.1, "proc": "processor", "ev": "output_acked", "id": 1},
        {"t": 1.2, "proc": "processor", "ev": "output_acked", "id": 2},
        {"t": 1.3, "proc": "processor", "ev": "output_acked", "id": 3},
        {
            "t": 1.4,
            "proc": "nemesis",
            "ev": "nemesis",
            "kind": "pause",
            "target": "processor",
            "point": "after commit_gap #2",
            "at": gap,
        },
        {"t": 1.5, "proc": "processor#2", "ev": "consumed", "id": 2, "partition": 0, "offset": 2},
        {"t": 1.6, "proc": "processor#2", "ev": "output_acked", "id": 2},
        {"t": 1.7, "proc": "processor#2", "ev": "output_acked", "id": 3},
        {"t": 5.0, "proc": "nemesis", "ev": "nemesis", "kind": "resume", "target": "processor"},
        {
            "t": 5.1,
            "proc": "processor",
            "ev": "fenced",
            "error": "FENCED_INSTANCE_ID",
            "reason": "Commit failed",
            "by": "group coordinator",
        },
    ]
    return h


def test_duplicates_at_least_once_are_traced_to_both_instances_and_the_fencing():
    history = zombie_history()
    stored = [StoredRecord(0, o, i) for o, i in enumerate([0, 1, 2, 3, 2, 3])]
    verdicts, counts = check(ledger=range(4), history=history, stored=stored)
    why = explain("at-least-once", "processor", history, counts, verdicts)
    assert counts.duplicates == 2
    assert any("batch 2, ids 2–3 (partition 0 offsets 2–3)" in e for e in why.evidence)
    assert any(
        "fenced by the group coordinator: a newer member" in e and "FENCED_INSTANCE_ID" in e
        for e in why.evidence
    )
    assert any("started reading partition 0 at offset 2" in e for e in why.evidence)
    assert why.why == [
        "Duplicates: outputs for ids 2–3 were written by processor and by processor#2. "
        "At least once allows this: the replacement read the input again from the last "
        "committed offset.",
        # Every copy counts for the order: id 2's second copy follows id 3.
        "Reordered: a later copy of id 2 stored after later ids, so a reader that applies "
        "each record in turn (last write wins, a compacted topic, a state store) sees it "
        "come back.",
    ]
    assert any("static membership" in c for c in why.choices)


def test_duplicates_a_level_excludes_are_flagged_as_breaking_its_promise():
    history = zombie_history()
    stored = [StoredRecord(0, o, i) for o, i in enumerate([0, 1, 2, 3, 2, 3])]
    verdicts, counts = check(ledger=range(4), history=history, stored=stored)
    why = explain("at-most-once", "processor", history, counts, verdicts)
    assert "two instances processed the same input" in why.why[0]


# The source producer wrote every input: an input no producer sent is "never sent", not lost.
SOURCE_SENDS = [
    {"t": 0.1, "proc": "source", "ev": ev, "id": i} for i in range(3) for ev in ("send", "ack")
]


def test_loss_at_most_once_names_the_ids_and_the_commit_before_the_outputs():
    history = [*SOURCE_SENDS, {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0}]
    verdicts, counts = check(ledger=range(3), history=history, stored=[StoredRecord(0, 0, 0)])
    why = explain("at-most-once", "processor", history, counts, verdicts)
    assert why.why[0].startswith("Lost: ids 1–2 not in the topic. Their offsets were committed")


def test_a_loss_under_auto_commit_is_traced_to_the_timer_and_its_fault_point():
    batch = {"ev": "auto_committed", "batch": 2, "ids": [1, 2], "offsets": {"0": 3}}
    batch["state"] = "offsets committed by the auto-commit timer, no output written yet"
    history = [
        *SOURCE_SENDS,
        {"t": 0.5, "proc": "processor", "ev": "start", "mode": "auto-commit"},
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
        {
            "t": 1.4,
            "proc": "nemesis",
            "ev": "nemesis",
            "kind": "crash",
            "target": "processor",
            "point": "after auto_committed #2",
            "at": batch,
        },
    ]
    verdicts, counts = check(ledger=range(3), history=history, stored=[StoredRecord(0, 0, 0)])
    why = explain("at-least-once", "processor", history, counts, verdicts)
    assert (
        "at its fault point (after the auto-commit timer had committed its 2nd batch): "
        "batch 2, ids 1–2, offsets committed by "
        "the auto-commit timer, no output written yet"
    ) in why.evidence[0]
    assert why.why[0].startswith(
        "Lost: ids 1–2 not in the topic. The consumer's auto-commit timer "
        "(enable.auto.commit=true) committed their input offsets before the processor"
    )


def test_ids_no_producer_sent_are_never_sent_not_lost():
    """A transactional producer fenced before it sent the rest: Kafka lost nothing."""
    history = [
        {"t": 0.1, "proc": "producer", "ev": "send", "id": 0},
        {"t": 0.2, "proc": "producer", "ev": "ack", "id": 0},
        {"t": 0.3, "proc": "producer", "ev": "fenced", "error": "_FENCED"},
    ]
    verdicts, counts = check(ledger=range(3), history=history, stored=[StoredRecord(0, 0, 0)])
    assert (counts.lost, counts.never_sent) == (0, 2)
    why = explain("exactly-once", "producer", history, counts, verdicts)
    assert why.why[0].startswith(
        "Never sent: ids 1–2. No producer handed them to Kafka: producer (fenced: its epoch is "
    )
    assert not any("promise excludes" in line for line in why.why)


def test_a_replacement_producers_policy_is_an_application_choice():
    history = [
        {
            "t": 1.0,
            "proc": "producer#2",
            "ev": "resume",
            "policy": "resend-unacked",
            "ids": [5, 6, 7],
        },
    ]
    verdicts, counts = check(ledger=range(8), history=history, stored=[])
    why = explain("at-least-once", "producer", history, counts, verdicts)
    assert why.choices == [
        "The replacement producer (producer#2) sent again every id its outbox had not marked "
        "acknowledged, as an outbox relay would: ids 5–7."
    ]


def test_the_headline_names_the_worst_count_and_its_cause_from_the_history():
    history = zombie_history()
    stored = [StoredRecord(0, o, i) for o, i in enumerate([0, 1, 2, 3, 2, 3])]
    verdicts, counts = check(ledger=range(4), history=history, stored=stored)
    line = explain("at-least-once", "processor", history, counts, verdicts).headline
    assert line == "2 duplicates: ids 2–3 written by processor and processor#2"


def test_the_headline_of_a_retried_produce_and_of_a_clean_level():
    history = [
        {"t": 1.0, "proc": "producer", "ev": "send", "id": 0},
        {"t": 1.1, "proc": "producer", "ev": "send", "id": 1},
        {"t": 1.2, "proc": "producer", "ev": "ack", "id": 0},
        {"t": 1.3, "proc": "producer", "ev": "ack", "id": 1},
    ]
    twice = [StoredRecord(0, o, i) for o, i in enumerate([0, 1, 1])]
    verdicts, counts = check(ledger=range(2), history=history, stored=twice)
    line = explain("at-least-once", "producer", history, counts, verdicts).headline
    assert line == "1 duplicate: id 1 retried and appended again"
    once = [StoredRecord(0, o, i) for o, i in enumerate([0, 1])]
    verdicts, counts = check(ledger=range(2), history=history, stored=once)
    line = explain("exactly-once", "producer", history, counts, verdicts).headline
    assert line == "2 messages, each stored once"


def test_the_headline_of_an_acknowledged_loss():
    history = [
        {"t": 1.0, "proc": "producer", "ev": "send", "id": 0},
        {"t": 1.1, "proc": "producer", "ev": "send", "id": 1},
        {"t": 1.2, "proc": "producer", "ev": "ack", "id": 0},
        {"t": 1.3, "proc": "producer", "ev": "ack", "id": 1},
    ]
    verdicts, counts = check(ledger=range(2), history=history, stored=[StoredRecord(0, 0, 0)])
    line = explain("at-least-once", "producer", history, counts, verdicts).headline
    assert line == "1 message lost: id 1 not in the topic, although acknowledged"


def test_a_transaction_aborted_under_a_stalled_producer_is_said_as_such():
    """transaction-timeout: the commit fails after the coordinator aborted on timeout."""
    history = [
        {"t": 1.0, "proc": "producer", "ev": "txn_commit", "ids": [0, 1]},
        {
            "t": 9.0,
            "proc": "producer",
            "ev": "txn_abort",
            "txn": 1,
            "ids": [2, 3],
            "error": "_FENCED",
            "reason": "Failed to end transaction: Local: This instance has been fenced",
            "by": "the commit failed: the transaction was aborted",
        },
        {"t": 9.1, "proc": "producer", "ev": "fenced", "error": "_FENCED", "reason": "fenced"},
    ]
    stored = [StoredRecord(0, 0, 0), StoredRecord(0, 1, 1)]
    verdicts, counts = check(ledger=range(4), history=history, stored=stored)
    assert [v.verdict for v in verdicts][2:] == ["aborted, as intended"] * 2
    why = explain("exactly-once", "producer", history, counts, verdicts)
    assert why.headline == "2 messages, each stored once; ids 2–3 aborted with their transaction"
    assert why.evidence[0].startswith(
        "producer's commit of the transaction of ids 2–3 failed (fenced: its epoch is out of "
        "date (a newer instance, or a timed-out abort) :small[`_FENCED`]): the transaction had "
        "been aborted, and "
        "nothing of it was committed"
    )
    assert "no other instance ran" in why.evidence[0]


def restarted_history(*, restart: bool) -> list[dict]:
    """A transactional producer frozen, woken, fenced by its timeout; then (if `restart`)
    the application's new producer in the same process sends ids 2-3 again."""
    history = [
        {"t": 1.0, "proc": "producer", "ev": "txn_commit", "ids": [0, 1]},
        {"t": 2.0, "proc": "nemesis", "ev": "nemesis", "kind": "pause", "target": "producer"},
        {"t": 8.0, "proc": "nemesis", "ev": "nemesis", "kind": "resume", "target": "producer"},
        {"t": 8.1, "proc": "producer", "ev": "fenced", "error": "_FENCED", "reason": "fenced"},
    ]
    if restart:
        history += [
            {"t": 8.2, "proc": "producer", "ev": "restart", "by": "the application"},
            {
                "t": 8.3,
                "proc": "producer",
                "ev": "resume",
                "policy": "read-committed",
                "ids": [2, 3],
                "restart": True,
            },
        ]
    history += [
        {"t": 8.4, "proc": "producer", "ev": "ack", "id": 2, "partition": 0, "offset": 4},
        {"t": 8.4, "proc": "producer", "ev": "ack", "id": 3, "partition": 0, "offset": 5},
    ]
    return history


def test_a_restarted_producer_is_the_applications_choice_not_a_zombie():
    """After a restart the process's writes are the new producer's, said as the application's
    choice; without the restart line the same writes after the wake are a zombie's."""
    stored = [StoredRecord(0, i, i) for i in range(4)]
    restarted = restarted_history(restart=True)
    verdicts, counts = check(ledger=range(4), history=restarted, stored=stored)
    why = explain("exactly-once", "producer", restarted, counts, verdicts)
    assert not any("After waking" in line for line in why.evidence)
    assert any("the application started a new producer" in line for line in why.choices)
    assert any("its epoch was no longer the newest" in line for line in why.evidence)

    zombie = restarted_history(restart=False)
    verdicts, counts = check(ledger=range(4), history=zombie, stored=stored)
    why = explain("exactly-once", "producer", zombie, counts, verdicts)
    assert any("After waking" in line for line in why.evidence)
    assert not why.choices


def test_a_retried_copy_that_lands_after_later_ids_is_said():
    """retry-reorder: id 1 timed out, was stored, retried, and its copy landed after 2 and 3."""
    stored = [StoredRecord(0, 0, 0), StoredRecord(0, 1, 1), StoredRecord(0, 2, 2)]
    stored += [StoredRecord(0, 3, 3), StoredRecord(0, 4, 1)]
    verdicts, counts = check(ledger=range(4), history=[], stored=stored)
    why = explain("at-least-once", "producer", [], counts, verdicts)
    assert why.why[0].endswith(
        "Id 1's last copy (partition 0, offset 4) landed after ids 2–3, sent later."
    )


def test_the_brokers_answers_are_said_once_per_error_and_node():
    from engine.judging.explain import broker_answers

    def answer(cid: int, error: str, waited: float) -> dict:
        return {
            "source": "proxy",
            "kind": "produce_error",
            "node": 1,
            "correlation_id": cid,
            "partition": 0,
            "error": error,
            "waited_ms": waited,
        }

    faults = [answer(6, "REQUEST_TIMED_OUT", 3008.7)]
    faults += [answer(cid, "NOT_ENOUGH_REPLICAS", 2.5) for cid in range(9, 65)]
    faults.append({"source": "proxy", "kind": "produce_response_dropped", "node": 1})
    assert broker_answers(faults) == [
        "Node 1 answered the Produce request with correlation id 6: the broker timed out (for "
        "a write: waiting for its replicas) :small[`REQUEST_TIMED_OUT`], "
        "after 3008.7 ms for the first (seen by the fault proxy; the client retries such an "
        "error on its own, if its settings allow). The leader gave up waiting for the in-sync "
        "replicas, the write already in its log: a retry may store it twice, after later "
        "writes.",
        "Node 1 answered 56 Produce requests (correlation ids 9 to 64): "
        f"{say_error('NOT_ENOUGH_REPLICAS').markdown()}, after 2.5 ms for the first (seen by "
        "the fault proxy; the client "
        "retries such an error on its own, if its settings allow). The leader checks "
        "min.insync.replicas before it appends: the write was not stored.",
    ]


def test_not_leader_from_the_node_taking_over_is_said_to_be_that():
    """leader-moves, as seen in CI: node 2 was stopped, node 3 answered NOT_LEADER_OR_FOLLOWER
    once (before it had applied its election), then led the partition."""
    from engine.judging.explain import (
        NOT_LEADER_ELSEWHERE,
        NOT_LEADER_YET,
        PRODUCE_ERROR_MEANING,
        broker_answers,
    )

    def answer(t: float, node: int, cid: int) -> dict:
        return {
            "t": t,
            "source": "proxy",
            "kind": "produce_error",
            "node": node,
            "correlation_id": cid,
            "error": "NOT_LEADER_OR_FOLLOWER",
            "waited_ms": 1.0,
        }

    faults = [
        {"t": 0.1, "kind": "isr", "leader": 2, "isr": [2, 3]},
        {"t": 3.6, "kind": "stop-leader", "node": 2},
        answer(3.7, 2, 221),
        answer(3.9, 3, 2),
        {"t": 5.5, "kind": "isr", "leader": 3, "isr": [3]},
    ]
    old, new = broker_answers(faults)
    assert (
        old.startswith("Node 2 answered") and PRODUCE_ERROR_MEANING["NOT_LEADER_OR_FOLLOWER"] in old
    )
    assert new.startswith("Node 3 answered") and NOT_LEADER_YET.format(node=3) in new
    # Without the later ISR showing node 3 as leader, nothing is claimed about it.
    generic = broker_answers(faults[:4])[1]
    assert NOT_LEADER_ELSEWHERE.format(node=3) in generic


def test_a_producer_that_wrote_only_after_the_leader_died_is_said_to_have_done_so():
    """broker-failover, exactly-once: init_transactions returned after the failover."""
    from engine.judging.explain import wrote_after_leader_loss

    def event(t: float, proc: str, ev: str, **more) -> dict:
        return {"t": t, "proc": proc, "ev": ev, **more}

    history = [
        event(0.0, "producer", "start"),
        event(0.1, "nemesis", "nemesis", kind="pause-followers"),
        event(1.7, "nemesis", "nemesis", kind="kill-leader", node=1),
        event(8.2, "producer", "txn_init"),
        event(8.3, "producer", "send", id=0),
    ]
    sentence = wrote_after_leader_loss(history)
    assert sentence is not None
    assert "first message 6.6 s after the leader was lost" in sentence
    assert "returned only 8.2 s after the producer started" in sentence
    # A producer that wrote before the kill faced it: nothing to say.
    early = [*history[:3], event(0.2, "producer", "send", id=0)]
    assert wrote_after_leader_loss(sorted(early, key=lambda e: e["t"])) is None


def test_a_processor_loss_whose_input_write_failed_says_so_not_committed_but_never_written():
    """Free play's at-most-once card once said "committed but never written" for an input
    whose source write had failed: the card and the verdict row must agree."""
    history = [
        {"t": 0.1, "proc": "source", "ev": "send", "id": 0},
        {"t": 0.2, "proc": "source", "ev": "ack", "id": 0},
        {"t": 0.1, "proc": "source", "ev": "send", "id": 1},
        {"t": 0.3, "proc": "source", "ev": "fail", "id": 1},
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
    ]
    verdicts, counts = check(ledger=range(2), history=history, stored=[StoredRecord(0, 0, 0)])
    assert [v.ack for v in verdicts] == ["acked", "failed"]
    why = explain("at-most-once", "processor", history, counts, verdicts)
    assert why.headline == "1 message lost: the source's writes of id 1 failed"
    assert "The source's writes of these inputs failed" in why.why[0]
    assert "committed" not in why.headline


def test_a_transactional_zombie_acknowledged_after_waking_wrote_into_its_aborted_transaction():
    """Frozen after an output and before its commit gap: the acknowledgement of a write made
    before the freeze arrives after the wake. It is no write the epoch failed to stop."""
    history = [
        *SOURCE_SENDS,
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
        {"t": 1.1, "proc": "nemesis", "ev": "nemesis", "kind": "pause", "target": "processor"},
        {"t": 2.0, "proc": "nemesis", "ev": "nemesis", "kind": "resume", "target": "processor"},
        {"t": 2.1, "proc": "processor", "ev": "output_acked", "id": 1},
        {"t": 2.2, "proc": "processor", "ev": "fenced", "error": "_FENCED", "reason": "epoch"},
    ]
    stored = [StoredRecord(0, 0, 0), StoredRecord(0, 1, 1), StoredRecord(0, 2, 2)]
    verdicts, counts = check(ledger=range(3), history=history, stored=stored)
    why = explain("exactly-once", "processor", history, counts, verdicts)
    # Its writes were acknowledged: the epoch refused a call of its transaction, no write.
    assert (counts.writes_refused, counts.txn_calls_refused) == (0, 1)
    assert any("got the acknowledgements of ids 1" in e for e in why.evidence)
    assert not any("wrote ids 1 before it stopped" in e for e in why.evidence)
    # Without a transaction the same history is a write nothing stopped.
    why = explain("at-least-once", "processor", history, counts, verdicts)
    assert any("wrote ids 1 before it stopped" in e for e in why.evidence)


def test_a_fence_without_a_replacement_is_said_by_its_cause():
    """No other instance ran: a transaction coordinator's fence is the timed-out abort's; a
    group coordinator's is its static member's old session: its commits refused, no write."""
    stored = [StoredRecord(0, i, i) for i in range(2)]

    def said(by: str) -> str:
        history = [
            {"t": 1.0, "proc": "processor", "ev": "fenced", "error": "_FENCED", "by": by},
        ]
        verdicts, counts = check(ledger=range(2), history=history, stored=stored)
        return explain("exactly-once", "processor", history, counts, verdicts).headline

    assert said("transaction coordinator").endswith(
        "fenced after its transaction outlived its timeout"
    )
    assert said("group coordinator").endswith("; the consumer group refused the zombie")
    assert "write" not in said("group coordinator")
