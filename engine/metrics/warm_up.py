"""The warm-up: a made-up run of a class's size judged a few times after Spark starts, so
that a session's first real judgement is not the slow one."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.base.values import value_maker
from engine.metrics.inputs import (
    KAFKA_SCHEMA,
    LevelSpec,
    MetricsError,
    read_history,
    read_kafka,
)
from engine.metrics.summary import judge, verdict_rows

WARM_UP_ROUNDS = 3
# Ids per made-up level: a class's run has 3,000 (4 levels). The rows must be that many for
# a judgement's per-row code to be compiled by the warm-up's end: with 20 per level, a new
# session's first run's judgement took 2.05-2.35 s, against 1.66-1.84 s after a warm-up of
# this size and 1.5-1.8 s warm (benchmarks.streaming_bench, benchmarks/METRICS.md).
WARM_UP_IDS = 3_000
_LEVELS = [
    LevelSpec(f"warm-up-{name}", f"warm-up.{name}", isolation)
    for name, isolation in (
        ("a", "read_uncommitted"),
        ("b", "read_uncommitted"),
        ("c", "read_committed"),
        ("d", "read_committed"),
    )
]


def warm_up_judgement(
    spark: SparkSession,
    rounds: int = WARM_UP_ROUNDS,
    bootstrap: str | None = None,
    ids: int = WARM_UP_IDS,
) -> None:
    """Judge a made-up run of a class's size `rounds` times, so a session's first real
    judgement is not the slow one.

    A session's first judgements parse, plan and JIT-compile everything once and take
    several times longer than later ones. The dashboard runs this in the background right
    after Spark starts; its results are thrown away. The made-up run is read as a real one
    is: its records shaped as Spark's Kafka source gives them, its history from files laid
    out as in a run folder (read_history). With `bootstrap`, the last round reads its
    records through Spark's Kafka source instead, from a topic of that cluster written once
    (WARM_UP_TOPIC): as many records in as many partitions as a class's run's topics hold,
    so that the Kafka source's per-record code is compiled too.
    """
    records = _made_up_records(spark, ids)
    with tempfile.TemporaryDirectory(prefix="lab-warm-up-") as folder:
        history = read_history(spark, _write_made_up_history(Path(folder), ids))
        views = [(records, records, _LEVELS, ids)] * rounds
        if bootstrap:
            _write_warm_up_topic(bootstrap, [_value(i) for i in range(ids)])
            from_kafka = [LevelSpec(_LEVELS[0].level, WARM_UP_TOPIC, _LEVELS[0].isolation)]
            views[-1] = (
                read_kafka(spark, bootstrap, [WARM_UP_TOPIC], "read_uncommitted"),
                read_kafka(spark, bootstrap, [WARM_UP_TOPIC], "read_committed"),
                from_kafka,
                ids,
            )
        for uncommitted, committed, levels, messages in views:
            judged = judge(
                uncommitted=uncommitted,
                committed=committed,
                # The Kafka round's one level: the history of its ids only, as a run's.
                history=history.where(
                    history["level"].isin([s.level for s in levels]) & (history["id"] < messages)
                ),
                levels=levels,
                messages=messages,
                collect_rows=True,  # as a class's runs are judged (spark_job.run_metrics)
            )
            try:
                verdict_rows(judged)
            finally:
                judged.release()


# The warm-up's values have the shape of the lab's own (engine.metrics.sql._value_sql reads
# that shape its own way): a run's first judgement then finds that way's code compiled.
_value = value_maker("warm-up", "warm-up", "producer")


def _made_up_records(spark: SparkSession, ids: int) -> DataFrame:
    """Each made-up level's ids once, in order, in partition 0 of its topic; built in the
    JVM (a class's 12,000 rows through Python would take longer than judging them)."""
    topics = ", ".join(f"'{s.topic}'" for s in _LEVELS)
    return (
        spark.range(len(_LEVELS) * ids)
        .selectExpr(
            f"element_at(array({topics}), CAST(id DIV {ids} + 1 AS INT)) AS topic",
            "0 AS `partition`",
            f"id % {ids} AS `offset`",
            # value_maker's shape, as _value's
            f"""CAST(concat('{{"id":', id % {ids}, ',"created_at":', 1.0D + id % {ids},"""
            """ ',"run":"warm-up","level":"warm-up","by":"producer"}') AS BINARY) AS value""",
        )
        .select(*(f.name for f in KAFKA_SCHEMA.fields))
    )


def _write_made_up_history(folder: Path, ids: int) -> dict[str, Path]:
    """Each made-up level's merged history file, laid out as in a run folder
    (engine.run.record): every id sent, acknowledged and consumed, as a run's roles record it."""
    from engine.run import record

    events = [
        {"t": 1.0 + i + dt, "proc": proc, "ev": ev, "id": i}
        for i in range(ids)
        for dt, proc, ev in (
            (0.0, "producer", "send"),
            (0.1, "producer", "ack"),
            (0.2, "sink", "consumed"),
        )
    ]
    paths = {}
    for spec in _LEVELS:
        level_dir = record.level_folder(folder, spec.level)
        level_dir.mkdir(parents=True)
        record.write_history(level_dir, events)  # and its Parquet copy, as a run's level
        paths[spec.level] = level_dir / record.HISTORY
    return paths


# A class's run reads 4 topics of one partition each (ack-loss): 4 partitions here, each
# holding every value, give the Kafka source as many tasks and records. The name changed
# with the size: a cluster keeps the earlier topic of 20 records, which is not read.
WARM_UP_TOPIC = "lab.metrics.warm-up.class-size"
WARM_UP_PARTITIONS = len(_LEVELS)


def _write_warm_up_topic(bootstrap: str, values: Sequence[bytes]) -> None:
    """Create WARM_UP_TOPIC with `values` in each partition unless it already holds records."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from engine.kafka.admin import admin_client, create_topic

    if WARM_UP_TOPIC not in admin_client(bootstrap).list_topics(timeout=10).topics:
        create_topic(bootstrap, WARM_UP_TOPIC, partitions=WARM_UP_PARTITIONS)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "lab-metrics-warm-up"})
    try:
        high = high_watermark(probe, TopicPartition(WARM_UP_TOPIC, 0))
    finally:
        probe.close()
    if high > 0:
        return
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(WARM_UP_PARTITIONS):
        for v in values:
            producer.produce(WARM_UP_TOPIC, v, partition=partition)
    undelivered = producer.flush(30)
    if undelivered:
        raise MetricsError(f"{undelivered} warm-up records were not delivered to {bootstrap}.")


def high_watermark(consumer: Any, partition: Any, timeout_s: float = 10.0) -> int:
    """The partition's high watermark (confluent_kafka Consumer, TopicPartition), asked
    again while its leader does not serve it yet, up to `timeout_s` in all.

    The metadata names a new topic's leader once the controller chose it; the broker serves
    the partition once it has applied that choice itself. Seen here: NOT_LEADER_FOR_PARTITION
    from a new cluster's warm-up, right after create_topic saw every partition's leader.
    """
    from confluent_kafka import KafkaError, KafkaException

    not_served_yet = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
    }
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            _, high = consumer.get_watermark_offsets(partition, timeout=left, cached=False)
            return int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in not_served_yet or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
