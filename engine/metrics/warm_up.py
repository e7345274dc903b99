"""The warm-up: a tiny made-up run judged a few times after Spark starts, so that a
session's first real judgement is not the slow one."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.metrics.inputs import HISTORY_SCHEMA, KAFKA_SCHEMA, LevelSpec, MetricsError, read_kafka
from engine.metrics.summary import judge, verdict_rows

WARM_UP_ROUNDS = 3


def warm_up_judgement(
    spark: SparkSession, rounds: int = WARM_UP_ROUNDS, bootstrap: str | None = None
) -> None:
    """Judge a tiny made-up run `rounds` times, so a session's first real judgement is fast.

    A session's first judgements parse, plan and JIT-compile everything once and take
    several times longer than later ones. The dashboard runs this in the background right
    after Spark starts; its results are thrown away. With `bootstrap`, the last round reads
    the made-up records from a small topic of that cluster (WARM_UP_TOPIC, written once), so
    that Spark's Kafka source is warm too.
    """
    levels = [
        LevelSpec("warm-up-a", "warm-up.a", "read_uncommitted"),
        LevelSpec("warm-up-b", "warm-up.b", "read_committed"),
    ]
    ids = range(20)
    value = '{{"id":{},"created_at":{}}}'
    rows = [(s.topic, 0, i, value.format(i, 1.0 + i).encode()) for s in levels for i in ids]
    records = spark.createDataFrame(rows, KAFKA_SCHEMA)
    events = [
        (s.level, 1.0 + i + dt, proc, ev, i, None, None, None)
        for s in levels
        for i in ids
        for dt, proc, ev in (
            (0.0, "producer", "send"),
            (0.1, "producer", "ack"),
            (0.2, "sink", "consumed"),
        )
    ]
    history = spark.createDataFrame(
        events, T.StructType([T.StructField("level", T.StringType()), *HISTORY_SCHEMA.fields])
    )
    views = [(records, records, levels)] * rounds
    if bootstrap:
        _write_warm_up_topic(bootstrap, [r[3] for r in rows[: len(ids)]])
        from_kafka = [LevelSpec(s.level, WARM_UP_TOPIC, s.isolation) for s in levels[:1]]
        views[-1] = (
            read_kafka(spark, bootstrap, [WARM_UP_TOPIC], "read_uncommitted"),
            read_kafka(spark, bootstrap, [WARM_UP_TOPIC], "read_committed"),
            from_kafka,
        )
    for uncommitted, committed, judged_levels in views:
        judged = judge(
            uncommitted=uncommitted,
            committed=committed,
            history=history.where(F.col("level").isin([s.level for s in judged_levels])),
            levels=judged_levels,
            messages=len(ids),
            collect_rows=True,  # as a class's runs are judged (spark_job.run_metrics)
        )
        try:
            verdict_rows(judged)
        finally:
            judged.release()


WARM_UP_TOPIC = "lab.metrics.warm-up"


def _write_warm_up_topic(bootstrap: str, values: Sequence[bytes]) -> None:
    """Create WARM_UP_TOPIC with `values` unless it already holds records."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from engine.kafka.admin import admin_client, create_topic

    if WARM_UP_TOPIC not in admin_client(bootstrap).list_topics(timeout=10).topics:
        create_topic(bootstrap, WARM_UP_TOPIC)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "lab-metrics-warm-up"})
    try:
        _, high = probe.get_watermark_offsets(TopicPartition(WARM_UP_TOPIC, 0), timeout=10)
    finally:
        probe.close()
    if high > 0:
        return
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        producer.produce(WARM_UP_TOPIC, v, partition=0)
    undelivered = producer.flush(30)
    if undelivered:
        raise MetricsError(f"{undelivered} warm-up records were not delivered to {bootstrap}.")
