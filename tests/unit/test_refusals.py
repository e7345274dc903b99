"""What a zombie was refused, counted by kind (engine.judging.checker.count_refusals), whatever the
moment the fault struck it: before its commit, in the middle of its transaction after a
write, or at the end of its transaction. Histories built here, as the roles write them."""

from __future__ import annotations

from typing import Any

from engine.judging.checker import Refusals, check, count_refusals
from engine.judging.explain import explain
from engine.model.records import StoredRecord

CLIENT = "run-exactly-once-processor"
WOKEN = {"t": 5.0, "proc": "nemesis", "ev": "nemesis", "kind": "resume", "target": "processor"}
REPLACED = {"t": 2.0, "proc": "processor#2", "ev": "start", "mode": "transactional"}


def refused_produce(t: float, correlation_id: int, error: str, partition: int = 0) -> dict:
    """The fault proxy's record of a partition leader's answer to a Produce."""
    return {
        "t": t,
        "source": "proxy",
        "kind": "produce_error",
        "node": 1,
        "conn": 7,
        "client_id": CLIENT,
        "correlation_id": correlation_id,
        "partition": partition,
        "error": error,
    }


def counted(history: list[dict[str, Any]], proxy: list[dict[str, Any]] = ()) -> tuple:
    r = count_refusals(history, proxy)
    return r.writes_refused, r.commits_refused, r.txn_calls_refused


def test_struck_before_its_commit_the_group_refuses_the_commit_and_no_write():
    """at-least-once, frozen after its outputs were acknowledged and before its commit: the
    outputs all landed; the group refused the commit (FENCED_INSTANCE_ID)."""
    history = [
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
        REPLACED,
        WOKEN,
        {
            "t": 5.1,
            "proc": "processor",
            "ev": "fenced",
            "error": "FENCED_INSTANCE_ID",
            "reason": "Commit failed: Broker: Static consumer fenced by other consumer",
            "by": "group coordinator",
        },
    ]
    assert counted(history) == (0, 1, 0)


def test_struck_mid_transaction_after_a_write_the_broker_refuses_the_write():
    """Frozen with an output queued in its open transaction: on waking its Produce carries
    the old epoch and the partition leader refuses it. The proxy saw the answer (one
    request, two partitions), the client reported it as failed deliveries and its fence:
    one refused write, no transaction call."""
    history = [
        REPLACED,
        WOKEN,
        {"t": 5.2, "proc": "processor", "ev": "output_failed", "id": 7, "error": "_FENCED"},
        {"t": 5.2, "proc": "processor", "ev": "output_failed", "id": 8, "error": "_FENCED"},
        {
            "t": 5.3,
            "proc": "processor",
            "ev": "fenced",
            "error": "_FENCED",
            "reason": "Failed to add offsets to transaction: Local: This instance has been fenced",
            "by": "transaction coordinator",
        },
    ]
    proxy = [
        refused_produce(5.1, 41, "INVALID_PRODUCER_EPOCH", partition=0),
        refused_produce(5.1, 41, "INVALID_PRODUCER_EPOCH", partition=1),
    ]
    assert counted(history, proxy) == (1, 0, 0)
    # Without the proxy's record, the client's own report of the broker's answer says it.
    said = [
        {**e, "error": "INVALID_PRODUCER_EPOCH"} if e["ev"] == "output_failed" else e
        for e in history
    ]
    assert counted(said) == (1, 0, 0)
    # librdkafka's fence names the refused request: a write, even without any other line.
    produce = "ProduceRequest for out [0] with 1 message(s) failed: Broker: epoch (fenced)"
    named = [e | {"reason": produce} if e["ev"] == "fenced" else e for e in history]
    assert counted(named) == (1, 0, 0)
    # The proxy's record and the client's report are the same refusal, counted once.
    assert counted(said, proxy) == (1, 0, 0)
    # Two refused Produce requests are two refusals.
    assert counted(history, [*proxy, refused_produce(5.15, 42, "PRODUCER_FENCED")]) == (2, 0, 0)


def test_struck_at_the_end_of_its_transaction_the_coordinator_refuses_the_call():
    """Frozen after its offsets joined the transaction, before EndTxn: every write was taken
    into the (since aborted) transaction; the coordinator refused the commit for its epoch."""
    history = [
        {"t": 1.0, "proc": "processor", "ev": "output_acked", "id": 0},
        REPLACED,
        WOKEN,
        {
            "t": 5.1,
            "proc": "processor",
            "ev": "fenced",
            "error": "_FENCED",
            "reason": "Failed to end transaction: Local: This instance has been fenced",
            "by": "transaction coordinator",
        },
    ]
    assert counted(history) == (0, 0, 1)
    # A proxy record of a refused write before this instance's fence makes it the write's.
    assert counted(history, [refused_produce(5.05, 9, "INVALID_PRODUCER_EPOCH")]) == (1, 0, 0)


def test_a_producer_whose_commit_failed_is_refused_once_and_again_after_its_restart():
    """The producer role says a refused EndTxn twice (txn_abort, then fenced): one refusal.
    A new producer after `restart` is a new instance: its own fence counts again."""
    refused_commit = [
        {
            "t": 3.0,
            "proc": "producer",
            "ev": "txn_abort",
            "ids": [2, 3],
            "error": "_FENCED",
            "reason": "Failed to end transaction: Local: This instance has been fenced",
            "by": "the commit failed: the transaction was aborted",
        },
        {"t": 3.1, "proc": "producer", "ev": "fenced", "error": "_FENCED", "reason": "fenced"},
    ]
    assert counted(refused_commit) == (0, 0, 1)
    restarted = [
        *refused_commit,
        {"t": 3.2, "proc": "producer", "ev": "restart", "by": "the application"},
        {"t": 6.0, "proc": "producer", "ev": "fenced", "error": "_FENCED", "reason": "fenced"},
    ]
    assert counted(restarted) == (0, 0, 2)


def test_a_commit_that_timed_out_was_not_refused_and_a_fenced_member_counts_once():
    history = [
        {"t": 1.0, "proc": "processor", "ev": "commit_rejected", "error": "_TIMED_OUT"},
        {"t": 2.0, "proc": "processor", "ev": "commit_rejected", "error": "ILLEGAL_GENERATION"},
        {"t": 3.0, "proc": "processor", "ev": "fenced", "error": "CommitFailedException"}
        | {"by": "group coordinator"},
        {"t": 3.1, "proc": "processor", "ev": "fenced", "error": "FencedInstanceIdException"}
        | {"by": "group coordinator"},
    ]
    assert counted(history) == (0, 2, 0)
    assert count_refusals([]) == Refusals()


def headline_of(history: list[dict[str, Any]], proxy: list[dict[str, Any]] = ()) -> str:
    stored = [StoredRecord(0, i, i) for i in range(2)]
    ledger = range(2)
    verdicts, counts = check(ledger=ledger, history=history, stored=stored, proxy_faults=proxy)
    return explain("exactly-once", "processor", history, counts, verdicts).headline


def test_the_headline_says_a_fenced_write_only_when_a_write_was_refused():
    group = {"t": 5.1, "proc": "processor", "ev": "fenced", "error": "FENCED_INSTANCE_ID"}
    only_commit = headline_of([REPLACED, WOKEN, group | {"by": "group coordinator"}])
    assert only_commit.endswith("; the consumer group refused the zombie")
    assert "write" not in only_commit
    txn = {"t": 5.1, "proc": "processor", "ev": "fenced", "error": "_FENCED"}
    end_txn = headline_of([REPLACED, WOKEN, txn | {"by": "transaction coordinator"}])
    assert end_txn.endswith("; 1 zombie transaction call refused")
    assert "write" not in end_txn
    write = headline_of(
        [REPLACED, WOKEN, txn | {"by": "transaction coordinator"}],
        [refused_produce(5.05, 9, "INVALID_PRODUCER_EPOCH")],
    )
    assert write.endswith("; 1 zombie write fenced")


def test_a_processor_says_the_fence_of_each_of_its_clients():
    """A zombie woken before its transaction began: its producer's AddPartitionsToTxn and its
    consumer's heartbeat were both refused; the processor says both fences (the group's
    first, as classify picks it), and the transaction's counts as a refused call."""
    from confluent_kafka import KafkaError

    from engine.roles.processor import fenced_by, other_fences

    producer = KafkaError(
        KafkaError._FATAL,
        "Fatal error: Local: This instance has been fenced by a newer instance: "
        "Failed to add partitions to transaction",
        fatal=True,
    )
    consumer = KafkaError(
        KafkaError._FATAL,
        "Fatal error: Broker: Static consumer fenced by other consumer with same group.instance.id",
        fatal=True,
    )
    other = KafkaError(KafkaError._FATAL, "Fatal error: Local: broker down", fatal=True)
    assert other_fences([producer, consumer, other, producer], fenced_by(consumer)) == [producer]
    assert other_fences([consumer], fenced_by(consumer)) == []
    history = [
        REPLACED,
        WOKEN,
        {"t": 5.1, "proc": "processor", "ev": "fenced", "by": fenced_by(consumer)},
        {"t": 5.1, "proc": "processor", "ev": "fenced", "by": fenced_by(producer)},
    ]
    assert counted(history) == (0, 1, 1)
