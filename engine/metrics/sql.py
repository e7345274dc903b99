"""The SQL text of Spark's judgement: each level's record positions, the facts per message
id, the summary and the picks (engine.metrics.summary runs them)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.metrics.buckets import width_sql
from engine.metrics.inputs import LevelSpec


# ---- the judgement --------------------------------------------------------------------
# The judgement is three SQL texts, one spark.sql call each: building it column by column
# through the DataFrame API took about 4,400 calls into the JVM, each analysing the plan it
# extended (about 1 s of a 3,000-message run's metrics). The DataFrames they read are
# named {name} in the text and bound by run_sql.
def _sql_str(text: str) -> str:
    """A Spark SQL string literal of `text`, with braces doubled for runrun_sql's str.format."""
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return quoted.replace("{", "{{").replace("}", "}}")


def run_sql(spark: SparkSession, text: str, **views: DataFrame) -> DataFrame:
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


def cached_relation(frame: DataFrame) -> DataFrame:
    """A persisted `frame` as a DataFrame whose plan is its cached relation alone.

    SQL bound to a persisted DataFrame is analysed over the DataFrame's whole plan, and the
    analyser then matches that plan against every cached one (Spark's
    CacheManager.useCachedData) only to put the cached relation in its place. For the
    judgement's facts (the positions' and the history's plans beneath them) that took
    0.26-0.92 s of the driver per judgement on 2 cores, beside the jobs it should be
    scheduling (benchmarks/METRICS.md). Bound to the cached relation itself, the plan is
    the one that step would have made, without the step. Spark has no public call for it:
    CacheManager.lookupCachedData is the look-up that step makes for each part of a plan,
    and Dataset.ofRows makes a DataFrame of a plan. A frame that is not cached is returned
    as it is.
    """
    spark = frame.sparkSession
    session = spark._jsparkSession
    cached = session.sharedState().cacheManager().lookupCachedData(frame._jdf)
    if cached.isEmpty():
        return frame
    relation = cached.get().cachedRepresentation()
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, relation)
    return DataFrame(jdf, spark)


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


# A value exactly as engine.base.values.value_maker writes it: compact JSON, an integer id
# of at most 18 digits (a long), a JSON number created_at, then run, level and by (and a
# pad of x's) as strings of printable ASCII without escapes. For such a value, from_json
# gives id and created_at as the text between ':' and ','; reading them so took 7.0 s
# against 12.1 s for 5 million values (benchmarks/METRICS.md). RLIKE finds, so the
# pattern is anchored at both ends (\z: `$` would also match before a final newline).
# Printable ASCII only: bytes that are not UTF-8 become U+FFFD in the Java string RLIKE
# reads, which must not match here (from_json is not even asked about such a value).
_STRING = '"[ !#-\\[\\]-~]*"'
_MADE_BY_THE_LAB = (
    '^\\{"id":-?(?:0|[1-9][0-9]{0,17}),'
    '"created_at":-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?,'
    f'"run":{_STRING},"level":{_STRING},"by":{_STRING}(?:,"pad":"x*")?\\}}\\z'
)


def _value_sql(text: str) -> str:
    """The struct (id, created_at) of a record value's text `text`, as
    `from_json(text, 'id BIGINT, created_at DOUBLE')` gives it, or NULL for a value that is
    not UTF-8: the lab's own values are cut apart, any other is parsed as JSON."""
    first = f"substring_index(substring_index({text}, ',', 1), ':', -1)"
    second = f"substring_index(substring_index({text}, ',', 2), ':', -1)"
    return f"""CASE WHEN {text} RLIKE {_sql_str(_MADE_BY_THE_LAB)}
                THEN named_struct('id', CAST({first} AS BIGINT),
                                  'created_at', CAST({second} AS DOUBLE))
                WHEN is_valid_utf8({text})
                THEN from_json({text}, 'id BIGINT, created_at DOUBLE') END"""


# (partition, offset) as one orderable long: Kafka partitions stay below 2^21 and offsets
# below 2^42 (4.4 trillion) in any cluster this lab reads.
_OFFSET_BITS = 1 << 42


def positions_sql(levels: Sequence[LevelSpec]) -> str:
    """One row per record position of each level's topic, with what each view holds there.

    Columns: level (its place in `levels`), partition, offset, id, created_at, stored (in
    the level's own view),
    aborted (stored, but not in the read_committed view), hidden (in the read_uncommitted
    view, not in the read_committed one) and highest (the largest id stored before it in
    its partition, at least -1). Both views go through one shuffle by (level, partition);
    the aggregation and the window refine that partitioning, so no other exchange.
    Like engine.base.values.parse_value, a value that is not a JSON object with an integer
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
           {_value_sql("text")} AS v
    FROM (SELECT topic, `partition`, `offset`, CAST(value AS STRING) AS text
          FROM {{uncommitted}})
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


# The counts so_far_sql gives per level, in its order.
SO_FAR_COUNTS = (
    "delivered",
    "duplicates",
    "duplicated_messages",
    "aborted_visible",
)


def so_far_sql(levels: Sequence[LevelSpec], messages: int) -> str:
    """Per level, the counts that records alone decide, over the positions read so far.

    `{records}` is positions_sql's table. These are the summary's definitions (facts_sql's
    copies are an id's stored positions; summary_sql counts ledger ids) restricted to the
    records read: delivered (ids with a stored copy), duplicates (stored copies beyond each
    id's first), duplicated_messages (ids with more than one) and aborted_visible (stored
    copies of aborted transactions). Losses and latencies need the history and the run's
    end, so they are not among them. Once every record is read, the counts are the run's.
    """
    name = _sql_codes("level", {k: s.level for k, s in enumerate(levels)})
    return f"""
WITH ids AS (
    SELECT level, id, sum(CAST(stored AS BIGINT)) AS copies,
           sum(CAST(aborted AS BIGINT)) AS aborted
    FROM {{records}} WHERE id BETWEEN 0 AND {messages - 1} GROUP BY level, id
)
SELECT {name} AS level, sum(CAST(copies > 0 AS BIGINT)) AS delivered,
       sum(greatest(copies - 1, 0)) AS duplicates,
       sum(CAST(copies > 1 AS BIGINT)) AS duplicated_messages,
       sum(aborted) AS aborted_visible
FROM ids GROUP BY level
"""


def facts_sql(
    levels: Sequence[LevelSpec], producer_procs: Sequence[str], sink_proc: str, messages: int
) -> str:
    """One row per level and id that Kafka or the history names, with the checker's verdict.

    Per level, partition and id the records give: copies, the first copy, aborted and hidden
    copies, and whether the id is reordered in that partition
    (engine.judging.checker.reordered_ids).
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
    ev_codes = {"send": 1, "ack": 2, "consumed": 3, "fail": 4}
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
    -- group_committed has a row per level and partition, but Spark sizes it by the
    -- history it reads: past its 10 MB size estimate it chose a sort-merge join, which shuffled
    -- every fact by a partition that is NULL for all but a pipeline's ids, so one task
    -- sorted them all (18 s of 79 s at 10M messages, benchmarks/METRICS.md).
    SELECT /*+ BROADCAST(g) */ f.*, coalesce(f.in_offset >= g.committed, FALSE) AS pending
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
    "latency_count",
    "seen_by_sink",
    "window_start",
    "window_end",
)


def summary_sql(ranks: str) -> str:
    """Counts, the latency ranks the percentiles need and throughput per bucket, one job.

    Nearest rank, exactly as engine.judging.checker.percentile: the value at rank
    max(1, ceil(q / 100.0 * n)) of the sorted latencies, for q = 0..100.

    ranks="sort" (runs of a class's size): the rows of each level are sorted in one task,
    and a row of rank r is kept when some q maps to r; that q lies within one of
    floor(100 r / n) (the double arithmetic is Python's, so the check is exact), so three
    candidates are tried per row. The rank and per-bucket branches read one shuffle of the
    timed rows by level.

    ranks="histogram" (big runs): no sort and no shuffle of the rows; each level's latencies
    are counted per _LATENCY_BUCKET instead, and picks_sql, knowing from those counts which
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
        "latency_count": count_if(f"{lat} IS NOT NULL"),
        # Stored and read by the sink, with or without a latency (a value without its
        # created_at has none): the checker's complement of unseen_by_sink.
        "seen_by_sink": count_if("copies > 0 AND consumed_at IS NOT NULL"),
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


def picks_sql(
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
