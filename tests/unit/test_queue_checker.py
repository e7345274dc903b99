"""The queue checker (engine/judging/queues.py) on histories shaped like the real broker's
runs in tests/integration/test_share_groups.py, each against its contrast."""

from __future__ import annotations

from engine.judging.queues import check_queue
from engine.model.records import StoredRecord

SENT = range(10)


def delivered(proc: str, message_id: int, count: int) -> dict:
    return {"ev": "delivered", "proc": proc, "id": message_id, "delivery_count": count}


def acked(proc: str, message_id: int, kind: str = "ACCEPT") -> dict:
    return {"ev": "acknowledged", "proc": proc, "id": message_id, "type": kind}


def outputs(ids: list[int]) -> list[StoredRecord]:
    return [StoredRecord(partition=0, offset=i, id=message_id) for i, message_id in enumerate(ids)]


def test_a_killed_workers_written_outputs_repeat_and_every_record_went_out_twice():
    # worker-a wrote 3 outputs, acknowledged nothing, and was killed; worker-b got all 10
    # at delivery count 2.
    history = [delivered("worker-a", i, 1) for i in range(3)]
    history += [e for i in SENT for e in (delivered("worker-b", i, 2), acked("worker-b", i))]
    verdicts, counts = check_queue(
        sent_ids=SENT, history=history, outputs=outputs([0, 1, 2, *SENT])
    )
    assert (counts.once, counts.duplicated, counts.duplicates, counts.lost) == (7, 3, 3, 0)
    # The broker's count, not the lines written: all 10 went out twice.
    assert (counts.redelivered, counts.deliveries, counts.archived) == (10, 20, 0)
    assert verdicts[0].members == ("worker-a", "worker-b") and verdicts[5].seen == 1
    # worker-b's copies of 0 and 1 are stored after worker-a's copy of 2: out of the input's
    # order (2's second copy follows 2, which is not).
    assert counts.out_of_order == 2


def test_acknowledging_first_loses_the_record_the_killed_worker_had_accepted():
    history = [e for i in range(4) for e in (delivered("worker-a", i, 1), acked("worker-a", i))]
    history += [
        e for i in range(4, 10) for e in (delivered("worker-b", i, 2), acked("worker-b", i))
    ]
    verdicts, counts = check_queue(
        sent_ids=SENT, history=history, outputs=outputs([0, 1, 2, *range(4, 10)])
    )
    assert (counts.once, counts.duplicated, counts.lost, counts.archived) == (9, 0, 1, 0)
    assert verdicts[3].verdict == "lost" and verdicts[3].acknowledgements == ("ACCEPT",)


def test_a_poison_record_released_at_every_delivery_is_archived_at_the_limit():
    history = []
    for i in SENT:
        if i == 5:
            continue
        history += [delivered("worker", i, 1), acked("worker", i)]
    for count in range(1, 6):
        history += [delivered("worker", 5, count), acked("worker", 5, "RELEASE")]
    verdicts, counts = check_queue(
        sent_ids=SENT, history=history, outputs=outputs([i for i in SENT if i != 5])
    )
    assert (counts.once, counts.archived, counts.lost) == (9, 1, 0)
    assert verdicts[5].verdict == "archived" and verdicts[5].deliveries == 5
    # The contrast: released only 4 times, it is not archived yet (the broker hands it out
    # again), so the checker calls it lost, not archived.
    short = [e for e in history if not (e.get("id") == 5 and e.get("delivery_count") == 5)]
    short = short[:-1]  # and its fifth RELEASE
    _, counts = check_queue(
        sent_ids=SENT, history=short, outputs=outputs([i for i in SENT if i != 5])
    )
    assert (counts.archived, counts.lost) == (0, 1)


def test_a_limit_of_three_archives_at_three():
    history = [
        e for count in (1, 2, 3) for e in (delivered("w", 0, count), acked("w", 0, "RELEASE"))
    ]
    _, at_three = check_queue(sent_ids=[0], history=history, outputs=[], delivery_limit=3)
    _, at_five = check_queue(sent_ids=[0], history=history, outputs=[], delivery_limit=5)
    assert (at_three.archived, at_five.archived) == (1, 0)


def test_a_reject_archives_at_once_and_an_accept_never():
    rejected = [delivered("w", 0, 1), acked("w", 0, "REJECT")]
    accepted = [delivered("w", 0, 5), acked("w", 0, "ACCEPT")]
    assert check_queue(sent_ids=[0], history=rejected, outputs=[])[1].archived == 1
    assert check_queue(sent_ids=[0], history=accepted, outputs=[])[1].archived == 0


def test_a_worker_that_died_holding_a_record_at_the_limit_lets_the_broker_archive_it():
    # Delivered the fifth time, never acknowledged: the lock runs out and the broker archives
    # it instead of a sixth delivery.
    history = [e for c in range(1, 5) for e in (delivered("w", 0, c), acked("w", 0, "RELEASE"))]
    history.append(delivered("w", 0, 5))
    verdicts, counts = check_queue(sent_ids=[0], history=history, outputs=[])
    assert counts.archived == 1 and verdicts[0].verdict == "archived"


def test_a_frozen_workers_late_outputs_double_every_record_and_refusals_are_counted():
    history = [delivered("worker-a", i, 1) for i in SENT]
    history += [e for i in SENT for e in (delivered("worker-b", i, 2), acked("worker-b", i))]
    history += [acked("worker-a", i) for i in SENT]
    history.append({"ev": "ack_refused", "proc": "worker-a", "partition": 0})
    _, counts = check_queue(sent_ids=SENT, history=history, outputs=outputs([*SENT, *SENT]))
    assert (counts.duplicated, counts.duplicates, counts.once, counts.lost) == (10, 10, 0, 0)
    assert counts.acks_refused == 1
