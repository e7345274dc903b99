"""Spark's count of a share group's run (KIP-932), record by record, by the queue checker's
own rules (engine/judging/queues.py): the broker's delivery count, archived records,
repeated outputs and outputs out of the input's order. Equal to the checker's counts on the
same history and outputs (tests/metrics/test_queue_metrics.py, on Hypothesis's histories).

One SQL text over three views: `history` (the workers' lines, `seq` their order in the
merged history), `outputs` (the output topic's records) and `sent` (the ids written).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from engine.judging.queues import DEFAULT_DELIVERY_LIMIT, QueueCounts
from engine.metrics.sql import run_sql
from engine.model.events import Event
from engine.model.records import StoredRecord

HISTORY = StructType(
    [
        StructField("seq", LongType()),
        StructField("ev", StringType()),
        StructField("id", LongType()),
        StructField("delivery_count", IntegerType()),
        StructField("type", StringType()),
    ]
)
OUTPUTS = StructType(
    [
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("id", LongType()),
    ]
)

# Per record: the broker's last delivery count (`deliveries`), the lines written (`seen`),
# its acknowledgements (how many, which, the last), its output copies and whether one of
# them follows a later input's output. Then the checker's rules, in SQL.
QUEUE_SQL = """
WITH handed AS (
  SELECT id, MAX(COALESCE(delivery_count, 0)) AS deliveries, COUNT(*) AS seen
  FROM {history} WHERE ev = '{delivered}' AND id IS NOT NULL GROUP BY id
), acks AS (
  SELECT id, COUNT(*) AS acks,
         MAX(CASE WHEN type = 'ACCEPT' THEN 1 ELSE 0 END) AS accepted,
         MAX(CASE WHEN type = 'REJECT' THEN 1 ELSE 0 END) AS rejected,
         MAX_BY(type, seq) AS last_type
  FROM {history} WHERE ev = '{acknowledged}' AND id IS NOT NULL GROUP BY id
), placed AS (
  SELECT id, MAX(id) OVER (PARTITION BY partition ORDER BY offset
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
  FROM {outputs} WHERE id IS NOT NULL
), copies AS (
  SELECT id, COUNT(*) AS outputs, MAX(CASE WHEN before > id THEN 1 ELSE 0 END) AS late
  FROM placed GROUP BY id
), records AS (
  SELECT s.id,
         COALESCE(h.deliveries, 0) AS deliveries, COALESCE(h.seen, 0) AS seen,
         COALESCE(c.outputs, 0) AS outputs, COALESCE(c.late, 0) AS late,
         COALESCE(a.accepted, 0) = 0 AND (
           COALESCE(a.rejected, 0) = 1 OR (
             COALESCE(h.deliveries, 0) >= {limit}
             AND (COALESCE(a.acks, 0) < COALESCE(h.seen, 0)
                  OR COALESCE(a.last_type, '') = 'RELEASE')
           )
         ) AS archived
  FROM {sent} s LEFT JOIN handed h ON s.id = h.id LEFT JOIN acks a ON s.id = a.id
       LEFT JOIN copies c ON s.id = c.id
)
SELECT COUNT(*) AS sent,
       COALESCE(SUM(CASE WHEN outputs = 1 THEN 1 ELSE 0 END), 0) AS once,
       COALESCE(SUM(CASE WHEN outputs > 1 THEN 1 ELSE 0 END), 0) AS duplicated,
       COALESCE(SUM(CASE WHEN outputs > 1 THEN outputs - 1 ELSE 0 END), 0) AS duplicates,
       COALESCE(SUM(CASE WHEN outputs = 0 AND NOT archived THEN 1 ELSE 0 END), 0) AS lost,
       COALESCE(SUM(CASE WHEN archived THEN 1 ELSE 0 END), 0) AS archived,
       COALESCE(SUM(CASE WHEN deliveries > 1 THEN 1 ELSE 0 END), 0) AS redelivered,
       COALESCE(SUM(deliveries), 0) AS deliveries,
       COALESCE(SUM(late), 0) AS out_of_order,
       (SELECT COUNT(*) FROM {history} WHERE ev = '{refused}') AS acks_refused
FROM records
"""


def queue_counts(
    spark: SparkSession,
    *,
    sent_ids: Iterable[int],
    history: Sequence[dict[str, Any]],
    outputs: Sequence[StoredRecord],
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
) -> QueueCounts:
    """The queue checker's counts, computed by Spark from the same history and outputs."""
    lines = [
        (seq, str(e.get("ev")), e.get("id"), e.get("delivery_count"), e.get("type"))
        for seq, e in enumerate(history)
        if e.get("ev") in (Event.DELIVERED, Event.ACKNOWLEDGED, Event.ACK_REFUSED)
    ]
    views = {
        "history": spark.createDataFrame(lines, HISTORY),
        "outputs": spark.createDataFrame([(r.partition, r.offset, r.id) for r in outputs], OUTPUTS),
        "sent": spark.createDataFrame([(i,) for i in sorted(set(sent_ids))], "id BIGINT"),
    }
    text = QUEUE_SQL
    for name, value in (
        ("{delivered}", Event.DELIVERED),
        ("{acknowledged}", Event.ACKNOWLEDGED),
        ("{refused}", Event.ACK_REFUSED),
        ("{limit}", int(delivery_limit)),
    ):
        text = text.replace(name, str(value))
    row = run_sql(spark, text, **views).collect()[0]
    return QueueCounts(**{k: int(v) for k, v in row.asDict().items()})
