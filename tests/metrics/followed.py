"""Scenario runs judged three ways: Spark following the run, Spark after it, the checker.

The scenario tests (tests/integration: test_scenarios, test_replication_truths,
test_lost_coordinator_answers) run every scenario through `run_judged_three_ways`. A
RunFollower (engine.metrics.streaming) starts before the run, so Spark's streaming queries
read the run's topics at both isolation levels while it runs. Afterwards three results must
agree, count for count and verdict for verdict:

- the metrics from the records the queries read (compute_and_save with the follower);
- the batch job's, which reads Kafka again after the run (run_metrics);
- the checker's (engine.judging.checker), which the run itself returned.

Where a partition's leader changed during the run, Kafka may have lost records the queries
had already read, so the follower's copy is refused and the batch job's numbers are saved
with the reason (RunFollower.leader_changes). `trust_the_follower` skips that guard, for the
test that shows what the copy would have claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.metrics.compute import STREAM_SOURCE, compute_and_save
from engine.metrics.session import get_spark
from engine.metrics.spark_job import run_metrics
from engine.metrics.streaming import RunFollower, start_following
from engine.run import record
from engine.run.runner import new_run_id, run_scenario
from engine.scenarios.scenario import Scenario

# The checker's fields that Spark's metrics carry too, with the same values.
CHECKER_FIELDS = (
    "unseen_by_sink",
    "sink_topic",
    "isolation",
    "sent",
    "acked",
    "delivered",
    "duplicates",
    "lost",
    "reordered",
    "aborted_visible",
    "writes_refused",
    "commits_refused",
    "txn_calls_refused",
    "fenced",
    "latency_ms",
)


@dataclass
class Judged:
    output: dict[str, Any]  # the run's `engine run --json` object, the checker's counts
    streamed: dict[str, Any]  # compute_and_save's metrics, from the follower when it could
    batch: dict[str, Any]  # the batch job's, from Kafka read after the run
    leader_changes: list[str]  # the follower's reason to refuse its copy, if any


def followed_run(
    scenario: Scenario, cluster: Any, source_text: str, spark: Any
) -> tuple[dict[str, Any], RunFollower]:
    """Run `scenario` with a follower started first: (the run's output, the follower)."""
    run_id = new_run_id(scenario.name)
    follower = start_following(
        spark, cluster.direct_bootstrap, run_id, scenario.levels, scenario.pipeline
    )
    try:
        output = run_scenario(scenario, cluster, source_text=source_text, run_id=run_id)
    except BaseException:
        follower.stop()
        raise
    return output, follower


def run_judged_three_ways(
    scenario: Scenario, cluster: Any, source_text: str, *, trust_the_follower: bool = False
) -> Judged:
    """Run `scenario` with Spark following it, then judge it three ways (module docstring).

    Unless `trust_the_follower`, asserts that the three agree and that the follower's copy
    was used exactly when no partition's leader changed.
    """
    spark = get_spark("local[2]")
    output, follower = followed_run(scenario, cluster, source_text, spark)
    run_id = output["run_id"]
    try:
        changes = follower.leader_changes(follower.expected_ends())
    except BaseException:
        follower.stop()
        raise
    if trust_the_follower:
        follower.leader_changes = lambda _ends: []  # type: ignore[method-assign]
    streamed = compute_and_save(run_id, follower=follower)
    batch, judged = run_metrics(run_id, spark=spark)
    judged.release()
    result = Judged(output, streamed, batch, changes)
    if not trust_the_follower:
        assert_three_ways_agree(result)
    return result


def assert_three_ways_agree(judged: Judged) -> None:
    output, streamed, batch = judged.output, judged.streamed, judged.batch
    name = output["scenario"]
    if judged.leader_changes:
        assert streamed["source"] != STREAM_SOURCE, name
        assert "changed during the run" in streamed["fallback_reason"], name
    else:
        assert streamed["source"] == STREAM_SOURCE, (name, streamed["fallback_reason"])
    recorded = record.load_run(output["run_id"])
    assert set(streamed["results"]) == set(output["results"]) == set(batch["results"]), name
    for level, checked in output["results"].items():
        ours = streamed["results"][level]
        assert ours == batch["results"][level], f"{name} / {level}: streamed != batch"
        for field in CHECKER_FIELDS:
            assert ours[field] == checked[field], f"{name} / {level}: {field}"
        assert streamed["verdicts"][level] == recorded.levels[level].verdicts, level
