"""Spark's count of a share group's run (engine/metrics/queues.py) equals the queue checker's
(engine/judging/queues.py): on the histories of tests/unit/test_queue_checker.py, and on
Hypothesis's histories of workers that are handed records, acknowledge them, die or
write outputs more than once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.judging.queues import check_queue
from engine.metrics.queues import queue_counts
from engine.model.records import StoredRecord
from tests.unit import test_queue_checker as examples


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


def both(spark, *, sent_ids, history, outputs, delivery_limit=5):
    checked = check_queue(
        sent_ids=sent_ids, history=history, outputs=outputs, delivery_limit=delivery_limit
    )[1]
    counted = queue_counts(
        spark, sent_ids=sent_ids, history=history, outputs=outputs, delivery_limit=delivery_limit
    )
    return checked, counted


def test_the_checkers_examples_count_the_same(spark):
    sent = examples.SENT
    kill = [examples.delivered("worker-a", i, 1) for i in range(3)]
    kill += [
        e
        for i in sent
        for e in (examples.delivered("worker-b", i, 2), examples.acked("worker-b", i))
    ]
    poison = [
        e
        for c in range(1, 6)
        for e in (examples.delivered("w", 5, c), examples.acked("w", 5, "RELEASE"))
    ]
    cases = [
        (kill, examples.outputs([0, 1, 2, *sent])),
        (poison, []),
        ([examples.delivered("w", 0, 1), examples.acked("w", 0, "REJECT")], []),
        (
            [*kill, {"ev": "ack_refused", "proc": "worker-a", "partition": 0}],
            examples.outputs([*sent, *sent]),
        ),
    ]
    for history, outputs in cases:
        checked, counted = both(spark, sent_ids=sent, history=history, outputs=outputs)
        assert counted == checked
    # A check that cannot tell them apart checks nothing: the kill's counts differ from the
    # poison's.
    assert (
        both(spark, sent_ids=sent, history=kill, outputs=[])[1]
        != (both(spark, sent_ids=sent, history=poison, outputs=[])[1])
    )


@st.composite
def runs(draw) -> tuple[list[int], list[dict], list[StoredRecord], int]:
    """Records handed to workers (the count rising by one each time), each delivery
    acknowledged or not, and outputs written for some of them, in any order."""
    sent = list(range(draw(st.integers(1, 8))))
    limit = draw(st.integers(2, 5))
    history: list[dict] = []
    written: list[int] = []
    for message_id in sent:
        for count in range(1, draw(st.integers(0, limit)) + 1):
            worker = draw(st.sampled_from(["w1", "w2"]))
            history.append(examples.delivered(worker, message_id, count))
            if draw(st.booleans()):
                written.append(message_id)
            ack = draw(st.sampled_from([None, "ACCEPT", "RELEASE", "REJECT"]))
            if ack:
                history.append(examples.acked(worker, message_id, ack))
    if draw(st.booleans()):
        history.append({"ev": "ack_refused", "proc": "w1", "partition": 0})
    order = draw(st.permutations(written))
    outputs = [StoredRecord(0, offset, message_id) for offset, message_id in enumerate(order)]
    return sent, history, outputs, limit


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(run=runs())
def test_spark_counts_every_run_as_the_checker_does(spark, run):
    sent, history, outputs, limit = run
    checked, counted = both(
        spark, sent_ids=sent, history=history, outputs=outputs, delivery_limit=limit
    )
    assert counted == checked
