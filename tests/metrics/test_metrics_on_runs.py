"""On real scenario runs, Spark's metrics equal the checker's, field by field.

Each scenario runs on the session's real 1-node cluster; the engine judges it with
engine.judging.checker as always. Then the Spark job reads the run's topics back from Kafka at both
isolation levels and must give the same counts, the same latency summary and the same
verdict for every message. The plain-Python reference, fed the same Kafka records, must
agree with Spark on the fields the checker does not compute.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from engine.metrics.buckets import MAX_BUCKETS, WIDTHS_S
from engine.metrics.cli import add_commands
from engine.metrics.spark_job import (
    MetricsError,
    load_run_inputs,
    read_history,
    run_metrics,
    verdict_rows,
)
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.metrics import reference
from tests.metrics.followed import CHECKER_FIELDS

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


@pytest.fixture(scope="module")
def runs(cluster1) -> dict[str, dict[str, Any]]:
    """ack-loss and aborted-transaction, each run once on the real cluster."""
    out = {}
    for name in ("ack-loss", "aborted-transaction"):
        path = list_scenarios()[name]
        out[name] = run_scenario(load_scenario(path), cluster1, source_text=path.read_text())
    return out


def raw_rows(bootstrap: str, topic: str, isolation: str) -> list[tuple[str, int, int, bytes]]:
    """A topic's records as (topic, partition, offset, value), read with librdkafka."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"metrics-test-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        rows, at_end = [], set()
        while len(at_end) < len(partitions):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            rows.append((topic, msg.partition(), msg.offset(), msg.value()))
        return rows
    finally:
        consumer.close()


@pytest.mark.parametrize("name", ["ack-loss", "aborted-transaction"])
def test_spark_metrics_equal_the_checkers(name, runs, spark, cluster1) -> None:
    output = runs[name]
    metrics, judged = run_metrics(output["run_id"], spark=spark)
    try:
        verdicts = verdict_rows(judged)
    finally:
        judged.release()
    assert (metrics["run_id"], metrics["scenario"]) == (output["run_id"], output["scenario"])
    assert set(metrics["results"]) == set(output["results"])
    recorded = record.load_run(output["run_id"])
    for level, engine_result in output["results"].items():
        ours = metrics["results"][level]
        for field in CHECKER_FIELDS:
            assert ours[field] == engine_result[field], f"{name} / {level}: {field}"
        # Every other field of `engine run --json` is there, with the run's own values.
        assert set(engine_result) <= set(ours)
        assert ours["faults"] == json.loads(json.dumps(engine_result["faults"]))
        assert verdicts[level] == recorded.levels[level].verdicts, f"{name} / {level}"

    # The reference, fed the same Kafka records, agrees on the fields beyond the checker's.
    bootstrap = cluster1.direct_bootstrap
    inputs = {
        isolation: [
            row
            for r in output["results"].values()
            for row in raw_rows(bootstrap, r["sink_topic"], isolation)
        ]
        for isolation in ("read_uncommitted", "read_committed")
    }
    history = [
        {**e, "level": level} for level, data in recorded.levels.items() for e in data.history
    ]
    run = load_run_inputs(output["run_id"])
    expected, _ = reference.judge(
        uncommitted=inputs["read_uncommitted"],
        committed=inputs["read_committed"],
        history=history,
        levels=run.levels,
        messages=run.messages,
        proxy_faults=run.proxy_faults,
    )
    for level, ref in expected.items():
        assert {k: metrics["results"][level][k] for k in ref} == ref, f"{name} / {level}"
    assert read_history(spark, run.history_paths).count() == len(history)


def test_what_the_scenarios_promise_shows_in_the_extra_fields(runs, spark) -> None:
    ack_loss = _metrics(runs["ack-loss"]["run_id"], spark)
    assert ack_loss["results"]["at-least-once"]["duplicated_messages"] == 1
    assert ack_loss["results"]["at-least-once"]["duplicated_share"] == 0.05
    aborted = _metrics(runs["aborted-transaction"]["run_id"], spark)
    # 5 aborted records sit in the log: a read_uncommitted reader sees them in both levels'
    # topics, and only the read_committed level treats them as aborted on purpose.
    for level in ("at-least-once", "exactly-once"):
        assert aborted["results"][level]["aborted_at_read_uncommitted"] == 5
    assert aborted["results"]["exactly-once"]["aborted_as_intended"] == 5
    rate = aborted["results"]["exactly-once"]["throughput"]
    assert sum(rate["per_bucket"]) == rate["messages"] == 20
    # A run of a few seconds gets buckets of a fraction of a second, not one bar.
    assert rate["bucket_s"] in WIDTHS_S and rate["bucket_s"] < 1.0
    assert len(rate["per_bucket"]) <= MAX_BUCKETS + 1


def _metrics(run_id: str, spark: Any, **kwargs: Any) -> dict[str, Any]:
    output, judged = run_metrics(run_id, spark=spark, **kwargs)
    judged.release()
    return output


def test_the_record_gives_the_same_counts_without_kafka(runs, spark) -> None:
    run_id = runs["aborted-transaction"]["run_id"]
    from_kafka = _metrics(run_id, spark)
    from_record = _metrics(run_id, spark, from_record=True)
    for level, ours in from_record["results"].items():
        theirs = dict(from_kafka["results"][level])
        if ours["isolation"] == "read_committed":  # the record has no uncommitted view
            assert ours["aborted_at_read_uncommitted"] is None
            theirs["aborted_at_read_uncommitted"] = None
        assert ours == theirs, level


def test_bootstrap_override_and_a_dead_one(runs, spark, cluster1, monkeypatch) -> None:
    run_id = runs["ack-loss"]["run_id"]
    monkeypatch.setenv("LAB_METRICS_BOOTSTRAP", cluster1.direct_bootstrap)
    output = _metrics(run_id, spark)
    assert output["results"]["at-least-once"]["duplicates"] == 1
    monkeypatch.setenv("LAB_METRICS_BOOTSTRAP", "127.0.0.1:1")
    with pytest.raises(MetricsError, match=r"No Kafka broker answers at 127\.0\.0\.1:1"):
        run_metrics(run_id, spark=spark)


def test_the_cli_prints_the_run_json_object(runs, spark, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command", required=True))
    run_id = runs["ack-loss"]["run_id"]
    args = parser.parse_args(["metrics", run_id, "--json", "--quiet"])
    assert args.func(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"run_id", "scenario", "results"}
    assert printed["results"]["at-least-once"]["duplicates"] == 1

    args = parser.parse_args(["metrics", "no-such-run", "--json"])
    with pytest.raises(record.RunNotFoundError, match="There is no run 'no-such-run'"):
        args.func(args)


def test_a_big_run_is_computed_in_a_process_of_its_own(runs, monkeypatch) -> None:
    """Above LAB_METRICS_BIG_RUN verdict rows, compute_and_save starts a Python process
    with the big-run Spark settings; its progress comes back, and what it saved is
    returned: the same counts, and the table in Parquet past LAB_VERDICT_ROWS rows."""
    from engine.metrics.compute import compute_and_save

    output = runs["ack-loss"]
    monkeypatch.setenv("LAB_METRICS_BIG_RUN", "1")
    monkeypatch.setenv("LAB_VERDICT_ROWS", "10")
    monkeypatch.setenv("LAB_SPARK_BIG_DRIVER_MEMORY", "1g")
    steps: list[tuple[str, float]] = []
    saved = compute_and_save(output["run_id"], progress=lambda w, f: steps.append((w, f)))
    assert steps[0] == ("starting a Spark process for a big run", 0.02)
    assert ("done", 1.0) in steps, steps
    assert saved["verdicts"] is None and saved["verdicts_parquet"] == "verdicts.parquet"
    for level, checked in output["results"].items():
        for key in ("sent", "acked", "delivered", "duplicates", "lost", "latency_ms"):
            assert saved["results"][level][key] == checked[key], (level, key)

    monkeypatch.setenv("LAB_METRICS_BOOTSTRAP", "127.0.0.1:1")  # Kafka down: the record
    saved = compute_and_save(output["run_id"])
    assert saved["source"] == "the records saved with the run"
    assert "127.0.0.1:1" in saved["fallback_reason"]


def test_the_warm_up_reads_its_records_from_kafka_once_written(spark, cluster1) -> None:
    """The dashboard's warm-up also judges records read through Spark's Kafka source, from
    a topic of a class's run's size it writes once (every id in each of 4 partitions, as
    a run's 4 topics of one partition); a second warm-up reuses it and leaves nothing
    cached."""
    from engine.metrics.warm_up import WARM_UP_IDS, WARM_UP_TOPIC, warm_up_judgement

    cached_before = len(spark.sparkContext._jsc.getPersistentRDDs())
    for _ in range(2):
        warm_up_judgement(spark, rounds=1, bootstrap=cluster1.direct_bootstrap)
    rows = raw_rows(cluster1.direct_bootstrap, WARM_UP_TOPIC, "read_committed")
    for partition in range(4):
        ids = [json.loads(v)["id"] for _, p, _, v in sorted(rows) if p == partition]
        assert ids == list(range(WARM_UP_IDS)), partition
    assert len(rows) == 4 * WARM_UP_IDS
    assert len(spark.sparkContext._jsc.getPersistentRDDs()) == cached_before
