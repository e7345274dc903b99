"""Property tests: Spark and the plain-Python reference recover what synthetic runs hold.

Hypothesis builds runs as rows with the columns Spark's Kafka source gives (topic,
partition, offset, value) and history events as engine.model.history.merge writes them, so no
Kafka is needed. Two properties:

- planted: duplicates, losses, reorders and aborted records placed on purpose are found
  exactly, by both implementations;
- messy: on arbitrary records (garbage values, ids outside the ledger, copies spread over
  partitions, aborted copies anywhere) both implementations agree on every field and
  every verdict.

Each example is one Spark judgement, whose cost is per job and per plan rather than per row
(benchmarks/METRICS.md, "The floor"). Levels never meet in a judgement (every fact is keyed
by its level), so each example holds many independent levels and the examples are few: 6
of up to 11 or 13 levels check as many levels per run of the suite (a median of 28 and 40,
counted over 20 runs of each strategy) as 15 of up to 3 or 4 did (27 and 35), in 20-21 s
for both properties against 45 s (paired runs on one machine).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.metrics.inputs import HISTORY_SCHEMA, KAFKA_SCHEMA, LevelSpec
from engine.metrics.summary import Judged, judge, verdict_rows
from tests.metrics import reference

SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Both ways of finding latency ranks: sorting (a class's runs) and the histogram of big runs.
RANKS = st.sampled_from(["sort", "histogram"])
T0 = 1000.0  # times are multiples of 1/8 s from here: exact in binary, so latencies are too


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


@dataclass
class Synthetic:
    messages: int
    levels: list[LevelSpec] = field(default_factory=list)
    uncommitted: list[tuple[str, int, int, bytes | None]] = field(default_factory=list)
    committed: list[tuple[str, int, int, bytes | None]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    # The fault proxy's records per level (the brokers' answers the refusals are counted from).
    proxy: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    ranks: str = "sort"  # how Spark finds the latency ranks (engine.metrics.sql.summary_sql)
    collect_rows: bool = False  # the verdict table collected beside the summary, or after

    def add_record(
        self, topic: str, partition: int, offset: int, value: bytes | None, *, aborted: bool
    ) -> None:
        row = (topic, partition, offset, value)
        self.uncommitted.append(row)
        if not aborted:
            self.committed.append(row)


def value(message_id: Any, created_at: float | None, level: str) -> bytes:
    """A record value as engine.base.values.value_maker writes it."""
    body = {"id": message_id, "created_at": created_at, "run": "synthetic", "level": level}
    return json.dumps({**body, "by": "producer"}, separators=(",", ":")).encode()


def history_rows(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    names = ["level", *HISTORY_SCHEMA.fieldNames()]
    return [tuple(e.get(n) for n in names) for e in events]


def judged_by_spark(spark: Any, run: Synthetic) -> Judged:
    """Spark's judgement of a synthetic run; the caller releases it."""
    history_schema = "level string, " + ", ".join(
        f"{f.name} {f.dataType.simpleString()}" for f in HISTORY_SCHEMA.fields
    )
    # engine.model.history.merge sorts every run's events by time; so do the synthetic ones.
    events = sorted(run.history, key=lambda e: e["t"])
    return judge(
        uncommitted=spark.createDataFrame(run.uncommitted, KAFKA_SCHEMA),
        committed=spark.createDataFrame(run.committed, KAFKA_SCHEMA),
        history=spark.createDataFrame(history_rows(events), history_schema),
        levels=run.levels,
        messages=run.messages,
        ranks=run.ranks,
        collect_rows=run.collect_rows,
        proxy_faults=run.proxy,
    )


def run_spark(spark: Any, run: Synthetic) -> tuple[dict[str, Any], dict[str, Any]]:
    judged = judged_by_spark(spark, run)
    try:
        return judged.results, verdict_rows(judged)
    finally:
        judged.release()


def run_reference(run: Synthetic) -> tuple[dict[str, Any], dict[str, Any]]:
    return reference.judge(
        uncommitted=run.uncommitted,
        committed=run.committed,
        history=sorted(run.history, key=lambda e: e["t"]),
        levels=run.levels,
        messages=run.messages,
        proxy_faults=run.proxy,
    )


# ---- planted runs ---------------------------------------------------------------------
FATE = st.fixed_dictionaries(
    {
        "copies": st.integers(0, 3),  # committed copies
        "retry_at_end": st.booleans(),  # a further copy at the very end (a late retry)
        "abort": st.sampled_from(["none", "none", "by-design", "retried"]),
        "late": st.booleans(),  # written after every on-time message of its partition
        "partition": st.integers(0, 2),  # modulo the run's partition count
        "latency_eighths": st.integers(1, 80),
        "ack": st.sampled_from(["acked", "acked", "failed", "unacked", "unsent"]),
    }
)


@st.composite
def planted_runs(draw: st.DrawFn) -> Synthetic:
    messages = draw(st.integers(1, 25))
    partitions = draw(st.integers(1, 3))
    run = Synthetic(messages=messages, ranks=draw(RANKS))
    for k in range(draw(st.integers(1, 11))):
        isolation = draw(st.sampled_from(["read_uncommitted", "read_committed"]))
        spec = LevelSpec(
            level=f"level-{k}", topic=f"lab.synthetic.level-{k}.out", isolation=isolation
        )
        run.levels.append(spec)
        fates = draw(st.lists(FATE, min_size=messages, max_size=messages))
        # (writes, offset commits, transaction calls) refused
        refused = draw(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 1)))
        plant(run, spec, fates, partitions, refused)
    return run


def plant(
    run: Synthetic,
    spec: LevelSpec,
    fates: list[dict[str, Any]],
    partitions: int,
    refused: tuple[int, int, int],
) -> None:
    """Write one level's records and history from each message's fate; note what to expect."""
    committed_only = spec.isolation == "read_committed"
    logs: dict[int, list[tuple[int, bool]]] = {p: [] for p in range(partitions)}  # (id, aborted)
    fates = [dict(f) for f in fates]
    for fate in fates:
        if fate["abort"] == "by-design":
            fate["copies"] = 0
        # Only a second copy may go last (a retry stored after everything else).
        fate["retry_at_end"] = fate["retry_at_end"] and fate["copies"] >= 2
    for stage in ("on time", "late", "retries"):
        for message_id, fate in enumerate(fates):
            if stage == "retries":
                copies = [False] if fate["retry_at_end"] else []
            elif fate["late"] != (stage == "late"):
                continue
            else:
                copies = [False] * (fate["copies"] - fate["retry_at_end"])
                if fate["abort"] != "none":
                    copies.insert(0, True)  # the aborted attempt came first
            logs[fate["partition"] % partitions] += [(message_id, aborted) for aborted in copies]

    visible: dict[int, int] = {}
    events: list[dict[str, Any]] = []
    for partition, log in logs.items():
        offset = 0
        for message_id, aborted in log:
            created = T0 + message_id / 8
            run.add_record(
                spec.topic,
                partition,
                offset,
                value(message_id, created, spec.level),
                aborted=aborted,
            )
            offset += 2 if aborted else 1  # an abort marker follows an aborted record
            if not (aborted and committed_only):
                visible[message_id] = visible.get(message_id, 0) + 1
        # Garbage the checker must ignore: a tombstone, a non-JSON value, a value with no id,
        # an id outside the ledger; last, so they cannot reorder anything.
        for raw in (None, b"not json", b'{"created_at": 1.0}', value(10_000, T0, spec.level)):
            run.add_record(spec.topic, partition, offset, raw, aborted=False)
            offset += 1

    latencies = []
    for message_id, fate in enumerate(fates):
        created = T0 + message_id / 8
        if fate["ack"] != "unsent":
            events.append({"t": created, "proc": "producer", "ev": "send", "id": message_id})
        if fate["ack"] in ("acked", "failed"):
            ev = "ack" if fate["ack"] == "acked" else "fail"
            events.append({"t": created + 1 / 8, "proc": "producer", "ev": ev, "id": message_id})
        if fate["abort"] != "none":
            events.append(
                {"t": created, "proc": "producer", "ev": "txn_abort", "ids": [message_id]}
            )
        if fate["abort"] == "retried":
            events.append(
                {
                    "t": created + 2 / 8,
                    "proc": "producer#2",
                    "ev": "txn_commit",
                    "ids": [message_id],
                }
            )
        if visible.get(message_id):
            seen = created + fate["latency_eighths"] / 8
            events.append({"t": seen, "proc": "sink", "ev": "consumed", "id": message_id})
            # The processor's consumption is not the sink's: it must not count.
            events.append(
                {"t": seen - 1 / 16, "proc": "processor", "ev": "consumed", "id": message_id}
            )
            latencies.append(fate["latency_eighths"] * 125.0)
    writes, commits, calls = refused
    refusal = {"t": T0 - 1, "proc": "processor", "ev": "commit_rejected"}
    events += [refusal | {"error": "ILLEGAL_GENERATION"} for _ in range(commits)]
    fence = {"t": T0 - 1, "proc": "producer", "ev": "fenced", "error": "_FENCED"}
    events += [fence | {"by": "transaction coordinator"} for _ in range(calls)]
    # Each a Produce the broker refused for its epoch, after the fence above (so that fence
    # stays a refused transaction call), once each however many partitions it names.
    answer = {"source": "proxy", "kind": "produce_error", "node": 1, "conn": 3}
    run.proxy[spec.level] = [
        answer | {"t": T0 + k, "correlation_id": k, "partition": p, "error": "PRODUCER_FENCED"}
        for k in range(writes)
        for p in range(2)
    ]
    events += [
        {"t": T0 - 2, "proc": "sink", "ev": "start"},
        {"t": T0 - 2, "proc": "nemesis", "ev": "nemesis"},
    ]
    run.history += [{**e, "level": spec.level} for e in events]

    # What was planted, counted from the plan rather than by the checker's rules: an id is
    # reordered when one of its visible copies follows a visible copy of a larger id.
    out_of_order: set[int] = set()
    for log in logs.values():
        larger_before = -1
        for message_id, aborted in log:
            if aborted and committed_only:
                continue
            if message_id < larger_before:
                out_of_order.add(message_id)
            larger_before = max(larger_before, message_id)
    ledger = range(len(fates))
    aborted_copies = sum(1 for f in fates if f["abort"] != "none")
    by_design = sum(1 for f in fates if f["abort"] == "by-design")
    ordered = sorted(latencies)

    def nearest(q: int) -> float | None:
        return ordered[max(1, math.ceil(q / 100.0 * len(ordered))) - 1] if ordered else None

    run.expected[spec.level] = {
        "sent": sum(1 for f in fates if f["ack"] != "unsent"),
        "acked": sum(1 for f in fates if f["ack"] == "acked"),
        "delivered": sum(1 for i in ledger if visible.get(i)),
        "duplicates": sum(max(0, visible.get(i, 0) - 1) for i in ledger),
        "lost": sum(
            1
            for i, f in enumerate(fates)
            if not visible.get(i) and f["abort"] != "by-design" and f["ack"] != "unsent"
        ),
        "never_sent": sum(
            1
            for i, f in enumerate(fates)
            if not visible.get(i) and f["abort"] != "by-design" and f["ack"] == "unsent"
        ),
        "reordered": len(out_of_order),
        "aborted_visible": 0 if committed_only else aborted_copies,
        "aborted_as_intended": by_design if committed_only else 0,
        "aborted_at_read_uncommitted": aborted_copies,
        "writes_refused": writes,
        "commits_refused": commits,
        "txn_calls_refused": calls,
        "fenced": writes + commits + calls,
        "latency_ms": {
            "p50": nearest(50),
            "p95": nearest(95),
            "p99": nearest(99),
            "max": nearest(100),
        },
    }


# A failing example is shrunk one Spark evaluation at a time, which outlasts pytest's 300 s.
@pytest.mark.timeout(1200)
@SETTINGS
@given(run=planted_runs())
def test_both_recover_what_was_planted(spark, run: Synthetic) -> None:
    spark_results, spark_verdicts = run_spark(spark, run)
    ref_results, ref_verdicts = run_reference(run)
    for spec in run.levels:
        expected = run.expected[spec.level]
        for name, implementation in (("spark", spark_results), ("reference", ref_results)):
            got = {k: implementation[spec.level][k] for k in expected}
            assert got == expected, f"{name} / {spec.level}"
    assert spark_results == ref_results
    assert spark_verdicts == ref_verdicts


# ---- messy runs -----------------------------------------------------------------------
PROCS = ["producer", "producer#2", "source", "sink", "processor", "nemesis", ""]
EVS = ["send", "ack", "fail", "consumed", "txn_abort", "txn_commit", "fenced", "start"]
EVS += ["commit_rejected", "restart", "output_failed"]
# What a refusal line may say (engine.judging.checker.count_refusals reads these).
ERRORS = [None, "INVALID_PRODUCER_EPOCH", "ILLEGAL_GENERATION", "_FENCED", "_TIMED_OUT"]
BY = [None, "group coordinator", "transaction coordinator", "the commit failed"]
TIMES = st.sampled_from([0.0, 0.5, 1.0]) | st.floats(
    1.0, 1e4, allow_nan=False, allow_infinity=False
)


@st.composite
def messy_runs(draw: st.DrawFn) -> Synthetic:
    messages = draw(st.integers(1, 20))
    # Mostly a few small ids, so that copies, reorders and aborts of one id meet often.
    ids = st.integers(0, 4) | st.integers(-2, messages + 2)
    run = Synthetic(messages=messages, ranks=draw(RANKS), collect_rows=draw(st.booleans()))
    for k in range(draw(st.integers(1, 13))):
        isolation = draw(st.sampled_from(["read_uncommitted", "read_committed"]))
        spec = LevelSpec(level=f"level-{k}", topic=f"lab.messy.{k}", isolation=isolation)
        run.levels.append(spec)
        records = draw(
            st.lists(
                st.tuples(
                    st.integers(0, 2),  # partition
                    ids | st.none(),
                    st.none() | TIMES,  # created_at
                    st.booleans(),  # aborted
                    st.sampled_from(["json", "json", "json", "null", "garbage", "no-id"]),
                ),
                max_size=30,
            )
        )
        offsets = [0, 0, 0]
        for partition, message_id, created, aborted, kind in records:
            raw = {
                "json": value(message_id, created, spec.level),
                "null": None,
                "garbage": b"\xff\xfe not json",
                "no-id": b'{"created_at": 2.0}',
            }[kind]
            run.add_record(spec.topic, partition, offsets[partition], raw, aborted=aborted)
            offsets[partition] += draw(st.integers(1, 3))
        events = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "t": TIMES,
                        "proc": st.sampled_from(PROCS),
                        "ev": st.sampled_from(EVS),
                        "id": ids | st.none(),
                        "ids": st.lists(ids, max_size=3),
                        "error": st.sampled_from(ERRORS),
                        "by": st.sampled_from(BY),
                    }
                ),
                max_size=60,
            )
        )
        run.history += [{**e, "level": spec.level} for e in events]
        answers = st.fixed_dictionaries(
            {
                "t": TIMES,
                "source": st.just("proxy"),
                "kind": st.sampled_from(["produce_error", "connection_reset"]),
                "node": st.integers(1, 2),
                "conn": st.just(1),
                "correlation_id": st.integers(0, 3),
                "error": st.sampled_from(["INVALID_PRODUCER_EPOCH", "NOT_LEADER_OR_FOLLOWER"]),
            }
        )
        run.proxy[spec.level] = draw(st.lists(answers, max_size=4))
    return run


@pytest.mark.timeout(1200)
@SETTINGS
@given(run=messy_runs())
def test_spark_agrees_with_the_reference_on_anything(spark, run: Synthetic) -> None:
    spark_results, spark_verdicts = run_spark(spark, run)
    ref_results, ref_verdicts = run_reference(run)
    for spec in run.levels:
        assert spark_results[spec.level] == ref_results[spec.level], spec.level
        assert spark_verdicts[spec.level] == ref_verdicts[spec.level], spec.level


def test_an_empty_topic_loses_every_message(spark) -> None:
    """Sent and never stored: lost. The same ids never sent are "never sent" (Kafka was never
    asked to keep them), in Spark as in the reference."""
    spec = LevelSpec(level="at-least-once", topic="lab.empty.out", isolation="read_uncommitted")
    run = Synthetic(messages=3, levels=[spec])
    results, verdicts = run_spark(spark, run)
    assert results == run_reference(run)[0]
    assert (results[spec.level]["lost"], results[spec.level]["never_sent"]) == (0, 3)
    assert [v["verdict"] for v in verdicts[spec.level]] == ["never sent"] * 3
    run.history = [
        {"t": T0, "proc": "producer", "ev": "send", "id": i, "level": spec.level} for i in range(3)
    ]
    results, verdicts = run_spark(spark, run)
    assert results == run_reference(run)[0]
    assert results[spec.level]["lost"] == 3
    assert results[spec.level]["latency_ms"] == {"p50": None, "p95": None, "p99": None, "max": None}
    assert [v["verdict"] for v in verdicts[spec.level]] == ["lost"] * 3


def test_counting_per_latency_bucket_finds_the_same_ranks_as_sorting(spark) -> None:
    """Big runs find percentiles from a latency histogram; on thousands of latencies with
    ties, zeros, negatives and a wide range, it gives what sorting and the reference give."""
    rng = random.Random(7)
    run = Synthetic(messages=3_000)
    for k, isolation in enumerate(("read_uncommitted", "read_committed")):
        spec = LevelSpec(level=f"level-{k}", topic=f"lab.ranks.{k}", isolation=isolation)
        run.levels.append(spec)
        for message_id in range(run.messages):
            created = T0 + message_id / 8
            run.add_record(
                spec.topic,
                message_id % 3,
                message_id // 3,
                value(message_id, created, spec.level),
                aborted=False,
            )
            # Latencies: many equal, some 0 or negative, the rest spread over 5 decades.
            latency = rng.choice([0.0, -0.25, 0.125, 0.125, 2.0**-10, 2.0 ** rng.randint(-12, 5)])
            run.history.append(
                {
                    "t": created,
                    "proc": "producer",
                    "ev": "send",
                    "id": message_id,
                    "level": spec.level,
                }
            )
            run.history.append(
                {
                    "t": created + latency,
                    "proc": "sink",
                    "ev": "consumed",
                    "id": message_id,
                    "level": spec.level,
                }
            )
    by_sort = run_spark(spark, run)
    run.ranks = "histogram"
    by_histogram = run_spark(spark, run)
    assert by_histogram == by_sort
    assert by_histogram == run_reference(run)


def test_the_session_starts_in_the_background_once(spark) -> None:
    from engine.metrics.session import MetricsSetupError, check_versions, start_spark_in_background

    steps: list[tuple[str, float]] = []
    future = start_spark_in_background(lambda what, fraction: steps.append((what, fraction)))
    assert future.result(timeout=120) is spark  # one session per process
    assert steps[-1] == ("ready", 1.0)
    with pytest.raises(MetricsSetupError, match="does not match the pinned Kafka connector"):
        check_versions("3.5.1")


def _cpu_group(pid: int) -> tuple[str, int] | None:
    """A process's autogroup (Linux schedules each session as one group) and its nice;
    None where it has none of its own: the file is empty for the root autogroup (a session
    not made by setsid, kernel/sched/autogroup.c) and absent without autogroup at all."""
    path = Path(f"/proc/{pid}/autogroup")
    fields = path.read_text().split() if path.exists() else []
    return (fields[0], int(fields[2])) if fields else None


def _threads_nice(pid: int) -> set[int]:
    """The nice values of a process's threads (Linux keeps one per thread)."""
    return {
        os.getpriority(os.PRIO_PROCESS, int(task.name))
        for task in Path(f"/proc/{pid}/task").iterdir()
    }


def test_the_driver_jvm_has_room_to_keep_compiling_through_a_long_session(spark) -> None:
    """C1 alone gets 48 MB of code cache from HotSpot, which Spark's generated classes filled
    in about 25 judgements; then HotSpot stopped compiling (engine.metrics.session.DRIVER_JIT).
    The session's JVM must have the 240 MB that tiered compilation gets."""
    management = spark._jvm.java.lang.management.ManagementFactory
    code_cache = [p for p in management.getMemoryPoolMXBeans() if p.getName() == "CodeCache"]
    assert code_cache, [p.getName() for p in management.getMemoryPoolMXBeans()]
    assert code_cache[0].getUsage().getMax() >= 240 * 2**20
    flags = management.getRuntimeMXBean().getInputArguments()
    assert "-XX:TieredStopAtLevel=1" in flags  # still C1 only, as measured


def test_the_spark_jvm_runs_in_a_cpu_group_of_its_own_below_the_run(spark) -> None:
    from engine.base import settings as lab_settings

    niceness = lab_settings.SPARK_NICENESS.integer(minimum=0)
    assert niceness > 0
    jvm = spark.sparkContext._gateway.proc.pid
    assert os.getsid(jvm) == jvm != os.getsid(0), "the JVM leads a session of its own"
    # Where autogroup does not apply (off, or a cgroup of the CPU controller) threads
    # compete one by one: every thread of the JVM carries the nice, none of ours does.
    our_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert _threads_nice(jvm) == {niceness} != {our_nice}
    # With autogroup, the JVM's session is a group of its own at that nice.
    switch = Path("/proc/sys/kernel/sched_autogroup_enabled")
    autogroup_on = switch.exists() and switch.read_text().strip() == "1"
    group, ours = _cpu_group(jvm), _cpu_group(os.getpid())
    if autogroup_on and group is not None:
        assert group[1] == niceness
        assert group != ours, "so Linux schedules it as a group apart from this process"
    # The contrast: a child started the way pyspark starts its JVM shares our group and nice.
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert _cpu_group(child.pid) == ours
        assert os.getsid(child.pid) == os.getsid(0)
        assert _threads_nice(child.pid) == {our_nice}
    finally:
        child.kill()
        child.wait()


def test_the_dashboards_warm_up_judges_a_made_up_run_before_the_session_is_handed_out(
    spark,
) -> None:
    from engine.metrics.session import start_spark_in_background
    from engine.metrics.warm_up import warm_up_judgement

    warmed: list[Any] = []
    cached_before = len(spark.sparkContext._jsc.getPersistentRDDs())
    views_before = {t.name for t in spark.catalog.listTables() if t.isTemporary}

    def then(session: Any) -> None:
        warm_up_judgement(session)
        warmed.append(session)

    future = start_spark_in_background(then=then)
    assert future.result(timeout=300) is spark
    assert warmed == [spark], "the warm-up ran before the Future was done"
    # It leaves nothing behind: no temporary view and nothing cached.
    assert {t.name for t in spark.catalog.listTables() if t.isTemporary} == views_before
    assert len(spark.sparkContext._jsc.getPersistentRDDs()) == cached_before


def test_the_warm_up_judges_a_run_of_a_class_size_read_as_a_real_one(spark, monkeypatch) -> None:
    """The made-up run is as big as a class's (4 levels x 3,000 ids) and its history comes
    from a run folder's files through read_history, as a real run's does: a session's first
    real judgement then finds its per-row code hot (benchmarks/METRICS.md)."""
    from engine.metrics import sql, warm_up

    judged: list[tuple[int, int, list[str], tuple[int, int]]] = []
    real_judge = warm_up.judge

    def spy(**kwargs: Any) -> Any:
        history_files = kwargs["history"].inputFiles()
        # How many values have the shape of the lab's own, which the judgement reads its
        # own way (sql._value_sql): that way's code is warmed up too.
        shaped = sql.run_sql(
            spark,
            "SELECT count_if(CAST(value AS STRING) RLIKE "
            f"{sql._sql_str(sql._MADE_BY_THE_LAB)}), count(1) FROM {{records}}",
            records=kwargs["uncommitted"],
        ).collect()[0]
        judged.append((len(kwargs["levels"]), kwargs["messages"], history_files, tuple(shaped)))
        return real_judge(**kwargs)

    monkeypatch.setattr(warm_up, "judge", spy)
    warm_up.warm_up_judgement(spark, rounds=1)
    [(levels, messages, files, (shaped, values))] = judged
    assert (levels, messages >= 3_000) == (4, True), (levels, messages)
    # Read from each level's columnar copy, as a run's recorded since it has one.
    assert sorted(Path(f).name for f in files) == ["history.parquet"] * 4
    assert shaped == values > 0
    assert re.fullmatch(sql._MADE_BY_THE_LAB.replace("\\z", "$"), warm_up._value(7).decode())


def test_inputs_past_the_groups_committed_offset_are_not_processed_yet(spark) -> None:
    """A processor stopped (stuck, or the run ended) before it committed past some inputs:
    they are "not processed yet", not lost, in Spark as in the checker. The source's acks
    say where each input landed; the runner's group_committed, where the group stood."""
    spec = LevelSpec("exactly-once", "lab.synthetic.eo.out", "read_committed")
    run = Synthetic(messages=6, levels=[spec])
    for message_id in range(6):
        created = T0 + message_id / 8
        run.history += [
            {"t": created, "proc": "source", "ev": "send", "id": message_id},
            {"t": created + 1 / 8, "proc": "source", "ev": "ack", "id": message_id}
            | {"partition": message_id % 2, "offset": message_id // 2},
        ]
    # Partition 0 holds ids 0, 2, 4 at offsets 0-2; partition 1 ids 1, 3, 5. The group
    # committed partition 0 up to offset 2 (ids 0 and 2 done) and partition 1 up to 1.
    run.history += [
        {"t": T0 + 5, "proc": "runner", "ev": "group_committed", "partition": 0, "offset": 1},
        {"t": T0 + 6, "proc": "runner", "ev": "group_committed", "partition": 0, "offset": 2},
        {"t": T0 + 6, "proc": "runner", "ev": "group_committed", "partition": 1, "offset": 1},
    ]
    for offset, message_id in enumerate((0, 1)):  # outputs of ids 0 and 1 only
        run.add_record(spec.topic, 0, offset, value(message_id, T0, spec.level), aborted=False)
    run.history = [{**e, "level": spec.level} for e in run.history]
    spark_results, spark_verdicts = run_spark(spark, run)
    ref_results, ref_verdicts = run_reference(run)
    assert spark_results == ref_results and spark_verdicts == ref_verdicts
    result = spark_results[spec.level]
    # Id 2 (partition 0, offset 1, below the committed 2) had its offset committed without an
    # output: lost. Ids 3, 4 and 5 sit at or past their partition's committed offset.
    assert (result["lost"], result["not_processed"], result["never_sent"]) == (1, 3, 0)


def _pipeline_run() -> Synthetic:
    """A processor's level: its source acks say where each input landed; ids 2 and 3 have no
    output and sit at or past the group's committed offset: "not processed yet"."""
    spec = LevelSpec("exactly-once", "lab.synthetic.eo.out", "read_committed")
    run = Synthetic(messages=4, levels=[spec])
    for message_id in range(4):
        if message_id < 2:  # the outputs of ids 0 and 1 only
            run.add_record(
                spec.topic, 0, message_id, value(message_id, T0, spec.level), aborted=False
            )
        run.history.append(
            {"t": T0 + message_id / 8, "proc": "source", "ev": "ack", "id": message_id}
            | {"partition": 0, "offset": message_id}
        )
    run.history.append(
        {"t": T0 + 9, "proc": "runner", "ev": "group_committed", "partition": 0, "offset": 2}
    )
    run.history = [{**e, "level": spec.level} for e in run.history]
    return run


def _physical_plans(spark: Any, run: Synthetic) -> tuple[str, str, dict[str, Any]]:
    """The physical plans of a judgement's cached positions and facts, and its results."""
    judged = judged_by_spark(spark, run)
    try:
        plans = [
            frame._jdf.queryExecution().executedPlan().toString()
            for frame in (judged.records, judged.facts)
        ]
        return plans[0], plans[1], judged.results
    finally:
        judged.release()


def test_a_big_history_does_not_turn_the_committed_offsets_join_into_a_sort(spark) -> None:
    """The group's committed offsets (a row per level and partition) are joined to the facts
    by broadcast, however big the history Spark sizes them by. Past its 10 MB threshold Spark
    chose a sort-merge join, which shuffled every fact by a partition NULL for all ids but
    a pipeline's, so one task sorted them all (18 of 79 s at 10M messages,
    benchmarks/METRICS.md). A threshold of -1 stands for a history past any threshold."""
    run = _pipeline_run()
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        _, facts_plan, results = _physical_plans(spark, run)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)
    assert "SortMergeJoin" not in facts_plan and "BroadcastHashJoin" in facts_plan
    assert results == run_reference(run)[0]
    assert results["exactly-once"]["not_processed"] == 2


def test_the_facts_shuffle_runs_in_whole_rounds_of_the_task_slots(spark, monkeypatch) -> None:
    """The facts are shuffled by id into tasks of one size, as many as fill the session's
    task slots (2 here) in whole rounds; the positions keep the count asked for, since their
    few keys land where their hash puts them."""
    monkeypatch.setenv("LAB_SPARK_SHUFFLE_PARTITIONS", "3")
    run = _pipeline_run()
    records_plan, facts_plan, results = _physical_plans(spark, run)

    def counts(plan: str) -> set[int]:
        return {int(n) for n in re.findall(r"hashpartitioning\([^\n]*?, (\d+)\), ", plan)}

    assert counts(records_plan) == {3}
    assert counts(facts_plan) - counts(records_plan) == {4}
    assert results == run_reference(run)[0]


def test_the_scaling_benchmarks_data_is_judged_alike_by_spark_and_duckdb(spark, tmp_path) -> None:
    """benchmarks.metrics_bench compares Spark with DuckDB on its own synthetic run; both
    must count it alike, reordered ids by engine.judging.checker's definition. (Its history once
    lacked the source-ack columns Spark's judgement reads, and DuckDB counted only each id's
    first copy as reordered.)"""
    from benchmarks.metrics_bench import make_data, spark_judge, worker_duckdb

    make_data(tmp_path, 2_000)
    _, by_spark = spark_judge(spark, tmp_path)
    by_duckdb = worker_duckdb(tmp_path)["results"]
    assert by_spark == by_duckdb
    # 1 in 500 ids is written 50 messages late, 1 in 100 has a retried copy 3 messages
    # later: every copy counts (engine.judging.checker.reordered_ids), so 4 + 20 ids.
    assert by_spark["reordered"] == 24
