"""Running a scenario from a page: a live view, serialised broker faults, errors as text."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from engine import record, settings
from engine.cluster import Cluster
from engine.errors import LabError
from engine.faults import beyond_level_words
from engine.live import RunWatch
from engine.progress import CREATING_TOPICS, Step
from engine.runner import new_run_id, run_scenario, schedule_of
from engine.scenario import Scenario
from pages._follow import Broadcast, proxy_start, room_feed
from pages._live_view import LiveView
from pages._presenter import presenter_on
from pages._roles import require_presenter
from pages._run_view import scroll_to_key
from pages._shared import ClusterService, show_error

POLL_S = 0.3  # the live view reads the history files this often


@dataclass
class RunJob:
    """A run in a background thread: its latest stage, then its output or its error."""

    stage: str
    fraction: float = 0.0
    output: dict[str, Any] | None = None
    error: BaseException | None = None
    stages: dict[str, str] = field(default_factory=dict)  # level -> its latest step
    # Set once a level has made its topics and none is making them (levels side by side
    # make them at the same moment): Spark's queries start then (follow).
    topics_made: threading.Event = field(default_factory=threading.Event)

    def progress(self, step: Step, fraction: float) -> None:
        """run_scenario's callback, from the run's threads; the script thread draws it."""
        self.stage, self.fraction = str(step), fraction
        if step.level is not None:
            self.stages = {**self.stages, step.level: step.what}
            if CREATING_TOPICS not in self.stages.values():
                self.topics_made.set()


@contextmanager
def cluster_use(service: ClusterService, scenario: Scenario) -> Iterator[None]:
    """The cluster alone for faults that hit every client on it, shared otherwise."""
    if what := beyond_level_words(list(scenario.faults)):
        with service.exclusive(f"{scenario.name} is hurting {what}"):
            yield
    else:
        with service.shared():
            yield


def one_level_at_a_time() -> bool:
    """LAB_ONE_LEVEL_AT_A_TIME=1: every run's levels one after the other, as before they ran
    side by side (to watch one level at a time, or to compare the timings)."""
    return settings.ONE_LEVEL_AT_A_TIME.flag()


def start_run(
    service: ClusterService, cluster: Cluster, scenario: Scenario, levels: list[str], run_id: str
) -> tuple[threading.Thread, RunJob]:
    """Start the run in its own thread, so the script thread can draw while it goes on.

    The thread also holds the cluster (shared or alone): if the page is left mid-run, the
    run still ends, records itself and releases the cluster.
    """
    waiting = "Waiting for the cluster: " + service.latest_announcement()
    job = RunJob(stage=waiting if service.usage.busy else "Starting")
    spark = streaming_session(scenario, levels)  # here, on the script thread

    def work() -> None:
        following: list[Any] = []
        starter = None
        if spark is not None:  # beside the run, not before it: the run does not wait
            starter = threading.Thread(
                target=follow,
                args=(spark, cluster, scenario, levels, run_id, following, job),
                name=f"follow-{run_id}",
                daemon=True,
            )
            starter.start()
        try:
            with cluster_use(service, scenario):
                job.output = run_scenario(
                    scenario,
                    cluster,
                    levels=levels,
                    progress=job.progress,
                    run_id=run_id,
                    side_by_side=False if one_level_at_a_time() else None,
                )
        except BaseException as exc:  # handed to the script thread, which shows it
            job.error = exc
        finally:
            job.topics_made.set()  # a run that failed first: its follower waits no more
            if starter is not None:
                starter.join()
            for follower in following:
                finish_following(follower, ok=job.output is not None)

    # A daemon: a dashboard being shut down does not wait for a run (its clients have
    # watchdogs of their own).
    thread = threading.Thread(target=work, name=f"run-{run_id}", daemon=True)
    thread.start()
    return thread, job


def streaming_session(scenario: Scenario, levels: list[str]) -> Any | None:
    """The dashboard's SparkSession if this run's metrics should follow it, else None.

    Only when Spark is up already (a run never waits for Spark), LAB_STREAMING_METRICS is
    on, and the run is not big (a big run's metrics are computed in a process of their own).
    """
    from engine.metrics.compute import big_run_rows
    from pages._spark import spark_service

    if not settings.STREAMING_METRICS.flag():
        return None
    if scenario.workload.messages * len(levels) >= big_run_rows():
        return None
    return spark_service().session()


def follow(
    spark: Any,
    cluster: Cluster,
    scenario: Scenario,
    levels: list[str],
    run_id: str,
    following: list[Any],
    job: RunJob,
) -> None:
    """Start Spark's streaming queries on the run's topics once they exist (best effort:
    the batch job is the fallback, and the Metrics page says which computed the numbers).

    Not while the levels make their topics: started then, the queries' start made that step
    about half a second longer in the dashboard, on 2 cores (benchmarks/METRICS.md). Started
    after it, they lose nothing: each source reads a topic from its first offset.
    """
    from engine.metrics.streaming import not_followed, start_following

    job.topics_made.wait()
    if job.output is not None or job.error is not None:
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


LIVE_KEY = "lab_live"  # the live view's block: .st-key-lab_live in the page
LIVE_STYLE = "<style>.st-key-lab_live { scroll-margin-top: 4.5rem; }</style>"


def run_live(
    service: ClusterService,
    scenario: Scenario,
    levels: list[str],
    *,
    show: Callable[[str], None] | None = None,
    started: Callable[[str], None] | None = None,
    caller_draws_result: bool = False,
) -> dict[str, Any] | None:
    """Run on the shared cluster and show it live; None (and a message) on error.

    While the run's thread works, this (the script thread) reads the run's history files and
    redraws the live view. `show(run_id)` draws the run's results below the status. The
    status says "Done" only after that, in the same script run, so the room never sees
    "Done" over an empty page. `started(run_id)` is called once the room's feed has the run
    (the Lesson page's vote takes the run then, so its viewers follow it). With
    `caller_draws_result`, the caller draws the result after this returns and tells the
    room's feed when it has (RoomFeed.presenter_drew): the viewers wait for it.
    """
    cluster = service.cluster
    status = None
    run_id = None
    try:
        require_presenter("start a run")
        if cluster is None:
            raise LabError("The cluster is not ready yet; its progress shows in the sidebar.")
        if len(cluster.node_ids) < scenario.nodes:
            raise LabError(
                f"This scenario needs a {scenario.nodes}-node cluster; the running one has "
                f"{len(cluster.node_ids)}. Stop it in the sidebar and start one with "
                f"{scenario.nodes} nodes."
            )
        # Not `with st.status(...)`: leaving the block would mark it complete before the
        # results are drawn.
        # The live lanes at the top of the screen while the run lasts (the story and the
        # settings above are read already); the results take their place when it ends.
        status = st.container(key=LIVE_KEY).status(f"Running {scenario.name}…", expanded=True)
        st.markdown(LIVE_STYLE, unsafe_allow_html=True)
        scroll_to_key(LIVE_KEY)
        bar = status.progress(0.0)
        schedule = schedule_of(scenario, False if one_level_at_a_time() else None)
        view = LiveView(status, levels, scenario.pipeline, schedule=schedule)
        run_id = new_run_id(scenario.name)
        proxy = Path(cluster.proxy.events_path) if cluster.proxy else None
        proxy_offset = proxy_start(proxy)
        watch = RunWatch(
            record.run_folder(run_id), levels, proxy_events=proxy, proxy_offset=proxy_offset
        )
        thread, job = start_run(service, cluster, scenario, levels, run_id)
        # The room follows it: viewers' pages draw the same lanes from the same files.
        room_feed().begin(
            Broadcast(
                run_id=run_id,
                title=f"{scenario.name}: {scenario.title}",
                levels=tuple(levels),
                pipeline=scenario.pipeline,
                schedule=schedule,
                proxy_events=proxy,
                proxy_offset=proxy_offset,
                presenter_draws_result=show is not None or caller_draws_result,
            )
        )
        if started is not None:
            started(run_id)
        while thread.is_alive():
            bar.progress(min(1.0, job.fraction))
            view.draw(watch.poll(), job.stage, job.stages)
            thread.join(POLL_S)
        bar.progress(min(1.0, job.fraction))
        view.draw(watch.poll(), job.stage, job.stages)  # the last lines the clients wrote
        if job.error is not None or job.output is None:
            raise job.error or LabError("The run ended without a result.")
        output = job.output
        if show is not None:
            view.draw(watch.poll(), "Drawing the results", job.stages)
            show(output["run_id"])
        # Folded: the results below tell the same story, and the room needs the screen.
        # The run id is for the engineer's screen (the tests and benchmarks read it there);
        # the projector gets the room's words.
        done = (
            "Done: every message judged; the results follow"
            if presenter_on()
            else f"Done: run {output['run_id']}"
        )
        status.update(label=done, state="complete", expanded=False)
        if not caller_draws_result:
            room_feed().presenter_drew(output["run_id"])  # the room draws it now, after this page
        return output
    except Exception as exc:
        if status is not None:
            status.update(label=f"{scenario.name} did not finish", state="error")
        show_error(exc)
        if run_id is not None:  # the room shows the failed run's record at once
            room_feed().presenter_drew(run_id)
        return None
