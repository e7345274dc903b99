"""What the metrics job reads of a run: its record (levels, topics, histories) and Kafka's
records, as Spark DataFrames with the schemas the judgement expects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from engine.base.errors import LabError
from engine.model.history import history_columns
from engine.run import record

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
# The history fields the definitions use, as the lab writes their Parquet copy
# (engine.model.history.history_columns: one list of fields and types for both ways of reading).
HISTORY_SCHEMA = from_arrow_schema(history_columns())
PRODUCER_PROCS = ("producer", "source")  # as engine.run.runner passes them to the checker
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

    @property
    def proxy_faults(self) -> dict[str, list[dict[str, Any]]]:
        """Each level's fault proxy records (the brokers' answers it saw), as its result
        keeps them among its faults: what the refusals are counted from besides the history."""
        return {
            level: [f for f in r.get("faults", []) if f.get("source") == "proxy"]
            for level, r in self.engine_results.items()
        }


# ---- inputs ---------------------------------------------------------------------------
def load_run_inputs(run_id: str) -> RunInputs:
    """What the job needs from runs/RUN_ID/; RunNotFoundError if there is no such run."""
    folder = record.run_folder(run_id)
    if not folder.is_dir():
        raise record.RunNotFoundError(
            f"There is no run '{run_id}' in {folder.parent}. `python -m engine runs` lists them."
        )
    try:
        config = json.loads((folder / record.CONFIG).read_text())
        result = json.loads((folder / record.RESULT).read_text())
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
        history_paths={
            name: record.level_folder(folder, name) / record.HISTORY for name in results
        },
        recorded_bootstrap=config.get("cluster", {}).get("direct_bootstrap"),
        engine_results=results,
    )


def read_kafka(
    spark: SparkSession, bootstrap: str, topics: Iterable[str], isolation: str
) -> DataFrame:
    """Every record of `topics` from the start to the end, at an isolation level (batch)."""
    return (
        _kafka_reader(spark, bootstrap, isolation)
        .option("subscribe", ",".join(sorted(set(topics))))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select("topic", "partition", "offset", "value")
    )


def read_kafka_range(
    spark: SparkSession,
    bootstrap: str,
    ranges: Mapping[tuple[str, int], tuple[int, int]],
    isolation: str,
) -> DataFrame:
    """The records of each (topic, partition) in `ranges` from its first offset up to, not
    including, its end, at an isolation level (batch)."""
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, partition), (start, end) in sorted(ranges.items()):
        starting.setdefault(topic, {})[str(partition)] = start
        ending.setdefault(topic, {})[str(partition)] = end
    assigned = {topic: [int(p) for p in by_partition] for topic, by_partition in starting.items()}
    return (
        _kafka_reader(spark, bootstrap, isolation)
        .option("assign", json.dumps(assigned))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
        .select("topic", "partition", "offset", "value")
    )


def _kafka_reader(spark: SparkSession, bootstrap: str, isolation: str) -> DataFrameReader:
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", isolation)
        # Aborted records and transaction markers leave offset gaps; they are not data loss.
        .option("failOnDataLoss", "false")
        # A task's last poll reaches past what the topic holds, and the broker would hold it
        # for fetch.max.wait.ms (500 ms) waiting for data that never comes: 4x the read time.
        .option("kafka.fetch.max.wait.ms", "10")
    )


def read_history(spark: SparkSession, history_paths: Mapping[str, Path]) -> DataFrame:
    """Each level's history as rows (level, then engine.model.history.history_columns' fields).

    From the Parquet copy beside each history.jsonl when every level has one (runs recorded
    since engine.model.history.write_columns; 0.3 s less of a class's run's judgement,
    benchmarks/METRICS.md), else from the JSON, with the same columns and values.
    """
    missing = [str(p) for p in history_paths.values() if not Path(p).exists()]
    if missing:
        raise record.CorruptRunError(f"The run's history is missing: {', '.join(missing)}.")
    copies = [str(Path(p).with_name(record.HISTORY_COLUMNS)) for p in history_paths.values()]
    reader = spark.read.schema(HISTORY_SCHEMA)
    if all(Path(c).exists() for c in copies):
        frame, name = reader.parquet(*copies), record.HISTORY_COLUMNS
    else:
        frame, name = reader.json([str(p) for p in history_paths.values()]), record.HISTORY
    # The level is the name of the folder above the file (levels/LEVEL/).
    level = F.regexp_extract(
        F.col("_metadata.file_path"), rf"/levels/([^/]+)/{re.escape(name)}$", 1
    )
    return frame.select(level.alias("level"), *HISTORY_SCHEMA.fieldNames())


def read_recorded(spark: SparkSession, run_id: str) -> tuple[DataFrame, DataFrame]:
    """The records saved in stored.json, shaped like read_kafka's (uncommitted, committed).

    stored.json keeps the level's view and the read_committed view; for a read_committed
    level both are the read_committed view, so that level's aborted_at_read_uncommitted
    cannot be known from the record and is reported as None.
    """
    run = record.load_run(run_id)
    rows: dict[str, list[tuple[Any, ...]]] = {"read_uncommitted": [], "read_committed": []}
    for level, data in run.levels.items():
        topic = run.results[level]["sink_topic"]
        stored = data.stored
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
