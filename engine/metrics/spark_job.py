"""The metrics of a recorded run, computed by Spark from what Kafka holds.

For each level of a run, the job reads the judged topic (`sink_topic` in result.json) in
batch mode with Spark's Kafka source, at read_uncommitted and at read_committed, through the
cluster's direct listener. It joins those records with the run's ledger (ids
0..messages-1) and each level's history.jsonl, and judges every message with the
definitions of engine/judging/checker.py, so its counts equal the checker's:

- copies: records of an id at the level's isolation; delivered: ids with a copy;
  duplicates: copies beyond the first, summed; lost: no copy, unless the workload aborted
  the id on purpose ("aborted, as intended"), no producer ever sent it ("never sent"), or
  its input is at or past the processor group's committed offset at the end ("not
  processed yet": the work was not done, and a restarted processor would do it);
- reordered: within a partition, in offset order, an id with a copy (any copy, retries too)
  stored after a copy of a larger id;
- aborted_visible: copies at the level's isolation that read_committed does not show;
- latency: the sink's first `consumed` of an id minus `created_at` of its first copy (by
  partition, then offset); percentiles by nearest rank (engine.judging.checker.LATENCY_DEFINITION).

History events are time-ordered (engine.model.history.merge writes them so), so an id's "first"
send, ack or consumption is its earliest.

Run it as `python -m engine metrics RUN_ID --json`, or as
`spark-submit --jars JARS engine/metrics/spark_job.py RUN_ID [--bootstrap HOST:PORT]` with
JARS the comma-separated jars in .cache/spark-kafka/VERSION/jars (spark-submit starts the
driver JVM before this file can add them; without them it says so, naming the jars). Both
print {"run_id", "scenario", "results"}.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import DataFrame, SparkSession

from engine.base.errors import LabError
from engine.judging.checker import LATENCY_DEFINITION
from engine.metrics.inputs import (
    HISTORY_SCHEMA,
    KAFKA_SCHEMA,
    PRODUCER_PROCS,
    LevelSpec,
    MetricsError,
    RunInputs,
    load_run_inputs,
    read_history,
    read_kafka,
    read_recorded,
)
from engine.metrics.summary import (
    PERCENTILES,
    THROUGHPUT_DEFINITION,
    Judged,
    judge,
    verdict_rows,
)
from engine.metrics.verdict_table import rows_in_memory
from engine.metrics.warm_up import WARM_UP_TOPIC, warm_up_judgement

if TYPE_CHECKING:
    from engine.metrics.session import Progress

# The job's own names, and those benchmarks/ and the tests take from it (their homes: the
# input loading in engine.metrics.inputs, the judgement in .summary (its SQL text in .sql),
# the warm-up in .warm_up).
__all__ = [
    "HISTORY_SCHEMA",
    "KAFKA_SCHEMA",
    "LATENCY_DEFINITION",
    "PERCENTILES",
    "PRODUCER_PROCS",
    "THROUGHPUT_DEFINITION",
    "WARM_UP_TOPIC",
    "Judged",
    "LevelSpec",
    "MetricsError",
    "RunInputs",
    "judge",
    "load_run_inputs",
    "main",
    "read_history",
    "read_kafka",
    "read_recorded",
    "run_metrics",
    "verdict_rows",
    "warm_up_judgement",
]


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
    # A read_committed level's topic as a read_uncommitted reader counts it (engine.judging.judge,
    # UncommittedReader): counted by the checker from the same read, equal to kcat's count
    # at read_uncommitted (tests/integration/test_streams.py).
    "read_uncommitted_duplicates",
    "read_uncommitted_aborted",
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
    records: tuple[DataFrame, DataFrame] | None = None,
) -> tuple[dict[str, Any], Judged]:
    """Compute a recorded run's metrics; returns ({"run_id", "scenario", "results"}, Judged).

    Kafka is read through `bootstrap`, else LAB_METRICS_BOOTSTRAP, else the direct bootstrap
    recorded for the run's cluster. With `from_record`, the records saved in the run folder
    are used instead of Kafka. Without `spark`, the process's session is used (get_spark).
    With `records` (uncommitted, committed), the run's records were read already (by the
    streaming queries that followed the run, engine.metrics.streaming): no Kafka read.
    Call `Judged.release()` when done with the verdict table.
    """
    from engine.metrics.session import get_spark, metrics_bootstrap

    report = progress or (lambda _what, _fraction: None)
    run = inputs or load_run_inputs(run_id)
    server = None
    if not from_record and records is None:
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
    if records is not None:
        uncommitted, committed = records
    elif server is None:
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
            # The verdict table of a run kept in metrics.json is collected with the summary.
            collect_rows=run.messages * len(run.levels) <= rows_in_memory(),
            proxy_faults=run.proxy_faults,
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
