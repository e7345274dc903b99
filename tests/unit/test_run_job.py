"""When the dashboard starts Spark's streaming queries on a run: once its topics exist.

RunJob (pages._run_control) reads the levels' steps as run_scenario reports them; its
`topics_made` event lets the follower start only when no level is still making its topics.
"""

from __future__ import annotations

from engine.level_run import CREATING_TOPICS
from pages._run_control import RunJob


def steps(job: RunJob, *reported: str) -> bool:
    for what in reported:
        job.progress(what, 0.0)
    return job.topics_made.is_set()


def test_side_by_side_the_queries_wait_for_every_levels_topics() -> None:
    job = RunJob(stage="Starting")
    assert not steps(job, "Starting", f"At most once: {CREATING_TOPICS}")
    assert not steps(job, f"At least once: {CREATING_TOPICS}")
    # One level has its topics, the other is still making them: not yet.
    assert not steps(job, "At most once: running")
    assert steps(job, "At least once: running")


def test_one_level_at_a_time_the_first_levels_topics_are_enough() -> None:
    job = RunJob(stage="Starting")
    assert steps(job, f"At most once: {CREATING_TOPICS}", "At most once: running")
    # Later levels make theirs while the queries run: each new topic is read from its start.
    assert steps(job, f"At least once: {CREATING_TOPICS}")


def test_steps_that_are_no_levels_do_not_count() -> None:
    job = RunJob(stage="Starting")
    assert not steps(job, "Waiting for the cluster: free", "waiting for every producer", "done")
