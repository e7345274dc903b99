"""Facts about Kafka that the lab's pages and checker rely on, checked on a real broker.

Each test states one behaviour of Apache Kafka (the pinned version) in its name and checks it
with real clients; kcat gives the counts independently of the lab's own reader.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from engine.kafka import admin
from engine.kafka.reader import open_transactions
from tests.kafkatools import kcat_values, unique

pytestmark = pytest.mark.kafka


def test_an_abandoned_transaction_is_aborted_by_its_coordinator_and_the_judge_waits(cluster1):
    """transaction.timeout.ms, then the coordinator's abort scan (every 10 s by default).

    Until the abort, the last stable offset stays at the transaction's first record, below
    the high watermark: a read_committed reader sees nothing of it, and the lab's judge
    (open_transactions) does not judge the topic.
    """
    bootstrap = cluster1.direct_bootstrap
    topic = unique("abandoned")
    admin.create_topic(bootstrap, topic)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{topic}-txn",
            "transaction.timeout.ms": 5000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"open {i}".encode())
    assert producer.flush(30) == 0  # appended, in a transaction nobody ends
    began = time.monotonic()

    assert open_transactions(bootstrap, topic, 1, timeout=0.5) == {0: (0, 3)}
    assert kcat_values(bootstrap, topic, isolation="read_committed") == []

    # The coordinator aborts it between the timeout and the timeout plus its scan interval.
    assert open_transactions(bootstrap, topic, 1, timeout=30) == {}
    waited = time.monotonic() - began
    assert 5.0 <= waited <= 5.0 + 10.0 + 5.0, waited
    # The abort marker took offset 3; the three records stay in the log, never committed.
    assert kcat_values(bootstrap, topic, isolation="read_committed") == []
    assert kcat_values(bootstrap, topic) == ["open 0", "open 1", "open 2"]
