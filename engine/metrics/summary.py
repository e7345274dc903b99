"""Spark's judgement of every message and its summary per level: counts, the latency
distribution and throughput, with engine.judging.checker's definitions (engine.metrics.sql holds
the SQL text)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.judging.checker import (
    REFUSAL_EVENTS,
    WRITE_REFUSED_ERRORS,
    Refusals,
    count_refusals,
)
from engine.metrics.buckets import bucket_width
from engine.metrics.inputs import PRODUCER_PROCS, SINK_PROC, LevelSpec
from engine.metrics.session import shuffle_partitions
from engine.metrics.sql import (
    SO_FAR_COUNTS,
    cached_relation,
    facts_sql,
    picks_sql,
    positions_sql,
    run_sql,
    so_far_sql,
    summary_sql,
)

THROUGHPUT_DEFINITION = (
    "Throughput counts the messages whose latency was measured (delivered and seen by the "
    "sink), from the creation of the first of them to the sink's first sight of the last "
    "one; per_bucket[k] is how many the sink saw first in the k-th bucket of bucket_s "
    "seconds of that window, a width chosen from the window's length (engine.metrics.buckets)."
)
PERCENTILES = list(range(101))  # the latency distribution: nearest-rank q = 0..100


# The verdict table's row of a ledger id that neither Kafka nor the history names (beside
# no offsets and no times): Judged.verdicts() and verdict_rows both fill it in from here.
UNNAMED: dict[str, Any] = {
    "verdict": "never sent",
    "copies": 0,
    "ack": "unsent",
    "reordered": False,
    "aborted_copies": 0,
}


@dataclass
class Judged:
    """What `judge` returns: per-level results, and the facts the verdict table comes from."""

    results: dict[str, dict[str, Any]]
    facts: DataFrame  # one cached row per (level, id) that Kafka or the history names
    records: DataFrame  # the cached record positions of both views (_positions)
    messages: int
    levels: list[LevelSpec]
    # What verdict_rows reads, collected beside the summary when judge() was asked to
    # (collect_rows): the ledger's facts, and the stored positions.
    collected: tuple[pa.Table, pa.Table] | None = None

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
            F.coalesce("verdict", F.lit(UNNAMED["verdict"])).alias("verdict"),
            F.coalesce("copies", F.lit(UNNAMED["copies"])).alias("copies"),
            F.coalesce(offsets, F.array().cast("array<string>")).alias("offsets"),
            "sent_at",
            "acked_at",
            F.coalesce("ack", F.lit(UNNAMED["ack"])).alias("ack"),
            "consumed_at",
            "latency_ms",
            F.coalesce("reordered", F.lit(UNNAMED["reordered"])).alias("reordered"),
            F.coalesce("aborted_copies", F.lit(UNNAMED["aborted_copies"])).alias("aborted_copies"),
        )

    def release(self) -> None:
        self.facts.unpersist()
        self.records.unpersist()


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
    collect_rows: bool = False,
    proxy_faults: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> Judged:
    """Judge every message of every level; the definitions are engine.judging.checker's.

    `uncommitted` and `committed` are the judged topics read at each isolation, with the
    Kafka source's columns (topic, partition, offset, value). `history` has the columns
    (level, t, proc, ev, id, ids). The ledger is ids 0..messages-1 for every level.
    The result's `facts` (one row per level and id that Kafka or the history names) and
    `records` (one per record position) stay cached until `Judged.release()`.
    Every record of `committed` must also be in `uncommitted` (as Kafka's read_committed
    view is in its read_uncommitted one): values are parsed from `uncommitted` only.
    `ranks` ("sort" or "histogram", see summary_sql) defaults by the run's size.
    With `collect_rows`, what verdict_rows needs is collected too, at the same time as the
    summary: for a run whose table is kept in memory.
    `proxy_faults` (per level) are the fault proxy's records of the brokers' answers, which
    the refusals are counted from with the history's refusal lines (refusals_of).
    """
    spark = uncommitted.sparkSession
    method = ranks or ("sort" if messages <= SORTED_RANKS_UP_TO else "histogram")
    # Shuffle partitions sized to the run: the session's setting for a class's runs (2; more
    # only add tasks, each of which deserializes its stage's plan and generates its own
    # projections: benchmarks/METRICS.md), one per 2 million rows beyond, so no task's hash
    # maps outgrow its memory.
    partitions = max(shuffle_partitions(), math.ceil(messages * len(levels) / 2_000_000))
    conf = spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        records = run_sql(
            spark, positions_sql(levels), uncommitted=uncommitted, committed=committed
        ).persist()  # planned here: its shuffle keeps `partitions`
        # The facts' shuffles are keyed by id, so their tasks are of one size: as many as
        # the task slots run in whole rounds, every core busy to the last (5 on 2 cores left
        # one core idle for 4 s at 10M messages). The positions' few keys (level,
        # partition) land where their hash puts them, so a count there decides nothing.
        conf.set("spark.sql.shuffle.partitions", str(whole_rounds(partitions, spark)))
        # What reads the cached records and facts reads their cached relations
        # (cached_relation: the driver's analysis skips re-matching their plans).
        records_read = cached_relation(records)
        facts = run_sql(
            spark,
            facts_sql(levels, producer_procs, sink_proc, messages),
            records=records_read,
            history=history,
        ).persist()
        facts_read = cached_relation(facts)
        collected = None
        if collect_rows:
            # Three jobs at once: a judgement's jobs leave the cores idle while the driver
            # plans and schedules, and two run beside it. The cached facts and positions
            # are computed once: a task that finds a cached block being computed waits for
            # it (Spark's BlockInfoManager). About 0.25 s of a class's run's 3.5-3.7 s in the
            # paired benchmark (benchmarks/METRICS.md).
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="judge") as pool:
                ledger = pool.submit(_ledger_facts, facts_read)
                stored = pool.submit(_stored_positions, records_read)
                results = _summarise(facts_read, levels, messages, uncommitted_known, method)
                collected = (ledger.result(), stored.result())
        else:
            results = _summarise(facts_read, levels, messages, uncommitted_known, method)
        refused = refusals_of(history, levels, proxy_faults or {})
    finally:
        conf.set("spark.sql.shuffle.partitions", before)
    for level, counted in refused.items():
        results[level].update(asdict(counted))
        # The total of every kind, as result.json's `fenced` (engine.judging.judge).
        results[level]["fenced"] = counted.total
    return Judged(
        results=results,
        facts=facts,
        records=records,
        messages=messages,
        levels=list(levels),
        collected=collected,
    )


def refusals_of(
    history: DataFrame,
    levels: Sequence[LevelSpec],
    proxy_faults: Mapping[str, Sequence[dict[str, Any]]],
) -> dict[str, Refusals]:
    """Each level's refusals, by the checker's own rule (engine.judging.checker.count_refusals).

    A refusal is counted from a handful of lines whatever the run's size (fences, rejected
    commits, failed deliveries with an epoch error), and from their order in time and their
    dedup across lines, which is the checker's to say once: Spark selects those lines and
    the driver counts them with that rule, so the two counts cannot drift apart.
    """
    fields = ("t", "proc", "ev", "error", "by", "reason")
    # A history written without what a refusal says (a benchmark's) has no refusal lines.
    said = [
        F.col(f) if f in history.columns else F.lit(None).cast("string").alias(f) for f in fields
    ]
    lines_of = history.select("level", *said)
    write_failures = F.col("ev").isin("fail", "output_failed")
    kept = F.col("ev").isin(*REFUSAL_EVENTS) & (
        ~write_failures | F.col("error").isin(*WRITE_REFUSED_ERRORS)
    )
    lines: dict[str, list[dict[str, Any]]] = {spec.level: [] for spec in levels}
    for row in lines_of.where(kept).collect():
        if row["level"] in lines:
            lines[row["level"]].append({k: row[k] for k in fields if row[k] is not None})
    return {
        level: count_refusals(events, proxy_faults.get(level, ()))
        for level, events in lines.items()
    }


def whole_rounds(tasks: int, spark: SparkSession) -> int:
    """`tasks` rounded up to a multiple of the session's task slots."""
    slots = max(1, spark.sparkContext.defaultParallelism)
    return math.ceil(tasks / slots) * slots


def _ledger_facts(facts: DataFrame) -> pa.Table:
    """The facts verdict_rows shows, of the ledger's ids."""
    return facts.where("in_ledger").select("level", "id", *_VERDICT_FACTS).toArrow()


def _stored_positions(records: DataFrame) -> pa.Table:
    """Every stored copy's position, for verdict_rows' offsets."""
    return records.where("stored").select("level", "id", "partition", "offset").toArrow()


def so_far(
    *, uncommitted: DataFrame, committed: DataFrame, levels: Sequence[LevelSpec], messages: int
) -> dict[str, dict[str, int]]:
    """Per level, the counts the records read so far decide (sql.so_far_sql), as
    {level: {count: n}}; a level with no record read yet has zeros. One Spark job."""
    records = run_sql(
        uncommitted.sparkSession,
        positions_sql(levels),
        uncommitted=uncommitted,
        committed=committed,
    )
    rows = run_sql(
        uncommitted.sparkSession, so_far_sql(levels, messages), records=records
    ).collect()
    counts = {s.level: dict.fromkeys(SO_FAR_COUNTS, 0) for s in levels}
    for row in rows:
        counts[row["level"]] = {k: int(row[k] or 0) for k in SO_FAR_COUNTS}
    return counts


def _rank(q: int, n: int) -> int:
    """engine.judging.checker.percentile's nearest rank of q in n sorted values."""
    return max(1, math.ceil(q / 100.0 * n))


def _summarise(
    facts: DataFrame,
    levels: Sequence[LevelSpec],
    messages: int,
    uncommitted_known: Mapping[str, bool] | None,
    ranks: str,
) -> dict[str, dict[str, Any]]:
    """Counts, the latency distribution and throughput per level (summaryrun_sql's jobs).

    Ledger ids that neither Kafka nor the history names have no row in `facts`; they are
    lost (no copy, not aborted on purpose), so they are counted as messages minus rows.
    """
    spark = facts.sparkSession
    counts: dict[str, dict[str, Any]] = {}
    ranked: dict[str, dict[int, float]] = {}
    histogram: dict[str, dict[int, int]] = {s.level: {} for s in levels}
    per_bucket: dict[str, dict[int, int]] = {s.level: {} for s in levels}
    for r in run_sql(spark, summary_sql(ranks), facts=facts).collect():
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
            # Stored but never read by the sink (a message read without a created_at has no
            # latency, yet was read: latency_count is not its complement).
            "unseen_by_sink": (c.get("delivered") or 0) - (c.get("seen_by_sink") or 0),
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
    it of every rank a percentile needs; picks_sql then sorts only those buckets.
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
    for r in run_sql(spark, picks_sql(picks, windows), facts=facts).collect():
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
    """As engine.judging.checker.latency_summary rounds: Python's round, not Spark's HALF_UP."""
    return None if x is None else round(x, 2)


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _dense(counts: Mapping[int, int]) -> list[int]:
    """{bucket: n} -> [n for bucket 0, 1, ...], with the empty buckets as 0."""
    if not counts:
        return []
    return [counts.get(k, 0) for k in range(max(counts) + 1)]


# The facts the verdict table shows, beside level and id.
_VERDICT_FACTS = (
    "verdict",
    "copies",
    "sent_at",
    "acked_at",
    "ack",
    "consumed_at",
    "latency_ms",
    "reordered",
    "aborted_copies",
)
# The verdict table's columns after level and id, in Judged.verdicts()'s order.
_ROW_FIELDS = ("verdict", "copies", "offsets", *_VERDICT_FACTS[2:])


def verdict_rows(judged: Judged) -> dict[str, list[dict[str, Any]]]:
    """Each level's verdicts as engine.judging.checker.verdicts_to_rows gives them, ordered by id.

    For a run's few thousand messages, whose table is collected whole anyway: the ledger's
    ids are filled in here from two collects of the cached facts and record positions,
    with what Judged.verdicts() gives an id that neither Kafka nor the history names. Spark
    joining them with the ledger first took three shuffles and 1.4-1.9 s of a typical run
    (4 levels x 3,000 messages) on 2 cores, against 0.6-0.9 s this way (benchmarks/
    METRICS.md). A big run's table stays a DataFrame (verdicts(), written to Parquet); the
    tests hold the two equal.
    """
    ledger, stored = judged.collected or (
        _ledger_facts(judged.facts),
        _stored_positions(judged.records),
    )
    known = {(f.pop("level"), f.pop("id")): f for f in ledger.to_pylist()}
    positions: dict[tuple[int, int], list[tuple[int, int]]] = {}
    columns = stored.to_pydict()
    for code, i, partition, offset in zip(
        columns["level"], columns["id"], columns["partition"], columns["offset"], strict=True
    ):
        positions.setdefault((code, i), []).append((partition, offset))
    out: dict[str, list[dict[str, Any]]] = {}
    for code, spec in enumerate(judged.levels):  # records number the levels in this order
        rows: list[dict[str, Any]] = []
        out[spec.level] = rows
        for i in range(judged.messages):
            fact = known.get((spec.level, i))
            if fact is None:  # an id that nothing names, as Judged.verdicts() fills it in
                fact = {**dict.fromkeys(_VERDICT_FACTS), **UNNAMED, "offsets": []}
            else:
                copies = sorted(positions.get((code, i), ()))
                fact["offsets"] = [f"{p}:{o}" for p, o in copies]
                fact["latency_ms"] = _rounded(fact["latency_ms"])
            rows.append({"id": i, **{k: fact[k] for k in _ROW_FIELDS}})
    return out


# Made-up judgements the dashboard runs after Spark starts (benchmarks/METRICS.md).
