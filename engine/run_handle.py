"""A run started for a page: it goes on in a thread of its own while the page draws.

`start_run` returns a `RunHandle`: the run's typed progress as it goes (`stage`, each
level's latest `Step`), then its output or its error. When given a SparkSession, it also
starts Spark's streaming queries beside the run once the levels' topics exist, and finishes
(or abandons) them when the run ends: the Metrics page then reads what they computed
(engine.metrics.streaming). Nothing here draws: the pages do (pages._run_control).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from engine.base.errors import LabError
from engine.cluster import Cluster
from engine.run.progress import CREATING_TOPICS, Step
from engine.run.runner import run_scenario
from engine.scenarios.scenario import Scenario


@dataclass
class RunHandle:
    """A run in a background thread: its latest stage, then its output or its error."""

    stage: str
    fraction: float = 0.0
    output: dict[str, Any] | None = None
    error: BaseException | None = None
    stages: dict[str, str] = field(default_factory=dict)  # level -> its latest step
    # Set once a level has made its topics and none is making them (levels side by side
    # make them at the same moment): Spark's queries start then (follow).
    topics_made: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def progress(self, step: Step, fraction: float) -> None:
        """run_scenario's callback, from the run's threads; the page's thread reads it."""
        self.stage, self.fraction = str(step), fraction
        if step.level is not None:
            self.stages = {**self.stages, step.level: step.what}
            if CREATING_TOPICS not in self.stages.values():
                self.topics_made.set()

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait(self, seconds: float) -> None:
        """Wait up to `seconds` for the run to end."""
        if self.thread is not None:
            self.thread.join(seconds)

    def result(self) -> dict[str, Any]:
        """The run's output (engine run --json) once it ended; what it raised, if it failed."""
        if self.error is not None:
            raise self.error
        if self.output is None:
            raise LabError("The run ended without a result.")
        return self.output


def start_run(
    cluster: Cluster,
    scenario: Scenario,
    levels: list[str],
    run_id: str,
    *,
    holding: Callable[[], AbstractContextManager[Any]],
    spark: Any | None = None,
    side_by_side: bool | None = None,
    stage: str = "Starting",
) -> RunHandle:
    """Start the run in its own thread and return its handle at once.

    `holding()` is entered by that thread around the run (the page's hold on the cluster,
    shared or alone): if the page is left mid-run, the run still ends, records itself and
    lets go of the cluster. `spark`: a SparkSession to follow the run with, or None.
    `stage`: what the handle says until the run reports its first step.
    """
    handle = RunHandle(stage=stage)

    def work() -> None:
        following: list[Any] = []
        starter = None
        if spark is not None:  # beside the run, not before it: the run does not wait
            starter = threading.Thread(
                target=follow,
                args=(spark, cluster, scenario, levels, run_id, following, handle),
                name=f"follow-{run_id}",
                daemon=True,
            )
            starter.start()
        try:
            with holding():
                handle.output = run_scenario(
                    scenario,
                    cluster,
                    levels=levels,
                    progress=handle.progress,
                    run_id=run_id,
                    side_by_side=side_by_side,
                )
        except BaseException as exc:  # handed to the page's thread, which shows it
            handle.error = exc
        finally:
            handle.topics_made.set()  # a run that failed first: its follower waits no more
            if starter is not None:
                starter.join()
            for follower in following:
                finish_following(follower, ok=handle.output is not None)

    # A daemon: a dashboard being shut down does not wait for a run (its clients have
    # watchdogs of their own).
    handle.thread = threading.Thread(target=work, name=f"run-{run_id}", daemon=True)
    handle.thread.start()
    return handle


def follow(
    spark: Any,
    cluster: Cluster,
    scenario: Scenario,
    levels: list[str],
    run_id: str,
    following: list[Any],
    handle: RunHandle,
) -> None:
    """Start Spark's streaming queries on the run's topics once they exist (best effort:
    the batch job is the fallback, and the Metrics page says which computed the numbers).

    Not while the levels make their topics: started then, the queries' start made that step
    about half a second longer in the dashboard, on 2 cores (benchmarks/METRICS.md). Started
    after it, they lose nothing: each source reads a topic from its first offset.
    """
    from engine.metrics.streaming import not_followed, start_following

    handle.topics_made.wait()
    if handle.output is not None or handle.error is not None:
        not_followed(run_id, LabError("the run ended before they could start"))
        return
    try:
        following.append(
            start_following(
                spark,
                cluster.direct_bootstrap,
                run_id,
                levels,
                scenario.pipeline,
                messages=scenario.workload.messages,
                scenario=scenario.name,
                sink_isolation=scenario.sink_isolation,
            )
        )
    except Exception as exc:  # the Metrics page says so, and computes with the batch job
        not_followed(run_id, exc)


def finish_following(follower: Any, *, ok: bool) -> None:
    """The run ended: its metrics are finished in the background (the verdict does not wait
    for them), or, if it failed, the queries are stopped."""
    from engine.metrics.streaming import abandon, finish_in_background

    if ok:
        finish_in_background(follower)
    else:
        abandon(follower)
