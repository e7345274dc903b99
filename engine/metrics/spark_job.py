"""The metrics of a recorded run, computed by Spark from what Kafka holds.

For each level of a run, the job reads the judged topic (`sink_topic` in result.json) in
batch mode with Spark's Kafka source, at read_uncommitted and at read_committed, through the
cluster's direct listener. It joins those records with the run's ledger (ids
0..messages-1) and each level's history.jsonl, and judges every message with the
definitions of engine/checker.py, so its counts equal the checker's:

- copies: records of an id at the level's isolation; delivered: ids with a copy;
  duplicates: copies beyond the first, summed; lost: no copy, unless the workload aborted
  the id on purpose ("aborted, as intended"), no producer ever sent it ("never sent"), or
  its input is at or past the processor group's committed offset at the end ("not
  processed yet": the work was not done, and a restarted processor would do it);
- reordered: within a partition, in offset order, an id with a copy (any copy, retries too)
  stored after a copy of a larger id;
- aborted_visible: copies at the level's isolation that read_committed does not show;
- latency: the sink's first `consumed` of an id minus `created_at` of its first copy (by
  partition, then offset); percentiles by nearest rank (engine.checker.LATENCY_DEFINITION).

History events are time-ordered (engine.history.merge writes them so), so an id's "first"
send, ack or consumption is its earliest.

Run it as `python -m engine metrics RUN_ID --json`, or as
`spark-submit --jars JARS engine/metrics/spark_job.py RUN_ID [--bootstrap HOST:PORT]` with
JARS the comma-separated jars in .cache/spark-kafka/VERSION/jars (spark-submit starts the
driver JVM before this file can add them; without them it says so, naming the jars). Both
print {"run_id", "scenario", "results"}.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine import record, settings
from engine.checker import LATENCY_DEFINITION
from engine.errors import LabError
from engine.metrics.buckets import bucket_width, width_sql

if TYPE_CHECKING:
    from engine.metrics.session import Progress

__all__ = [
    "HISTORY_SCHEMA",
    "KAFKA_SCHEMA",
    "LATENCY_DEFINITION",
    "THROUGHPUT_DEFINITION",
    "Judged",
    "LevelSpec",
    "RunInputs",
    "judge",
    "load_run_inputs",
    "main",
    "read_history",
    "read_kafka",
    "read_recorded",
    "run_metrics",
    "verdict_rows",
]

THROUGHPUT_DEFINITION = (
    "Throughput counts the messages whose latency was measured (delivered and seen by the "
    "sink), from the creation of the first of them to the sink's first sight of the last "
    "one; per_bucket[k] is how many the sink saw first in the k-th bucket of bucket_s "
    "seconds of that window, a width chosen from the window's length (engine.metrics.buckets)."
)

# The columns of Spark's Kafka source that the job uses, with the source's own types.
KAFKA_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("value", T.BinaryType()),
    ]
)
VALUE_SCHEMA = T.StructType(
    [T.StructField("id", T.LongType()), T.StructField("created_at", T.DoubleType())]
)
# The history fields the definitions use; every other field of an event is ignored.
HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("t", T.DoubleType()),
        T.StructField("proc", T.StringType()),
        T.StructField("ev", T.StringType()),
        T.StructField("id", T.LongType()),
        T.StructField("ids", T.ArrayType(T.LongType())),
        # A source's ack: where the input landed; the runner's group_committed: where the
        # processor's group stood at the end (an input at or past it is not processed yet).
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
    ]
)
PRODUCER_PROCS = ("producer", "source")  # as engine.runner passes them to the checker
SINK_PROC = "sink"
PERCENTILES = list(range(101))  # the latency distribution: nearest-rank q = 0..100


class MetricsError(LabError):
    """The metrics of a run could not be computed (its topics are gone, Kafka is down)."""


@dataclass(frozen=True)
class LevelSpec:
    level: str
    topic: str
    isolation: str  # read_committed | read_uncommitted


@dataclass(frozen=True)
class RunInputs:
    run_id: str
    scenario: str
    messages: int
    partitions: int
    levels: list[LevelSpec]
    history_paths: dict[str, Path]
    recorded_bootstrap: str | None
    engine_results: dict[str, Any]


@dataclass
class Judged:
    """What `judge` returns: per-level results, and the facts the verdict table comes from."""

    results: dict[str, dict[str, Any]]
    facts: DataFrame  # one cached row per (level, id) that Kafka or the history names
    records: DataFrame  # the cached record positions of both views (_positions)
    messages: int
    levels: list[LevelSpec]

    def verdicts(self) -> DataFrame:
        """The verdict table: one row per level and ledger id, with the checker's fields."""
        spark = self.facts.sparkSession
        names = F.explode(F.array(*(F.lit(s.level) for s in self.levels))).alias("level")
        ledger = spark.range(self.messages).select(names, "id")
        # Listing each id's copies takes a collect_list, which Spark cannot hash-aggregate;
        # it is done here, only when the table is wanted, not in every judge().
        positions = (
            self.records.where("stored")
            .groupBy(F.col("level").alias("level_code"), "id")
            .agg(F.sort_array(F.collect_list(F.struct("partition", "offset"))).alias("positions"))
        )
        offsets = F.transform("positions", lambda p: F.concat_ws(":", p["partition"], p["offset"]))
        known = self.facts.where("in_ledger").join(positions, ["level_code", "id"], "left")
        return ledger.join(known, ["level", "id"], "left").select(
            "level",
            "id",
            # An id that neither Kafka nor the history names: no copy, never sent.
            F.coalesce("verdict", F.lit("never sent")).alias("verdict"),
            F.coalesce("copies", F.lit(0)).alias("copies"),
            F.coalesce(offsets, F.array().cast("array<string>")).alias("offsets"),
            "sent_at",
            "acked_at",
            F.coalesce("ack", F.lit("unsent")).alias("ack"),
            "consumed_at",
            "latency_ms",
            F.coalesce("reordered", F.lit(False)).alias("reordered"),
            F.coalesce("aborted_copies", F.lit(0)).alias("aborted_copies"),
        )

    def release(self) -> None:
        self.facts.unpersist()
        self.records.unpersist()


# ---- inputs ---------------------------------------------------------------------------
def load_run_inputs(run_id: str) -> RunInputs:
    """What the job needs from runs/RUN_ID/; RunNotFoundError if there is no such run."""
    folder = record.run_folder(run_id)
    if not folder.is_dir():
        raise record.RunNotFoundError(
            f"There is no run '{run_id}' in {folder.parent}. `python -m engine runs` lists them."
        )
    try:
        config = json.loads((folder / "config.json").read_text())
        result = json.loads((folder / "result.json").read_text())
    except FileNotFoundError as exc:
        raise record.CorruptRunError(
            f"The run {run_id} has no {Path(exc.filename).name}: it did not finish, so it has "
            "no results to compute metrics for. Run the scenario again."
        ) from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise record.CorruptRunError(
            f"The run folder {folder} is damaged ({type(exc).__name__}: {exc})."
        ) from exc
    results = result.get("results") or {}
    if not results:
        raise MetricsError(f"The run {run_id} has no level results (it failed before any).")
    workload = config["scenario"]["workload"]
    return RunInputs(
        run_id=run_id,
        scenario=result.get("scenario") or config["scenario"]["name"],
        messages=int(workload["messages"]),
        partitions=int(workload.get("partitions", 1)),
        levels=[
            LevelSpec(level=name, topic=r["sink_topic"], isolation=r["isolation"])
            for name, r in results.items()
        ],
        history_paths={name: folder / "levels" / name / "history.jsonl" for name in results},
        recorded_bootstrap=config.get("cluster", {}).get("direct_bootstrap"),
        engine_results=results,
    )


def read_kafka(
    spark: SparkSession, bootstrap: str, topics: Iterable[str], isolation: str
) -> DataFrame:
    """Every record of `topics` from the start to the end, at an isolation level (batch)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(sorted(set(topics))))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", isolation)
        # Aborted records and transaction markers leave offset gaps; they are not data loss.
        .option("failOnDataLoss", "false")
        # A task's last poll reaches past what the topic holds, and the broker would hold it
        # for fetch.max.wait.ms (500 ms) waiting for data that never comes: 4x the read time.
        .option("kafka.fetch.max.wait.ms", "10")
        .load()
        .select("topic", "partition", "offset", "value")
    )


def read_history(spark: SparkSession, history_paths: Mapping[str, Path]) -> DataFrame:
    """Each level's history.jsonl as rows (level, t, proc, ev, id, ids)."""
    missing = [str(p) for p in history_paths.values() if not Path(p).exists()]
    if missing:
        raise record.CorruptRunError(f"The run's history is missing: {', '.join(missing)}.")
    # The level is the name of the folder above history.jsonl (levels/LEVEL/).
    level = F.regexp_extract(F.col("_metadata.file_path"), r"/levels/([^/]+)/history\.jsonl$", 1)
    return (
        spark.read.schema(HISTORY_SCHEMA)
        .json([str(p) for p in history_paths.values()])
        .select(level.alias("level"), "t", "proc", "ev", "id", "ids", "partition", "offset")
    )


def read_recorded(spark: SparkSession, run_id: str) -> tuple[DataFrame, DataFrame]:
    """The records saved in stored.json, shaped like read_kafka's (uncommitted, committed).

    stored.json keeps the level's view and the read_committed view; for a read_committed
    level both are the read_committed view, so that level's aborted_at_read_uncommitted
    cannot be known from the record and is reported as None.
    """
    run = record.load_run(run_id)
    rows: dict[str, list[tuple[Any, ...]]] = {"read_uncommitted": [], "read_committed": []}
    for level, data in run["levels"].items():
        topic = run["result"]["results"][level]["sink_topic"]
        stored = data["stored"]
        views = {"read_committed": stored["read_committed"]}
        # judge() parses values from the read_uncommitted view, which holds every record
        # of the read_committed one; unknown here, it is the read_committed view again.
        views["read_uncommitted"] = (
            stored["at_level"]
            if stored["isolation"] == "read_uncommitted"
            else stored["read_committed"]
        )
        for isolation, records in views.items():
            for r in records:
                value = (
                    None
                    if r["id"] is None
                    else json.dumps({"id": r["id"], "created_at": r["created_at"]}).encode()
                )
                rows[isolation].append((topic, r["partition"], r["offset"], value))
    return (
        spark.createDataFrame(rows["read_uncommitted"], KAFKA_SCHEMA),
        spark.createDataFrame(rows["read_committed"], KAFKA_SCHEMA),
    )


# ---- the judgement --------------------------------------------------------------------
# The judgement is three SQL texts, one spark.sql call each: building it column by column
# through the DataFrame API took about 4,400 calls into the JVM, each analysing the plan it
# extended (about 1 s of a 3,000-message run's metrics). The DataFrames they read are
# named {name} in the text and bound by _sql.
def _sql_str(text: str) -> str:
    """A Spark SQL string literal of `text`, with braces doubled for _sql's str.format."""
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return quoted.replace("{", "{{").replace("}", "}}")


def _sql(spark: SparkSession, text: str, **views: DataFrame) -> DataFrame:
    """spark.sql(text) with each {name} in it the DataFrame `views[name]`.

    Like spark.sql's own {name} binding, through temporary views that live for the one
    parse and analysis; but they are dropped from the session catalog directly, because
    Catalog.dropTempView would also uncache the plan of a persisted DataFrame it names
    (`records` and `facts` are cached until Judged.release()).
    """
    names = {key: f"_lab_metrics_{key}_{uuid.uuid4().hex}" for key in views}
    for key, frame in views.items():
        frame.createOrReplaceTempView(names[key])
    try:
        return spark.sql(text.format(**names))
    finally:
        catalog = spark._jsparkSession.sessionState().catalog()
        for name in names.values():
            catalog.dropTempView(name)


def _sql_literal(value: str | int | bool | float) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # exactly this double: repr round-trips, Java parses it back
        return f"CAST({_sql_str(repr(value))} AS DOUBLE)"
    return _sql_str(value)


def _sql_codes(column: str, mapping: Mapping[Any, str | int | bool | float]) -> str:
    """`mapping[column]` as a CASE of literals (NULL for any other value): constant-folded."""
    if not mapping:
        return "NULL"
    branches = " ".join(
        f"WHEN {_sql_literal(k)} THEN {_sql_literal(v)}" for k, v in mapping.items()
    )
    return f"CASE {column} {branches} END"


def _sql_in(column: str, values: Iterable[str]) -> str:
    values = list(values)
    if not values:
        return "FALSE"
    return f"{column} IN ({', '.join(_sql_str(v) for v in values)})"


# (partition, offset) as one orderable long: Kafka partitions stay below 2^21 and offsets
# below 2^42 (4.4 trillion) in any cluster this lab reads.
_OFFSET_BITS = 1 << 42


def _positions_sql(levels: Sequence[LevelSpec]) -> str:
    """One row per record position of each level's topic, with what each view holds there.

    Columns: level (its place in `levels`), partition, offset, id, created_at, stored (in
    the level's own view),
    aborted (stored, but not in the read_committed view), hidden (in the read_uncommitted
    view, not in the read_committed one) and highest (the largest id stored before it in
    its partition, at least -1). Both views go through one shuffle by (level, partition);
    the aggregation and the window refine that partitioning, so no other exchange.
    Like engine.roles.common.parse_value, a value that is not a JSON object with an integer
    "id" is no message of the workload and counts for nothing. (Only fixed-width columns in
    the aggregation: a string would make it sort-based.)

    Values are parsed from the read_uncommitted view only: read_committed shows the same
    records minus the aborted ones, never one of its own (Kafka filters, it does not add),
    so its rows carry only their positions. Parsing is the costliest step per record
    (benchmarks/METRICS.md), and this halves it.
    """
    # Levels are numbered (their place in `levels`) until the facts name them: hashing and
    # comparing an int per row, not a string, in every shuffle and aggregation.
    level = _sql_codes("topic", {s.topic: k for k, s in enumerate(levels)})
    uncommitted_level = _sql_codes(
        "level", {k: s.isolation == "read_uncommitted" for k, s in enumerate(levels)}
    )
    return f"""
WITH views AS (
    SELECT {level} AS level, TRUE AS in_uncommitted, `partition`, `offset`,
           CASE WHEN is_valid_utf8(CAST(value AS STRING))
                THEN from_json(CAST(value AS STRING), 'id BIGINT, created_at DOUBLE') END AS v
    FROM {{uncommitted}}
    UNION ALL
    SELECT {level} AS level, FALSE AS in_uncommitted, `partition`, `offset`,
           CAST(NULL AS STRUCT<id: BIGINT, created_at: DOUBLE>) AS v
    FROM {{committed}}
), shuffled AS (
    SELECT level, in_uncommitted, `partition`, `offset`, v.id AS id, v.created_at AS created_at
    FROM views WHERE level IS NOT NULL AND (v.id IS NOT NULL OR NOT in_uncommitted)
    DISTRIBUTE BY level, `partition`
), merged AS (
    SELECT level, `partition`, `offset`, max(id) AS id, max(created_at) AS created_at,
           max(in_uncommitted) AS read_uncommitted,
           max(NOT in_uncommitted) AS read_committed
    FROM shuffled GROUP BY level, `partition`, `offset`
), marked AS (
    SELECT level, `partition`, `offset`, id, created_at,
           CASE WHEN {uncommitted_level} THEN read_uncommitted
                ELSE read_committed END AS stored,
           read_uncommitted, read_committed
    FROM merged WHERE id IS NOT NULL
)
SELECT level, `partition`, `offset`, id, created_at, stored,
       stored AND NOT read_committed AS aborted,
       read_uncommitted AND NOT read_committed AS hidden,
       greatest(-1, max(CASE WHEN stored THEN id END) OVER (
           PARTITION BY level, `partition` ORDER BY `offset`
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS highest
FROM marked
"""


def _facts_sql(
    levels: Sequence[LevelSpec], producer_procs: Sequence[str], sink_proc: str, messages: int
) -> str:
    """One row per level and id that Kafka or the history names, with the checker's verdict.

    Per level, partition and id the records give: copies, the first copy, aborted and hidden
    copies, and whether the id is reordered in that partition (engine.checker.reordered_ids).
    The largest id before a position only grows with the offset, so its maximum over an
    id's copies is its value at the last copy: the id is reordered when that is larger than
    the id (some copy of it came after a larger id). Each history event is one row, plus
    one row per id named by a producer's txn_abort or txn_commit. History is time-ordered,
    so the checker's first (setdefault) of an event is the earliest.
    """
    producer = _sql_in("split(proc, '#')[0]", producer_procs)
    code = _sql_codes("level", {s.level: k for k, s in enumerate(levels)})
    name = _sql_codes("level_code", {k: s.level for k, s in enumerate(levels)})
    # Each row's kind and event as small ints, decided once per row: the aggregation below
    # tests them a dozen times per row, and string comparisons were a tenth of its time.
    record, event_row, txn = 0, 1, 2
    ev_codes = {"send": 1, "ack": 2, "consumed": 3, "fail": 4, "fenced": 5}
    ev_codes |= {"txn_abort": 6, "txn_commit": 7}
    ev_code = f"coalesce({_sql_codes('ev', ev_codes)}, 0)"

    def ev(name: str) -> str:
        return f"ev = {ev_codes[name]}"

    event = f"(kind = {event_row} AND id IS NOT NULL)"

    def first_t(condition: str) -> str:
        return f"min(CASE WHEN {event} AND {condition} THEN t END)"

    no_copy = "NOT (copies > 0)"
    source_ack = "proc = 'source' AND ev = 'ack' AND `offset` IS NOT NULL"
    return f"""
WITH record_facts AS (
    SELECT level, id, {record} AS kind, `partition`,
           sum(CAST(stored AS BIGINT)) AS copies,
           min(CASE WHEN stored THEN `offset` END) AS first_offset,
           min_by(created_at, CASE WHEN stored THEN `offset` END) AS first_created_at,
           sum(CAST(aborted AS BIGINT)) AS aborted,
           sum(CAST(hidden AS BIGINT)) AS hidden,
           coalesce(max(CASE WHEN stored THEN highest END) > id, FALSE) AS reordered,
           CAST(NULL AS DOUBLE) AS t, FALSE AS by_producer, FALSE AS by_sink, 0 AS ev,
           CAST(NULL AS INT) AS in_partition, CAST(NULL AS BIGINT) AS in_offset
    FROM {{records}} GROUP BY level, `partition`, id
), history_facts AS (
    -- Every event is a row; a producer's txn_abort / txn_commit adds one row per id it
    -- names. Two plain scans: building an array per event to inline cost ten times more.
    -- Who wrote an event is decided once per event, not in each aggregate below.
    SELECT {code} AS level, id, {event_row} AS kind, CAST(NULL AS INT) AS `partition`,
           CAST(0 AS BIGINT) AS copies, CAST(NULL AS BIGINT) AS first_offset,
           CAST(NULL AS DOUBLE) AS first_created_at, CAST(0 AS BIGINT) AS aborted,
           CAST(0 AS BIGINT) AS hidden, FALSE AS reordered, t,
           coalesce({producer}, FALSE) AS by_producer,
           coalesce(proc = {_sql_str(sink_proc)}, FALSE) AS by_sink, {ev_code} AS ev,
           CASE WHEN {source_ack} THEN `partition` END AS in_partition,
           CASE WHEN {source_ack} THEN `offset` END AS in_offset
    FROM {{history}} WHERE {code} IS NOT NULL
    UNION ALL
    SELECT {code}, txn_id, {txn}, NULL, 0, NULL, NULL, 0, 0, FALSE, t, TRUE, FALSE, {ev_code},
           NULL, NULL
    FROM {{history}} LATERAL VIEW explode(ids) named AS txn_id
    WHERE {code} IS NOT NULL AND {producer} AND ev IN ('txn_abort', 'txn_commit')
), rows AS (
    SELECT level, id, kind, `partition`, copies, first_offset, first_created_at, aborted,
           hidden, reordered, t, by_producer, by_sink, ev, in_partition, in_offset
    FROM record_facts
    UNION ALL
    SELECT level, id, kind, `partition`, copies, first_offset, first_created_at, aborted,
           hidden, reordered, t, by_producer, by_sink, ev, in_partition, in_offset
    FROM history_facts
), facts AS (
    SELECT level AS level_code, id,
           sum(copies) AS copies,
           -- The first copy by (partition, offset) carries the created_at the latency uses;
           -- min_by over one long (not min over a struct) keeps this a hash aggregation.
           min_by(first_created_at,
                  CAST(`partition` AS BIGINT) * {_OFFSET_BITS} + first_offset) AS created_at,
           sum(aborted) AS aborted_copies,
           max(reordered) AS reordered,
           sum(hidden) AS hidden_copies,
           {first_t(f"by_producer AND {ev('send')}")} AS sent_at,
           {first_t(f"by_producer AND {ev('ack')}")} AS acked_at,
           coalesce(max({event} AND by_producer AND {ev("fail")}), FALSE) AS failed,
           {first_t(f"by_sink AND {ev('consumed')}")} AS consumed_at,
           coalesce(max(kind = {txn} AND {ev("txn_abort")}), FALSE)
               AND NOT coalesce(max(kind = {txn} AND {ev("txn_commit")}), FALSE)
               AS aborted_by_design,
           sum(CAST(kind = {event_row} AND {ev("fenced")} AS BIGINT)) AS fenced,
           -- The first source ack's position (min_by skips rows whose ordering is NULL).
           min_by(in_partition, CASE WHEN in_offset IS NOT NULL THEN t END) AS in_partition,
           min_by(in_offset, CASE WHEN in_offset IS NOT NULL THEN t END) AS in_offset
    FROM rows GROUP BY level, id
), group_committed AS (
    -- The last reading of each partition's committed offset, as the checker keeps it.
    SELECT {code} AS level, `partition`, max_by(`offset`, t) AS committed
    FROM {{history}}
    WHERE ev = 'group_committed' AND {code} IS NOT NULL AND `partition` IS NOT NULL
    GROUP BY 1, 2
), judged AS (
    SELECT f.*, coalesce(f.in_offset >= g.committed, FALSE) AS pending
    FROM facts f LEFT JOIN group_committed g
      ON g.level = f.level_code AND g.`partition` = f.in_partition
)
SELECT {name} AS level, *,
       id BETWEEN 0 AND {messages - 1} AS in_ledger,
       CASE WHEN aborted_copies > 0 THEN 'visible although aborted'
            WHEN {no_copy} AND aborted_by_design THEN 'aborted, as intended'
            WHEN {no_copy} AND sent_at IS NULL AND NOT failed AND acked_at IS NULL
                 THEN 'never sent'
            WHEN {no_copy} AND pending THEN 'not processed yet'
            WHEN {no_copy} THEN 'lost'
            WHEN copies > 1 THEN 'duplicated'
            WHEN reordered THEN 'reordered'
            ELSE 'delivered once' END AS verdict,
       CASE WHEN acked_at IS NOT NULL THEN 'acked'
            WHEN failed THEN 'failed'
            WHEN sent_at IS NOT NULL THEN 'unacked'
            ELSE 'unsent' END AS ack,
       -- unrounded; verdict_rows rounds as the checker does
       CASE WHEN consumed_at IS NOT NULL AND consumed_at != 0
                 AND created_at IS NOT NULL AND created_at != 0 AND copies > 0
            THEN (consumed_at - created_at) * 1000.0D END AS latency_ms
FROM judged
"""


# The counts of a level, in the order the summary query returns them.
_COUNTS = (
    "present",
    "sent",
    "acked",
    "delivered",
    "duplicates",
    "duplicated_messages",
    "lost",
    "reordered",
    "aborted_visible",
    "aborted_as_intended",
    "never_sent",
    "not_processed",
    "hidden",
    "fenced",
    "latency_count",
    "window_start",
    "window_end",
)


def _summary_sql(ranks: str) -> str:
    """Counts, the latency ranks the percentiles need and throughput per bucket, one job.

    Nearest rank, exactly as engine.checker.percentile: the value at rank
    max(1, ceil(q / 100.0 * n)) of the sorted latencies, for q = 0..100.

    ranks="sort" (runs of a class's size): the rows of each level are sorted in one task,
    and a row of rank r is kept when some q maps to r; that q lies within one of
    floor(100 r / n) (the double arithmetic is Python's, so the check is exact), so three
    candidates are tried per row. The rank and per-bucket branches read one shuffle of the
    timed rows by level.

    ranks="histogram" (big runs): no sort and no shuffle of the rows; each level's latencies
    are counted per _LATENCY_BUCKET instead, and _picks_sql, knowing from those counts which
    bucket holds each wanted rank, sorts only those buckets' rows. Throughput per bucket
    moves there too, since its width needs the level's window first.
    """
    ledger = "in_ledger"
    lat = "latency_ms"

    def count_if(condition: str) -> str:
        return f"sum(CAST({ledger} AND {condition} AS BIGINT))"

    counts = {
        "present": f"sum(CAST({ledger} AS BIGINT))",
        "sent": count_if("sent_at IS NOT NULL"),
        "acked": count_if("acked_at IS NOT NULL"),
        "delivered": count_if("copies > 0"),
        "duplicates": f"sum(CASE WHEN {ledger} THEN greatest(copies - 1, 0) END)",
        "duplicated_messages": count_if("copies > 1"),
        "lost": count_if("verdict = 'lost'"),
        "reordered": count_if("reordered"),
        "aborted_visible": f"sum(CASE WHEN {ledger} THEN aborted_copies END)",
        "aborted_as_intended": count_if("verdict = 'aborted, as intended'"),
        "never_sent": count_if("verdict = 'never sent'"),
        "not_processed": count_if("verdict = 'not processed yet'"),
        "hidden": f"sum(CASE WHEN {ledger} THEN hidden_copies END)",
        "fenced": "sum(fenced)",
        "latency_count": count_if(f"{lat} IS NOT NULL"),
        "window_start": f"min(CASE WHEN {ledger} AND {lat} IS NOT NULL THEN created_at END)",
        "window_end": f"max(CASE WHEN {ledger} AND {lat} IS NOT NULL THEN consumed_at END)",
    }
    assert tuple(counts) == _COUNTS
    fields = ", ".join(f"{_sql_str(k)}, {v}" for k, v in counts.items())
    summary = f"""
SELECT 'counts' AS what, level, CAST(NULL AS BIGINT) AS key, CAST(NULL AS DOUBLE) AS value,
       named_struct({fields}) AS counts
FROM {{facts}} GROUP BY level
"""
    if ranks == "histogram":
        return f"""{summary}
UNION ALL
SELECT 'h', level, {_LATENCY_BUCKET}, CAST(count(1) AS DOUBLE), NULL FROM {{facts}}
WHERE {ledger} AND {lat} IS NOT NULL GROUP BY level, {_LATENCY_BUCKET}
"""

    def rank_of(q: str) -> str:
        return f"greatest(1, ceil(CAST({q} AS DOUBLE) / 100.0D * CAST(n AS DOUBLE)))"

    candidate = "CAST(floor(100.0D * CAST(rn AS DOUBLE) / CAST(n AS DOUBLE)) AS INT)"
    width = width_sql("finish - start")  # the level's window: min(created_at)..max(consumed_at)
    wanted = " OR ".join(
        f"(q{k} BETWEEN 0 AND 100 AND {rank_of(f'q{k}')} = rn)" for k in ("0", "1", "2")
    )
    return f"""
WITH timed AS (
    SELECT level, {lat}, created_at, consumed_at FROM {{facts}}
    WHERE {ledger} AND {lat} IS NOT NULL
    DISTRIBUTE BY level
), ranked AS (
    SELECT level, {lat}, rn, n, c - 1 AS q0, c AS q1, c + 1 AS q2 FROM (
        SELECT level, {lat}, rn, n, {candidate} AS c FROM (
            SELECT level, {lat},
                   row_number() OVER (PARTITION BY level ORDER BY {lat}) AS rn,
                   count(1) OVER (PARTITION BY level) AS n
            FROM timed))
), buckets AS (
    SELECT level, floor((consumed_at - start) / {width}) AS bucket FROM (
        SELECT level, consumed_at, min(created_at) OVER (PARTITION BY level) AS start,
               max(consumed_at) OVER (PARTITION BY level) AS finish
        FROM timed)
){summary}
UNION ALL
SELECT 'rank', level, rn, {lat}, NULL FROM ranked WHERE {wanted}
UNION ALL
SELECT 'b', level, bucket, CAST(count(1) AS DOUBLE), NULL FROM buckets GROUP BY level, bucket
"""


# A latency's bucket for ranks="histogram": about 256 buckets per factor e (0.4% wide), so
# a level's latencies fall into a few thousand buckets whatever their range. It only has
# to keep order (x <= y gives bucket(x) <= bucket(y)): Java's Math.log is semi-monotonic by
# its contract (and Spark's ln calls StrictMath.log, which Math.log may be), and multiplying
# by a positive constant and floor keep order. Zero is bucket 0, negatives mirror positives.
_LATENCY_BUCKET = (
    "(CASE WHEN latency_ms > 0 THEN 1099511627776 + CAST(floor(ln(latency_ms) * 256.0D) AS BIGINT)"
    " WHEN latency_ms < 0 THEN -1099511627776 - CAST(floor(ln(-latency_ms) * 256.0D) AS BIGINT)"
    " ELSE 0 END)"
)


def _sql_ints(values: Iterable[int]) -> str:
    return ", ".join(str(int(v)) for v in sorted(values))


def _picks_sql(
    picks: Mapping[str, Mapping[int, set[int]]], windows: Mapping[str, tuple[float, float]]
) -> str:
    """The second job of ranks="histogram": the wanted ranks and throughput per bucket.

    `picks[level][bucket]` holds the ranks within the bucket that some q needs. Only those
    buckets' rows are read; equal latencies are counted first (a level of a million
    messages has thousands of ties), then each bucket's distinct latencies are ordered with
    the running count, and a row is returned when a wanted rank falls among its copies:
    `below` < rank <= `below` + `copies`. `windows[level]` is (window_start, bucket width).
    """
    lat = "latency_ms"

    def hit(ranks: set[int]) -> str:
        return " OR ".join(f"({k} > below AND {k} <= below + copies)" for k in sorted(ranks))

    wanted = (
        " OR ".join(
            f"(level = {_sql_str(level)} AND b = {bucket} AND ({hit(ranks)}))"
            for level, buckets in picks.items()
            for bucket, ranks in buckets.items()
        )
        or "FALSE"
    )
    chosen = (
        " OR ".join(
            f"(level = {_sql_str(level)} AND b IN ({_sql_ints(buckets)}))"
            for level, buckets in picks.items()
            if buckets
        )
        or "FALSE"
    )
    start = _sql_codes("level", {level: s for level, (s, _) in windows.items()})
    width = _sql_codes("level", {level: w for level, (_, w) in windows.items()})
    return f"""
WITH timed AS (
    SELECT level, {lat}, consumed_at FROM {{facts}} WHERE in_ledger AND {lat} IS NOT NULL
), distinct_values AS (
    SELECT level, b, {lat}, count(1) AS copies FROM (
        SELECT level, {_LATENCY_BUCKET} AS b, {lat} FROM timed)
    WHERE {chosen} GROUP BY level, b, {lat}
)
SELECT 'rank' AS what, level, b AS key, below, copies, {lat} AS value FROM (
    SELECT level, b, {lat}, copies,
           coalesce(sum(copies) OVER (PARTITION BY level, b ORDER BY {lat}
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS below
    FROM distinct_values)
WHERE {wanted}
UNION ALL
SELECT 'b', level, bucket, NULL, NULL, CAST(count(1) AS DOUBLE) FROM (
    SELECT level, floor((consumed_at - ({start})) / ({width})) AS bucket FROM timed)
GROUP BY level, bucket
"""


# Up to this many messages per level, ranks are found by sorting (one Spark job, the
# fastest for a class's runs); above it, by counting per latency bucket (two jobs, no sort
# of all rows, and no task that holds a whole level). benchmarks/METRICS.md.
SORTED_RANKS_UP_TO = 250_000


def judge(
    *,
    uncommitted: DataFrame,
    committed: DataFrame,
    history: DataFrame,
    levels: Sequence[LevelSpec],
    messages: int,
    producer_procs: Sequence[str] = PRODUCER_PROCS,
    sink_proc: str = SINK_PROC,
    uncommitted_known: Mapping[str, bool] | None = None,
    ranks: str | None = None,
) -> Judged:
    """Judge every message of every level; the definitions are engine.checker's.

    `uncommitted` and `committed` are the judged topics read at each isolation, with the
    Kafka source's columns (topic, partition, offset, value). `history` has the columns
    (level, t, proc, ev, id, ids). The ledger is ids 0..messages-1 for every level.
    The result's `facts` (one row per level and id that Kafka or the history names) and
    `records` (one per record position) stay cached until `Judged.release()`.
    Every record of `committed` must also be in `uncommitted` (as Kafka's read_committed
    view is in its read_uncommitted one): values are parsed from `uncommitted` only.
    `ranks` ("sort" or "histogram", see _summary_sql) defaults by the run's size.
    """
    spark = uncommitted.sparkSession
    method = ranks or ("sort" if messages <= SORTED_RANKS_UP_TO else "histogram")
    # Shuffle partitions sized to the run: the session's setting for a class's runs (4; more
    # only add scheduling), one per 2 million rows beyond, so no task's hash maps outgrow
    # its memory.
    partitions = max(shuffle_partitions(), math.ceil(messages * len(levels) / 2_000_000))
    conf = spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        records = _sql(
            spark, _positions_sql(levels), uncommitted=uncommitted, committed=committed
        ).persist()
        facts = _sql(
            spark,
            _facts_sql(levels, producer_procs, sink_proc, messages),
            records=records,
            history=history,
        ).persist()
        results = _summarise(facts, levels, messages, uncommitted_known, method)
    finally:
        conf.set("spark.sql.shuffle.partitions", before)
    return Judged(
        results=results, facts=facts, records=records, messages=messages, levels=list(levels)
    )


def shuffle_partitions() -> int:
    """LAB_SPARK_SHUFFLE_PARTITIONS (default 4): the shuffle partitions of a class's runs."""
    try:
        return settings.SPARK_SHUFFLE_PARTITIONS.integer(minimum=1)
    except ValueError:
        return 4


def _rank(q: int, n: int) -> int:
    """engine.checker.percentile's nearest rank of q in n sorted values."""
    return max(1, math.ceil(q / 100.0 * n))


def _summarise(
    facts: DataFrame,
    levels: Sequence[LevelSpec],
    messages: int,
    uncommitted_known: Mapping[str, bool] | None,
    ranks: str,
) -> dict[str, dict[str, Any]]:
    """Counts, the latency distribution and throughput per level (_summary_sql's jobs).

    Ledger ids that neither Kafka nor the history names have no row in `facts`; they are
    lost (no copy, not aborted on purpose), so they are counted as messages minus rows.
    """
    spark = facts.sparkSession
    counts: dict[str, dict[str, Any]] = {}
    ranked: dict[str, dict[int, float]] = {}
    histogram: dict[str, dict[int, int]] = {s.level: {} for s in levels}
    per_bucket: dict[str, dict[int, int]] = {s.level: {} for s in levels}
    for r in _sql(spark, _summary_sql(ranks), facts=facts).collect():
        if r["what"] == "counts":
            counts[r["level"]] = r["counts"].asDict()
        elif r["what"] == "rank":
            ranked.setdefault(r["level"], {})[r["key"]] = r["value"]
        elif r["what"] == "h":
            histogram[r["level"]][r["key"]] = int(r["value"])
        else:
            per_bucket[r["level"]][r["key"]] = int(r["value"])
    if ranks == "histogram":
        ranked, per_bucket = _ranks_from_histogram(spark, facts, counts, histogram, levels)
    distribution: dict[str, dict[int, float]] = {s.level: {} for s in levels}
    for level, c in counts.items():
        n = c["latency_count"] or 0
        for q in PERCENTILES if n else []:
            distribution[level][q] = ranked[level][_rank(q, n)]

    results: dict[str, dict[str, Any]] = {}
    for spec in levels:
        c = counts.get(spec.level) or {}
        dist = distribution[spec.level]
        seen = c.get("latency_count") or 0
        window = c["window_end"] - c["window_start"] if seen else None
        known = True if uncommitted_known is None else uncommitted_known.get(spec.level, True)
        duplicated = c.get("duplicated_messages") or 0
        results[spec.level] = {
            "sink_topic": spec.topic,
            "isolation": spec.isolation,
            "messages": messages,
            "sent": c.get("sent") or 0,
            "acked": c.get("acked") or 0,
            "delivered": c.get("delivered") or 0,
            "duplicates": c.get("duplicates") or 0,
            "duplicated_messages": duplicated,
            "duplicated_share": round(duplicated / messages, 4) if messages else 0.0,
            "lost": c.get("lost") or 0,
            # A ledger id that neither a record nor an event names was never sent.
            "never_sent": (c.get("never_sent") or 0) + messages - (c.get("present") or 0),
            "not_processed": c.get("not_processed") or 0,
            "reordered": c.get("reordered") or 0,
            "aborted_visible": c.get("aborted_visible") or 0,
            "aborted_as_intended": c.get("aborted_as_intended") or 0,
            "aborted_at_read_uncommitted": (c.get("hidden") or 0) if known else None,
            "fenced": c.get("fenced") or 0,
            # Stored but never read by the sink: every delivered message has a latency
            # exactly when the sink read it.
            "unseen_by_sink": (c.get("delivered") or 0) - seen,
            "latency_ms": {
                "p50": _rounded(dist.get(50)),
                "p95": _rounded(dist.get(95)),
                "p99": _rounded(dist.get(99)),
                "max": _rounded(dist.get(100)),
            },
            "latency_distribution_ms": [
                {"q": q, "ms": _rounded(dist[q])} for q in PERCENTILES if q in dist
            ],
            "throughput": {
                "messages": seen,
                # Epoch seconds of bucket 0 of per_bucket, to line it up with the faults.
                "window_start": c["window_start"] if seen else None,
                "window_s": None if window is None else round(window, 3),
                "messages_per_s": round(seen / window, 2) if window else None,
                "bucket_s": None if window is None else bucket_width(window),
                "per_bucket": _dense(per_bucket[spec.level]),
            },
        }
    return results


def _ranks_from_histogram(
    spark: SparkSession,
    facts: DataFrame,
    counts: Mapping[str, Mapping[str, Any]],
    histogram: Mapping[str, Mapping[int, int]],
    levels: Sequence[LevelSpec],
) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, int]]]:
    """The wanted ranks' latencies and throughput per bucket, from the latency histogram.

    Walks each level's buckets in order, counting, to find the bucket and the rank within
    it of every rank a percentile needs; _picks_sql then sorts only those buckets.
    Returns ({level: {rank: latency}}, {level: {time bucket: messages}}).
    """
    where: dict[str, dict[int, tuple[int, int]]] = {}  # level -> rank -> (bucket, in-bucket)
    picks: dict[str, dict[int, set[int]]] = {}
    windows: dict[str, tuple[float, float]] = {}
    for level, c in counts.items():
        n = c["latency_count"] or 0
        if not n:
            continue
        windows[level] = (c["window_start"], bucket_width(c["window_end"] - c["window_start"]))
        wanted = sorted({_rank(q, n) for q in PERCENTILES})
        where[level], picks[level] = {}, {}
        below = 0  # latencies in the buckets before this one
        buckets = iter(sorted(histogram[level].items()))
        bucket, size = next(buckets)
        for rank in wanted:
            while rank > below + size:
                below += size
                bucket, size = next(buckets)
            where[level][rank] = (bucket, rank - below)
            picks[level].setdefault(bucket, set()).add(rank - below)
    runs: dict[tuple[str, int], list[tuple[int, int, float]]] = {}  # (below, copies, value)
    per_bucket: dict[str, dict[int, int]] = {s.level: {} for s in levels}
    for r in _sql(spark, _picks_sql(picks, windows), facts=facts).collect():
        if r["what"] == "rank":
            runs.setdefault((r["level"], r["key"]), []).append(
                (r["below"], r["copies"], r["value"])
            )
        else:
            per_bucket[r["level"]][r["key"]] = int(r["value"])

    def value_at(level: str, bucket: int, k: int) -> float:
        return next(v for below, n, v in runs[(level, bucket)] if below < k <= below + n)

    ranked = {
        level: {rank: value_at(level, *at) for rank, at in by_rank.items()}
        for level, by_rank in where.items()
    }
    return ranked, per_bucket


def _rounded(x: float | None) -> float | None:
    """As engine.checker.latency_summary rounds: Python's round, not Spark's HALF_UP."""
    return None if x is None else round(x, 2)


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _dense(counts: Mapping[int, int]) -> list[int]:
    """{bucket: n} -> [n for bucket 0, 1, ...], with the empty buckets as 0."""
    if not counts:
        return []
    return [counts.get(k, 0) for k in range(max(counts) + 1)]


def verdict_rows(judged: Judged) -> dict[str, list[dict[str, Any]]]:
    """Each level's verdicts as engine.checker.verdicts_to_rows gives them, ordered by id.

    For a run's few thousand messages; a big run's table stays a DataFrame (verdicts()).
    """
    out: dict[str, list[dict[str, Any]]] = {s.level: [] for s in judged.levels}
    for r in judged.verdicts().orderBy("level", "id").collect():
        row = r.asDict()
        level = row.pop("level")
        row["latency_ms"] = _rounded(row["latency_ms"])
        row["offsets"] = list(row["offsets"])
        out[level].append(row)
    return out


# Made-up judgements the dashboard runs after Spark starts (benchmarks/METRICS.md).
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


# ---- the job --------------------------------------------------------------------------
def _check_topics(bootstrap: str, topics: Sequence[str], run_id: str) -> None:
    """Fail with one line if Kafka is down or the run's topics are gone.

    Spark's Kafka source would otherwise read a missing topic as empty, and every message
    would look lost.
    """
    from confluent_kafka import KafkaException

    from engine.kafka.admin import admin_client

    try:
        metadata = admin_client(bootstrap).list_topics(timeout=5)
    except KafkaException as exc:
        raise MetricsError(
            f"No Kafka broker answers at {bootstrap} ({exc.args[0].str()}). Start the run's "
            "cluster, point LAB_METRICS_BOOTSTRAP (or --bootstrap) at it, or use --from-record."
        ) from exc
    missing = [t for t in topics if t not in metadata.topics]
    if missing:
        raise MetricsError(
            f"The cluster at {bootstrap} has no topic {missing[0]}: run {run_id} was recorded "
            "on another cluster, or its topics were deleted. Point LAB_METRICS_BOOTSTRAP (or "
            "--bootstrap) at the run's cluster, or use --from-record."
        )


# What a level's result in result.json says that is no measurement (the faults fired, the
# client settings, the times, the idempotency-key database's rows, the sentences that
# explain the counts from the history); it is carried over so the output has every field of
# `engine run --json`.
CARRIED_OVER = (
    "label",
    "open_transactions",
    "faults",
    "explain",
    "started_at",
    "duration_s",
    "producer_config",
    "consumer_config",
    "effects",
    "effect_ids",
    "duplicates_absorbed",
    "effect_store",
)


def run_metrics(
    run_id: str,
    *,
    spark: SparkSession | None = None,
    spark_master: str | None = None,
    bootstrap: str | None = None,
    from_record: bool = False,
    progress: Progress | None = None,
    inputs: RunInputs | None = None,
) -> tuple[dict[str, Any], Judged]:
    """Compute a recorded run's metrics; returns ({"run_id", "scenario", "results"}, Judged).

    Kafka is read through `bootstrap`, else LAB_METRICS_BOOTSTRAP, else the direct bootstrap
    recorded for the run's cluster. With `from_record`, the records saved in the run folder
    are used instead of Kafka. Without `spark`, the process's session is used (get_spark).
    Call `Judged.release()` when done with the verdict table.
    """
    from engine.metrics.session import get_spark, metrics_bootstrap

    report = progress or (lambda _what, _fraction: None)
    run = inputs or load_run_inputs(run_id)
    server = None
    if not from_record:
        server = bootstrap or metrics_bootstrap(run.recorded_bootstrap)
        if not server:
            raise MetricsError(
                f"The run {run.run_id} records no Kafka bootstrap; set LAB_METRICS_BOOTSTRAP."
            )
        _check_topics(server, [s.topic for s in run.levels], run.run_id)  # before Spark starts
    spark = spark or get_spark(spark_master, progress=lambda what, f: report(what, f * 0.5))
    report("reading the run", 0.5)
    history = read_history(spark, run.history_paths)
    known = None
    if server is None:
        uncommitted, committed = read_recorded(spark, run.run_id)
        known = {s.level: s.isolation == "read_uncommitted" for s in run.levels}
    else:
        topics = [s.topic for s in run.levels]
        uncommitted = read_kafka(spark, server, topics, "read_uncommitted")
        committed = read_kafka(spark, server, topics, "read_committed")
    report("computing", 0.6)
    try:
        judged = judge(
            uncommitted=uncommitted,
            committed=committed,
            history=history,
            levels=run.levels,
            messages=run.messages,
            uncommitted_known=known,
        )
    except Exception as exc:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        if not isinstance(exc, PySparkException | Py4JJavaError):
            raise
        # Kafka went away mid-read, or a file vanished: say so in one line.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MetricsError(
            f"Spark could not compute the metrics of {run.run_id}: {first[:300]}"
        ) from exc
    results = {
        level: {
            **{k: v for k, v in run.engine_results.get(level, {}).items() if k in CARRIED_OVER},
            **metrics,
        }
        for level, metrics in judged.results.items()
    }
    report("done", 1.0)
    return {"run_id": run.run_id, "scenario": run.scenario, "results": results}, judged


def main(argv: Sequence[str] | None = None) -> int:
    """`spark-submit engine/metrics/spark_job.py RUN_ID [--bootstrap B] [--from-record]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="spark_job.py", description=__doc__.split("\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--bootstrap", help="Kafka bootstrap (default: the run's cluster)")
    parser.add_argument("--from-record", action="store_true", help="read stored.json, not Kafka")
    args = parser.parse_args(argv)
    try:
        output, judged = run_metrics(
            args.run_id, bootstrap=args.bootstrap, from_record=args.from_record
        )
        judged.release()
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(output, indent=2, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
