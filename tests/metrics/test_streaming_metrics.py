"""Metrics that follow the run (engine.metrics.streaming) equal the batch job's and the
checker's on real runs.

Every scenario is checked so in the scenario tests (tests/metrics/followed.py); here
ack-loss and consumer-crash run on the session's real 1-node cluster with a RunFollower
started before it: Spark's streaming queries read the run's judged topics at both isolation
levels while it runs. When it ends, the records they read (and a batch read of any they
had not) and the shared judgement give the metrics, which must equal the batch job's (a
fresh read of Kafka after the run) field by field, and the checker's counts and per-message
verdicts. The contrast: the same tables without their last records give other counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine.metrics.compute import STREAM_SOURCE, compute_and_save
from engine.metrics.spark_job import MetricsError, run_metrics
from engine.metrics.streaming import RunFollower, level_specs
from engine.metrics.summary import so_far
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.metrics import followed

pytestmark = pytest.mark.kafka

# Every scenario is judged three ways (streamed, batch, checker) in the scenario tests
# (tests/metrics/followed.py); here two run again for what those do not check. ack-loss
# ends in about 4 s, sometimes before the query's first micro-batch has read anything;
# consumer-crash runs about 10 s.
SCENARIOS = ("ack-loss", "consumer-crash")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


def followed_run(name: str, cluster: Any, spark: Any) -> tuple[dict[str, Any], RunFollower]:
    """Run the scenario `name` with a follower started first (tests/metrics/followed.py)."""
    path = list_scenarios()[name]
    return followed.followed_run(load_scenario(path), cluster, path.read_text(), spark)


@pytest.fixture(scope="module")
def streamed(cluster1, spark) -> dict[str, tuple[dict[str, Any], dict[str, Any], RunFollower]]:
    """Each scenario run once with a follower: (run output, streamed metrics, follower)."""
    out = {}
    for name in SCENARIOS:
        output, follower = followed_run(name, cluster1, spark)
        metrics = compute_and_save(output["run_id"], follower=follower)
        out[name] = (output, metrics, follower)
    return out


def test_the_follower_read_while_the_run_ran(streamed) -> None:
    """Not everything was left for the end: some micro-batch before finish() held records."""
    assert any(f.rows_before_end > 0 for _, _, f in streamed.values()), [
        (f.rows_before_end, f.rows_in_all) for _, _, f in streamed.values()
    ]


def test_without_the_last_records_the_counts_differ_and_the_end_check_says_so(
    cluster1, spark
) -> None:
    output, follower = followed_run("ack-loss", cluster1, spark)
    try:
        uncommitted, committed = follower.finish()
        complete, judged = run_metrics(
            output["run_id"], spark=spark, records=(uncommitted, committed)
        )
        judged.release()

        # The contrast: the state as if the last micro-batch had not been read, i.e. each
        # partition's last record missing from each view.
        def without_last(frame: Any) -> Any:
            return (
                frame.selectExpr(
                    "*", "max(`offset`) OVER (PARTITION BY topic, `partition`) AS last"
                )
                .where("`offset` < last")
                .select("topic", "partition", "offset", "value")
            )

        short, judged = run_metrics(
            output["run_id"],
            spark=spark,
            records=(without_last(uncommitted), without_last(committed)),
        )
        judged.release()
        for level, checked in output["results"].items():
            assert complete["results"][level]["delivered"] == checked["delivered"]
        assert any(
            short["results"][level]["delivered"] != checked["delivered"]
            or short["results"][level]["duplicates"] != checked["duplicates"]
            for level, checked in output["results"].items()
        )
        # The live panel's counts so far (summary.so_far): the run's own once every record
        # is read, and other ones without the last records.
        specs = level_specs(output["run_id"], list(output["results"]), "producer")
        messages = next(iter(complete["results"].values()))["messages"]
        whole = so_far(
            uncommitted=uncommitted, committed=committed, levels=specs, messages=messages
        )
        partial = so_far(
            uncommitted=without_last(uncommitted),
            committed=without_last(committed),
            levels=specs,
            messages=messages,
        )
        for level, checked in output["results"].items():
            for key in ("delivered", "duplicates", "aborted_visible"):
                assert whole[level][key] == checked[key], (level, key)
            duplicated = complete["results"][level]["duplicated_messages"]
            assert whole[level]["duplicated_messages"] == duplicated, level
        assert whole != partial
        # A record in both the queries' table and finish()'s batch read of the rest (a
        # stop between a micro-batch and its progress) counts once: the judgement merges
        # each view's records by position. Twice every record gives the same numbers,
        # where the rows themselves are twice as many.
        twice, judged = run_metrics(
            output["run_id"],
            spark=spark,
            records=(uncommitted.unionByName(uncommitted), committed.unionByName(committed)),
        )
        judged.release()
        assert twice["results"] == complete["results"]
        assert uncommitted.unionByName(uncommitted).count() == 2 * uncommitted.count() > 0
    finally:
        follower.stop()


def test_a_follower_on_a_dead_broker_falls_back_to_the_batch_job(streamed, spark) -> None:
    """If the follower cannot finish, compute_and_save says so and the batch job's numbers
    (or the record's) are saved, labelled with their source."""
    output, _, _ = streamed["ack-loss"]
    follower = RunFollower(spark, "127.0.0.1:1", output["run_id"], ["no-such-topic"]).start()
    saved = compute_and_save(output["run_id"], follower=follower)
    assert saved["source"] != STREAM_SOURCE
    assert saved["fallback_reason"].startswith(
        "The records Spark's streaming queries read while the run ran were not used"
    )
    assert saved["results"]["at-least-once"]["duplicates"] == 1
    with pytest.raises(MetricsError):
        follower.finish()


def test_a_follower_behind_kafkas_end_reads_the_rest_without_waiting_for_a_trigger(
    cluster1, spark
) -> None:
    """With the query's next trigger a minute away, the run's records are still unread when
    it ends: finish() stops the query and reads the rest with a batch read, instead of
    waiting for that trigger (processAllAvailable, which the code before called and which
    waits for it). The metrics are the checker's all the same."""
    from engine.metrics.streaming import start_following
    from engine.run.runner import new_run_id, run_scenario

    path = list_scenarios()["ack-loss"]
    scenario = load_scenario(path)
    run_id = new_run_id(scenario.name)
    follower = start_following(
        spark,
        cluster1.direct_bootstrap,
        run_id,
        scenario.levels,
        scenario.pipeline,
        trigger_s=60,
    )
    waits: list[float] = []
    try:
        output = run_scenario(scenario, cluster1, source_text=path.read_text(), run_id=run_id)
        query = follower.query
        assert query is not None
        process_all = query.processAllAvailable

        def counted() -> None:
            waits.append(time.monotonic())
            process_all()

        query.processAllAvailable = counted  # type: ignore[method-assign]
        metrics = compute_and_save(output["run_id"], follower=follower)
    finally:
        follower.stop()
    assert waits == []
    assert metrics["source"] == STREAM_SOURCE, metrics["fallback_reason"]
    assert follower.left_unread["read_uncommitted"], "the query had read everything already"
    for level, checked in output["results"].items():
        for key in ("delivered", "duplicates", "lost", "aborted_visible"):
            assert metrics["results"][level][key] == checked[key], (level, key)
