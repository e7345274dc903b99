"""The checker's definitions on small hand-made histories (pure logic, no Kafka)."""

from __future__ import annotations

from engine.judging.checker import check, percentile, reordered_ids
from engine.model.records import StoredRecord


def rec(partition: int, offset: int, message_id: int, created: float = 0.0) -> StoredRecord:
    return StoredRecord(partition, offset, message_id, created)


def test_duplicates_losses_and_acks():
    history = [
        {"t": 1, "proc": "producer", "ev": "send", "id": 0},
        {"t": 2, "proc": "producer", "ev": "ack", "id": 0},
        {"t": 1, "proc": "producer", "ev": "send", "id": 1},
        {"t": 3, "proc": "producer#2", "ev": "send", "id": 1},
        {"t": 4, "proc": "producer#2", "ev": "ack", "id": 1},
        {"t": 1, "proc": "producer", "ev": "send", "id": 2},
        {"t": 2, "proc": "producer", "ev": "fail", "id": 2},
        {"t": 5, "proc": "sink", "ev": "consumed", "id": 0},
    ]
    stored = [rec(0, 0, 0, 1.0), rec(0, 1, 1), rec(0, 2, 1)]
    verdicts, counts = check(ledger=[0, 1, 2, 3], history=history, stored=stored)
    by_id = {v.id: v for v in verdicts}
    assert by_id[0].verdict == "delivered once" and by_id[0].latency_ms == 4000.0
    assert by_id[1].verdict == "duplicated" and by_id[1].copies == 2
    assert by_id[2].verdict == "lost" and by_id[2].ack == "failed"
    # Id 3 was never sent: not lost (Kafka was never asked to keep it); id 2 was sent and
    # failed, and is lost.
    assert by_id[3].ack == "unsent" and by_id[3].verdict == "never sent"
    assert (counts.sent, counts.acked, counts.delivered) == (3, 2, 2)
    assert (counts.duplicates, counts.lost, counts.never_sent) == (1, 1, 1)
    # Ids 1 stored but never read by the sink: counted, and said (no latency for them).
    assert counts.unseen_by_sink == 1


def test_what_the_counts_cannot_say_is_said_in_the_evidence():
    from engine.judging.judge import judging_caveats

    history = [{"t": 5, "proc": "sink", "ev": "consumed", "id": 0}]
    verdicts, _ = check(
        ledger=[0, 1, 2, 3], history=history, stored=[rec(0, i, i) for i in range(3)]
    )
    lines = judging_caveats({1: (7, 9)}, verdicts, 75)
    assert lines[0].startswith("Partition 1 still had an open transaction 75 s after")
    assert "last stable offset 7, high watermark 9" in lines[0]
    assert lines[1] == (
        "The sink never read 2 stored message(s) (ids 1–2) before it was stopped: they count "
        "as delivered, without a latency."
    )
    assert judging_caveats({}, [v for v in verdicts if v.id == 0], 75) == []


def test_reorder_is_judged_per_partition_on_every_copy():
    stored = [rec(0, 0, 1), rec(0, 1, 2), rec(0, 2, 0), rec(0, 3, 1), rec(1, 0, 5), rec(1, 1, 3)]
    # 0 first stored after 2; 1's second copy after 2; 3 after 5 in partition 1.
    assert reordered_ids(stored) == {0, 1, 3}


def test_a_retry_stored_after_later_ids_is_reordered():
    # retry-reorder's shape: id 2 at offset 2, ids 3-6, then id 2's retry at offset 7.
    ids = [0, 1, 2, 3, 4, 5, 6, 2]
    _, counts = check(
        ledger=range(7), history=[], stored=[rec(0, off, i) for off, i in enumerate(ids)]
    )
    assert (counts.duplicates, counts.reordered) == (1, 1)
    # A retry stored right behind its first copy changes nothing a reader applies.
    ids = [0, 1, 2, 2, 3, 4, 5, 6]
    _, counts = check(
        ledger=range(7), history=[], stored=[rec(0, off, i) for off, i in enumerate(ids)]
    )
    assert (counts.duplicates, counts.reordered) == (1, 0)


def test_aborted_copies_and_aborts_by_design():
    history = [
        {"t": 1, "proc": "producer", "ev": "txn_commit", "ids": [0]},
        {"t": 2, "proc": "producer", "ev": "txn_abort", "ids": [1]},
    ]
    uncommitted = [rec(0, 0, 0), rec(0, 2, 1)]
    committed = [rec(0, 0, 0)]
    verdicts, counts = check(
        ledger=[0, 1], history=history, stored=uncommitted, committed_view=committed
    )
    assert [v.verdict for v in verdicts] == ["delivered once", "visible although aborted"]
    assert counts.aborted_visible == 1
    verdicts, counts = check(
        ledger=[0, 1], history=history, stored=committed, committed_view=committed
    )
    assert [v.verdict for v in verdicts] == ["delivered once", "aborted, as intended"]
    assert counts.lost == 0


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 100) == 100


def test_inputs_past_the_groups_committed_offset_are_not_processed_yet():
    """A stuck or stopped processor's unfinished work is not a loss: Kafka holds the input."""
    history = [
        {"t": 0.1, "proc": "source", "ev": e, "id": i, "partition": 0, "offset": i}
        for i in range(4)
        for e in ("send", "ack")
    ]
    history.append({"t": 9, "proc": "runner", "ev": "group_committed", "partition": 0, "offset": 2})
    # Outputs of ids 0 only: id 1's offset is committed without its output (lost); ids 2-3
    # are at or past the committed offset 2 (not processed yet).
    verdicts, counts = check(ledger=range(4), history=history, stored=[rec(0, 0, 0)])
    assert [v.verdict for v in verdicts] == [
        "delivered once",
        "lost",
        "not processed yet",
        "not processed yet",
    ]
    assert (counts.lost, counts.not_processed) == (1, 2)
