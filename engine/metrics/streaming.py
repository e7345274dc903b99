"""Spark's metrics that follow a run: a Structured Streaming query started with the run.

A RunFollower starts one streaming query on the dashboard's SparkSession when a run
starts, over two of Spark's Kafka sources on the run's judged topics, one per isolation
level (`kafka.isolation.level`). Each micro-batch appends the records it read (isolation,
topic, partition, offset, value: the Kafka source's columns, a few bytes each) to an
in-memory table (Spark's memory sink), so that when the run ends only its last records
remain to be read. Then `finish` asks Kafka where each partition ends at each isolation
(its high watermark, its last stable offset), stops the query, reads with a batch read
whatever the query had not read up to those ends (rather than wait for its next trigger),
and hands the two views to the same judgement as the batch job (engine.metrics.summary.judge,
its SQL in engine.metrics.sql): one definition of every count, whichever way the records
were read. The run's history is read at the end from the run folder, as the batch job
reads it: it is a few hundred kilobytes.

The batch job (engine.metrics.spark_job) stays for recorded runs, replays, big runs, the
CLI, and whenever a follower could not start or finish (compute_and_save falls back to it
and says why).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.metrics.inputs import LevelSpec, MetricsError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ISOLATIONS = ("read_uncommitted", "read_committed")
# How often a query looks for new records while the run goes on. Each look is a little
# work for the driver; on 2 cores, looking more often slows the run it follows.
TRIGGER_S = 1.0


class RunFollower:
    """A streaming query over a run's judged topics; `finish` gives both views' records."""

    def __init__(
        self,
        spark: SparkSession,
        bootstrap: str,
        run_id: str,
        topics: Sequence[str],
        *,
        trigger_s: float = TRIGGER_S,
    ) -> None:
        self.spark, self.bootstrap, self.run_id = spark, bootstrap, run_id
        self.topics = sorted(set(topics))
        self.trigger_s = trigger_s
        tag = uuid.uuid4().hex[:12]
        self.table = f"lab_follow_{tag}"
        self.query: StreamingQuery | None = None
        self.patterns: dict[str, str] = {}
        self._checkpoints = tempfile.mkdtemp(prefix="lab-follow-")
        self.started_at: float | None = None
        # Records the query had read when finish() was called, and in all (both views).
        self.rows_before_end = 0
        self.rows_in_all = 0
        # How long finish()'s steps took (s): Kafka's ends asked, the leaders' epochs asked,
        # the queries stopped.
        self.timings: dict[str, float] = {}
        self._admin_client: Any = None
        # Per isolation, the partitions the queries had not read to their end when they
        # were stopped, as {"topic:partition": (read up to, end)}: finish() reads those.
        self.left_unread: dict[str, dict[str, tuple[int, int]]] = {}

    def start(self) -> RunFollower:
        """Start the query. The topics need not exist yet: they are found by name at each
        trigger (a pattern, so a topic created later is read from its start)."""
        names = "|".join(re.escape(t) for t in self.topics)
        # The same topics, written apart for each source, whose progress names its pattern.
        self.patterns = {"read_uncommitted": f"^({names})$", "read_committed": f"^(?:{names})$"}
        try:
            views = [
                self.spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribePattern", self.patterns[isolation])
                .option("startingOffsets", "earliest")
                .option("kafka.isolation.level", isolation)
                # Aborted records and transaction markers leave offset gaps.
                .option("failOnDataLoss", "false")
                # As in read_kafka: a poll past the end must not wait 500 ms for data.
                .option("kafka.fetch.max.wait.ms", "10")
                .load()
                .selectExpr(
                    f"'{isolation}' AS isolation", "topic", "`partition`", "`offset`", "value"
                )
                for isolation in ISOLATIONS
            ]
            # One query over both sources: one Spark job per trigger, not two.
            self.query = (
                views[0]
                .unionByName(views[1])
                .writeStream.format("memory")
                .queryName(self.table)
                .outputMode("append")
                .option("checkpointLocation", self._checkpoints)
                .trigger(processingTime=f"{int(self.trigger_s * 1000)} milliseconds")
                .start()
            )
        except Exception:
            self.stop()
            raise
        self.started_at = time.time()
        return self

    # ---- the end of the run -----------------------------------------------------------
    def expected_ends(self) -> dict[str, dict[tuple[str, int], int]]:
        """What Kafka holds now: per isolation, each partition's end (HW, LSO: ListOffsets at
        read_committed answers with the last stable offset, KIP-98).

        ListOffsets (latest) at each isolation level, through the follower's one AdminClient
        (leader_changes uses it too), after its metadata request: two consumers asked before,
        about 60 ms each. With an AdminClient of its own, leader_changes sometimes took 1.0
        or 3.0 s more at a run's end (benchmarks/METRICS.md; not seen with 50 new clients
        asking a quiet broker, so the cause is not known).
        """
        from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        admin = self._admin()
        levels = {
            "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
            "read_committed": IsolationLevel.READ_COMMITTED,
        }
        try:
            metadata = admin.list_topics(timeout=5)
            partitions = {
                TopicPartition(topic, p): OffsetSpec.latest()
                for topic in self.topics
                if topic in metadata.topics  # not there: a level that did not run
                for p in metadata.topics[topic].partitions
            }
            ends: dict[str, dict[tuple[str, int], int]] = {}
            for isolation in ISOLATIONS:
                ends[isolation] = {}
                if not partitions:
                    continue
                answers = admin.list_offsets(
                    partitions, isolation_level=levels[isolation], request_timeout=5
                )
                for tp, future in answers.items():
                    ends[isolation][(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as exc:
            raise MetricsError(
                f"No Kafka broker answers at {self.bootstrap} to say where the run's "
                f"topics end ({exc.args[0].str()})."
            ) from exc
        return ends

    def _admin(self) -> Any:
        """The follower's one AdminClient (confluent_kafka.admin.AdminClient)."""
        from confluent_kafka.admin import AdminClient

        if self._admin_client is None:
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin_client

    def leader_changes(self, ends: dict[str, dict[tuple[str, int], int]]) -> list[str]:
        """Of the partitions in `ends` (expected_ends()), those whose leader changed since
        they were made, as "topic:partition (leader epoch N)". A new partition's first
        leader has epoch 0.

        While its first leader leads, a partition keeps every record a reader has read: a
        leader never truncates its own log, only followers do, to the leader's (KIP-101).
        After a leader change, records already read can go: an unclean election, or the last
        in-sync replica back with an empty disk (the lab's unclean-election and
        leader-disk-lost scenarios, tests/integration/test_replication_truths.py). The
        streaming query reads on past such a loss without noticing (failOnDataLoss is off for
        the offset gaps of transactions), so its copy would count records Kafka no longer
        holds. ListOffsets (latest) returns, with the log's end, the latest epoch of the
        leader's epoch cache (UnifiedLog.fetchOffsetByTimestamp), to which a broker adds its
        epoch when it becomes leader (Partition.makeLeader).
        """
        from confluent_kafka import KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        partitions = {
            TopicPartition(topic, p): OffsetSpec.latest()
            for topic, p in sorted({tp for by_partition in ends.values() for tp in by_partition})
        }
        if not partitions:
            return []
        admin = self._admin()
        changed = []
        try:
            for tp, future in admin.list_offsets(partitions, request_timeout=5).items():
                epoch = future.result().leader_epoch
                if epoch != 0:  # None (unknown) counts as changed: be safe
                    changed.append(f"{tp.topic}:{tp.partition} (leader epoch {epoch})")
        except KafkaException as exc:
            raise MetricsError(
                f"No Kafka broker answers at {self.bootstrap} to give the run's partitions' "
                f"leader epochs ({exc.args[0].str()})."
            ) from exc
        return sorted(changed)

    def read_up_to(self) -> dict[str, dict[tuple[str, int], int]]:
        """Per isolation, the offset the query has read up to (its last batch's end)."""
        out: dict[str, dict[tuple[str, int], int]] = {isolation: {} for isolation in ISOLATIONS}
        # The JVM's JSON of the progress: PySpark's object gives the offsets as a repr.
        last = self.query._jsq.lastProgress() if self.query is not None else None
        progress = json.loads(last.json()) if last is not None else {}
        for source in progress.get("sources") or []:
            described = str(source.get("description"))
            isolation = next((i for i, p in self.patterns.items() if f"[{p}]" in described), None)
            if isolation is None:
                continue
            offsets = source.get("endOffset") or {}
            if isinstance(offsets, str):
                offsets = json.loads(offsets)
            for topic, partitions in offsets.items():
                for p, offset in partitions.items():
                    out[isolation][(topic, int(p))] = int(offset)
        return out

    def finish(self) -> tuple[DataFrame, DataFrame]:
        """(uncommitted, committed): every record of the topics up to Kafka's ends, what the
        queries read and a batch read of what they had not.

        The queries are stopped first, so that no micro-batch adds records after the
        offsets they read up to are taken. Waiting for their last micro-batches instead
        (processAllAvailable) waited for the next trigger: 1.0-1.6 s in most runs
        (benchmarks/METRICS.md). A record in both, if a stop lands between a micro-batch
        and its progress, counts once: the judgement merges each view's records by position
        (engine.metrics.sql.positions_sql).
        Raises MetricsError if a partition's leader changed during the run (leader_changes)
        or if a query failed (the caller then falls back to the batch job).
        """
        from engine.metrics.inputs import read_kafka_range

        if self.query is None:
            raise MetricsError("Spark's streaming query was not started.")
        self.rows_before_end = self.rows_read()
        began = time.perf_counter()
        expected = self.expected_ends()
        self.timings["ends"] = time.perf_counter() - began
        changed = self.leader_changes(expected)
        self.timings["epochs"] = time.perf_counter() - began - self.timings["ends"]
        if changed:
            raise MetricsError(
                f"The leader of {', '.join(changed[:3])} changed during the run, and after a "
                "leader change Kafka can lose records a reader had already read (KIP-101; "
                "the lab's leader-disk-lost and unclean-election scenarios): the records the "
                "queries read may no longer be what Kafka holds."
            )
        # After the leaders' check: a query that failed while a partition had no leader
        # gives a lesser reason than the leader change itself.
        if self.query.exception() is not None:
            raise MetricsError(
                f"Spark's streaming query stopped: {_first_line(self.query.exception())}"
            )
        stopping = time.perf_counter()
        self.stop_queries()
        self.timings["stop"] = time.perf_counter() - stopping
        self.rows_in_all = self.rows_read()
        read = self.read_up_to()
        table = self.spark.table(self.table)
        views = []
        self.left_unread = {}
        for isolation in ISOLATIONS:
            frame = table.where(f"isolation = '{isolation}'").drop("isolation")
            left = {
                key: (read[isolation].get(key, 0), end)
                for key, end in expected[isolation].items()
                if read[isolation].get(key, 0) < end
            }
            if left:
                tail = read_kafka_range(self.spark, self.bootstrap, left, isolation)
                frame = frame.unionByName(tail)
            self.left_unread[isolation] = {f"{t}:{p}": span for (t, p), span in left.items()}
            views.append(frame)
        return views[0], views[1]

    def rows_read(self) -> int:
        """Records the query has read so far (their micro-batches' input rows)."""
        if self.query is None:
            return 0
        return sum(int(p.numInputRows or 0) for p in self.query.recentProgress)

    def stop_queries(self) -> None:
        if self.query is not None:
            with contextlib.suppress(Exception):  # a failed query: nothing more to do
                self.query.stop()

    def stop(self, *, wait: bool = True) -> None:
        """Stop the query and forget its table and checkpoints.

        With `wait=False` this happens in a thread of its own: a query whose broker died
        stops only when its Kafka call gives up (the clients' default.api.timeout.ms, a
        minute), and the batch job that takes over need not wait for that. The query keeps
        the clients' default timeouts so that it follows a run through a leader's absence.
        """
        if not wait:
            threading.Thread(target=self.stop, name=f"stop-{self.table}", daemon=True).start()
            return
        self.stop_queries()
        catalog = self.spark._jsparkSession.sessionState().catalog()
        catalog.dropTempView(self.table)  # directly, as run_sql does: no uncaching by name
        shutil.rmtree(self._checkpoints, ignore_errors=True)


def _first_line(exc: BaseException | Any) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def level_specs(
    run_id: str, levels: Sequence[str], pipeline: str, chosen_isolation: str | None = None
) -> list[LevelSpec]:
    """The levels as the judgement names them, known before the run has a result: each
    level's judged topic, and its sink's isolation (engine.run.level_run.LevelRun; the
    scenario's sink_isolation where it chose one)."""
    from engine.model.levels import LEVELS
    from engine.run.level_run import judged_topic_name, sink_isolation

    return [
        LevelSpec(
            name,
            judged_topic_name(run_id, name, pipeline),
            sink_isolation(LEVELS[name], chosen_isolation),
        )
        for name in levels
    ]


# A page asking more often than this gets the counts computed last (one Spark job each).
SO_FAR_EVERY_S = 2.0


@dataclass(frozen=True)
class SoFar:
    """What a followed run's records read so far say, per level (summary.so_far's counts)."""

    messages: int
    at: float  # when the counts were computed (epoch seconds)
    rows_read: int  # records the queries had read, both isolations
    counts: dict[str, dict[str, int]]


class LiveRun:
    """A run being followed, for pages to show what Spark has read of it so far."""

    def __init__(
        self, follower: RunFollower, levels: list[LevelSpec], messages: int, scenario: str
    ) -> None:
        self.follower, self.levels, self.messages = follower, levels, messages
        self.scenario = scenario
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._last: SoFar | None = None

    def so_far(self) -> SoFar | None:
        """The latest counts, computed now unless they are fresh; None before any record
        was read or if Spark cannot count (the run goes on, and the final metrics come)."""
        from engine.metrics.summary import so_far

        with self._lock:  # one page computes; the others wait for its counts
            last = self._last
            if last is not None and time.time() - last.at < SO_FAR_EVERY_S:
                return last
            follower = self.follower
            try:
                rows = follower.rows_read()
                if rows == 0:
                    return None
                table = follower.spark.table(follower.table)
                uncommitted, committed = (
                    table.where(f"isolation = '{isolation}'").drop("isolation")
                    for isolation in ISOLATIONS
                )
                counts = so_far(
                    uncommitted=uncommitted,
                    committed=committed,
                    levels=self.levels,
                    messages=self.messages,
                )
            except Exception:  # the query stopped or its table is gone: the run ended
                return last
            self._last = SoFar(self.messages, time.time(), rows, counts)
            return self._last

    def latest(self) -> SoFar | None:
        """The counts computed last, without computing (for sessions that make Spark no work)."""
        with self._lock:
            return self._last


# ---- the dashboard's followers, by run ------------------------------------------------
_lock = threading.Lock()
_live: dict[str, LiveRun] = {}  # run id -> its follower, while the run runs
_finishing: dict[str, Future[dict[str, Any] | None]] = {}
_not_followed: dict[str, str] = {}  # run id -> why its streaming queries did not start


def start_following(
    spark: SparkSession,
    bootstrap: str,
    run_id: str,
    levels: Sequence[str],
    pipeline: str,
    *,
    trigger_s: float = TRIGGER_S,
    messages: int | None = None,
    scenario: str = "",
    sink_isolation: str | None = None,
) -> RunFollower:
    """Start following a run's judged topics (raises what Spark raised if it cannot).

    With `messages` (the workload's), pages can show the run's counts so far (live_runs)
    until finish_in_background or abandon.
    """
    specs = level_specs(run_id, levels, pipeline, sink_isolation)
    topics = [s.topic for s in specs]
    follower = RunFollower(spark, bootstrap, run_id, topics, trigger_s=trigger_s).start()
    if messages is not None:
        with _lock:
            _live[run_id] = LiveRun(follower, specs, messages, scenario)
    return follower


def live_runs() -> list[LiveRun]:
    """The runs being followed now, the latest first."""
    with _lock:
        return sorted(_live.values(), key=lambda r: r.started_at, reverse=True)


def is_live(run_id: str) -> bool:
    """Whether the run is followed now: its final numbers come when its follower finishes."""
    with _lock:
        return run_id in _live


def finish_in_background(follower: RunFollower) -> Future[dict[str, Any] | None]:
    """Compute and save the followed run's metrics in a thread; the Future holds them.

    Pages that want the run's metrics wait for it (wait_for_followed) before computing
    them with the batch job.
    """
    from engine.metrics.compute import compute_and_save

    future: Future[dict[str, Any] | None] = Future()
    future.set_running_or_notify_cancel()
    with _lock:
        _finishing[follower.run_id] = future
        _live.pop(follower.run_id, None)

    def run() -> None:
        try:
            future.set_result(compute_and_save(follower.run_id, follower=follower))
        except BaseException as exc:  # the page then computes with the batch job
            future.set_exception(exc)

    threading.Thread(target=run, name=f"metrics-follow-{follower.run_id}", daemon=True).start()
    return future


def abandon(follower: RunFollower) -> None:
    """The run failed: stop following it."""
    with _lock:
        _live.pop(follower.run_id, None)
    with contextlib.suppress(Exception):
        follower.stop()


def wait_for_followed(run_id: str, timeout: float = 60.0) -> None:
    """If the run's metrics are being finished by its follower, wait until they are."""
    with _lock:
        future = _finishing.get(run_id)
    if future is not None:
        with contextlib.suppress(TimeoutError):
            future.exception(timeout=timeout)


def not_followed(run_id: str, exc: BaseException) -> None:
    """Keep why a run's streaming queries did not start, for the Metrics page to say."""
    with _lock:
        _not_followed[run_id] = (
            f"Spark's streaming queries could not follow this run ({_first_line(exc)})."
        )


def why_not_followed(run_id: str) -> str | None:
    with _lock:
        return _not_followed.get(run_id)


def followed(run_id: str) -> bool:
    with _lock:
        return run_id in _finishing
