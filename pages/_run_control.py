"""Running a scenario from a page: a live view, serialised broker faults, errors as text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import streamlit as st

from engine.face import (
    ONE_LEVEL_AT_A_TIME,
    STREAMING_METRICS,
    LabError,
    RunWatch,
    Scenario,
    beyond_level_words,
    big_run_rows,
    new_run_id,
    schedule_of,
    start_run,
)
from pages._follow import Broadcast, proxy_start, room_feed
from pages._live_view import LiveView
from pages._presenter import presenter_on
from pages._roles import require_presenter
from pages._run_view import scroll_to_key
from pages._shared import ClusterService, show_error

POLL_S = 0.3  # the live view reads the history files this often


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
    return ONE_LEVEL_AT_A_TIME.flag()


def streaming_session(scenario: Scenario, levels: list[str]) -> Any | None:
    """The dashboard's SparkSession if this run's metrics should follow it, else None.

    Only when Spark is up already (a run never waits for Spark), LAB_STREAMING_METRICS is
    on, and the run is not big (a big run's metrics are computed in a process of their own).
    """
    from pages._spark import spark_service

    if not STREAMING_METRICS.flag():
        return None
    if scenario.workload.messages * len(levels) >= big_run_rows():
        return None
    return spark_service().session()


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

    What it returns is the run's output as `engine run --json` prints it (JSON, the same as
    its result.json), of which the callers read the run's id: every page draws a run's
    results from its record (load_run), each level's as the typed LevelResult
    (RecordedRun.levels_judged), whether the run has just ended or is replayed.

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
        watch = RunWatch(run_id, levels, proxy_events=proxy, proxy_offset=proxy_offset)
        job = start_run(
            cluster,
            scenario,
            levels,
            run_id,
            holding=lambda: cluster_use(service, scenario),
            # Spark's session is taken here, on the script thread: st.cache_resource's.
            spark=streaming_session(scenario, levels),
            side_by_side=False if one_level_at_a_time() else None,
            stage="Waiting for the cluster: " + service.latest_announcement()
            if service.usage.busy
            else "Starting",
        )
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
        while job.running():
            bar.progress(min(1.0, job.fraction))
            view.draw(watch.poll(), job.stage, job.stages)
            job.wait(POLL_S)
        bar.progress(min(1.0, job.fraction))
        view.draw(watch.poll(), job.stage, job.stages)  # the last lines the clients wrote
        output = job.result()
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
