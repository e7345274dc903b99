"""When the dashboard starts Spark's streaming queries on a run: once its topics exist.

RunHandle (engine.run_handle) reads the levels' steps as run_scenario reports them; its
`topics_made` event lets the follower start only when no level is still making its topics.
"""

from __future__ import annotations

from engine.run.progress import CREATING_TOPICS, Step
from engine.run_handle import RunHandle


def steps(job: RunHandle, *reported: Step) -> bool:
    for step in reported:
        job.progress(step, 0.0)
    return job.topics_made.is_set()


AMO, ALO = "at-most-once", "at-least-once"


def test_side_by_side_the_queries_wait_for_every_levels_topics() -> None:
    job = RunHandle(stage="Starting")
    assert not steps(job, Step("Starting"), Step(CREATING_TOPICS, AMO))
    assert not steps(job, Step(CREATING_TOPICS, ALO))
    # One level has its topics, the other is still making them: not yet.
    assert not steps(job, Step("running", AMO))
    assert steps(job, Step("running", ALO))
    assert job.stages == {AMO: "running", ALO: "running"}
    assert job.stage == "At least once: running"  # the words the page shows


def test_one_level_at_a_time_the_first_levels_topics_are_enough() -> None:
    job = RunHandle(stage="Starting")
    assert steps(job, Step(CREATING_TOPICS, AMO), Step("running", AMO))
    # Later levels make theirs while the queries run: each new topic is read from its start.
    assert steps(job, Step(CREATING_TOPICS, ALO))


def test_steps_that_are_no_levels_do_not_count() -> None:
    job = RunHandle(stage="Starting")
    assert not steps(
        job, Step("Waiting for the cluster: free"), Step("waiting for every producer"), Step("done")
    )
