"""Viewers follow the presenter: the run in progress, live, then its result, then the next.

The presenter's runs (Failure lab, Lesson, Free play) are announced on a server-wide feed.
A viewer's page polls the feed from a fragment: once a second while a run goes on, drawing
the same live lanes the presenter sees from the run's history files (read once for the whole
room), and every 2 s between runs. When the run ends, or another begins, the whole page is
drawn again with the result, read once for the room too. Nothing is pushed from the
presenter's session, so a slow viewer never slows the run.

A run of the Failure lab ends on the presenter's page first: the viewers draw its result
AFTER_PRESENTER_S after the presenter's page has drawn it (or RESULT_GRACE_S after the run
ended, if the presenter's page went elsewhere), and meanwhile draw one line, not the lanes.
Thirty sessions drawing the same result at the same moment as the presenter's took the CPU
its own drawing needed (benchmarks/room_load.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from engine.face import (
    LabError,
    LevelSnapshot,
    RecordedRun,
    RunWatch,
    Schedule,
    load_run,
    run_status,
)
from pages._keep import kept
from pages._live_view import LiveView
from pages._run_view import render_run
from pages._shared import show_error

# While the presenter's run goes on. Each redraw of the live lanes is Python under the one GIL
# the run also needs: sixty viewers redrawing twice a second held the presenter's verdict back
# by half (benchmarks/README.md, "A room of 60 on any page").
POLL_S = 1.0
IDLE_POLL_S = 2.0  # between runs: only to notice the next one begin
SHARED_READ_S = 0.25  # the run's files are read at most this often, for all viewers at once
RESULT_GRACE_S = 3.0  # a result the presenter's page has not drawn by then is shown anyway
# After the presenter's page has drawn a result, its browser still lays it out; the room
# waits this long more, so that a dashboard on the presenter's own machine serves it first.
AFTER_PRESENTER_S = 0.5


@dataclass(frozen=True)
class Broadcast:
    """A run of the presenter's, as viewers need it to follow."""

    run_id: str
    title: str  # what the room is told it is watching
    levels: tuple[str, ...]
    pipeline: str  # the live view's counters: producer, processor or stream
    schedule: Schedule  # how the levels share time (engine.run.runner.schedule_of)
    proxy_events: Path | None = None
    proxy_offset: int = 0  # the proxy's event file's size when the run began
    # The presenter's page draws the result and says so (RoomFeed.presenter_drew).
    presenter_draws_result: bool = False


def proxy_start(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.exists() else 0


class RoomFeed:
    """The presenter's latest run; `version` changes whenever a new one begins.

    Whether it has ended is read from its own record (run.json), which the run writes when it
    ends, wherever the presenter's page is by then. The run's history files are read for
    every viewer at once, at most every SHARED_READ_S: a room of thirty would otherwise read
    them thirty times over, in the process that also drives the run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: Broadcast | None = None
        self.version = 0
        self._watch: RunWatch | None = None
        self._snapshots: list[LevelSnapshot] = []
        self._read_at = 0.0
        self._drawn: dict[str, float] = {}  # run -> when the presenter's page had drawn it
        self._ended_at: dict[str, float] = {}  # when a viewer first saw each run ended

    def begin(self, broadcast: Broadcast) -> None:
        watch = RunWatch(
            broadcast.run_id,
            list(broadcast.levels),
            broadcast.proxy_events,
            proxy_offset=broadcast.proxy_offset,
        )
        with self._lock:
            self.current, self.version = broadcast, self.version + 1
            self._watch, self._snapshots, self._read_at = watch, [], 0.0

    def presenter_drew(self, run_id: str) -> None:
        """The presenter's page has drawn this run's result: the room may draw it now."""
        with self._lock:
            self._drawn.setdefault(run_id, time.monotonic())  # the first drawing counts

    def has_ended(self, run_id: str) -> bool:
        """Whether the run has recorded its end; read from its record until it has, then
        remembered for the room (thirty viewers polling twice a second read it once)."""
        with self._lock:
            if run_id in self._ended_at:
                return True
        if not ended(run_id):
            return False
        with self._lock:
            self._ended_at.setdefault(run_id, time.monotonic())
        return True

    def result_ready(self, broadcast: Broadcast) -> bool:
        """Whether viewers draw the run's result now: it has ended and, when the presenter's
        page draws it, that page has (or RESULT_GRACE_S went by without it)."""
        if not self.has_ended(broadcast.run_id):
            return False
        if not broadcast.presenter_draws_result:
            return True
        now = time.monotonic()
        with self._lock:
            if (drawn := self._drawn.get(broadcast.run_id)) is not None:
                return now - drawn >= AFTER_PRESENTER_S
            return now - self._ended_at[broadcast.run_id] >= RESULT_GRACE_S

    def snapshot(self) -> tuple[int, Broadcast | None]:
        with self._lock:
            return self.version, self.current

    def live_snapshots(self) -> list[LevelSnapshot]:
        """The current run's counts so far, read again when the last read is old enough."""
        with self._lock:
            if self._watch is not None and time.monotonic() - self._read_at >= SHARED_READ_S:
                self._snapshots = self._watch.poll()
                self._read_at = time.monotonic()
            return self._snapshots


@st.cache_resource(max_entries=4)
def ended_run(run_id: str) -> RecordedRun:
    """A run that has ended, read once for the whole room (its record no longer changes).

    Thirty viewers drawing the result at the same moment would otherwise read every level's
    history and verdicts thirty times, while the presenter's page draws the same.
    """
    return load_run(run_id)


def ended(run_id: str) -> bool:
    """Whether the run has recorded its end (its folder may not exist yet at the start)."""
    return run_status(run_id) in ("complete", "failed")


@kept
def room_feed() -> RoomFeed:
    return RoomFeed()


def follow_panel(where: str) -> bool:
    """A viewer's view of the presenter's run; False (and nothing drawn) when not following."""
    following = st.toggle(
        "Follow the presenter",
        value=True,
        key=f"follow_{where}",
        help="On: this page shows the presenter's run as it happens, then its result. Off: "
        "look around; recorded runs are in Replay, Metrics and Log views.",
    )
    if not following:
        return False
    version, current = room_feed().snapshot()
    finished = current is not None and room_feed().result_ready(current)
    if current is None or finished:
        _wait_for_a_run(version)
    else:
        watch_run(version, current)
    if current is not None and finished:
        st.markdown(f"#### The presenter's latest run: {current.title}")
        try:
            render_run(ended_run(current.run_id))
        except LabError as exc:
            show_error(exc)
    return True


@st.fragment(run_every=IDLE_POLL_S)
def _wait_for_a_run(version: int) -> None:
    """Between runs: draws the whole page again when the presenter starts the next one."""
    version_now, current = room_feed().snapshot()
    if version_now != version:
        st.rerun(scope="app")
    if current is None:
        st.info("The presenter has not started a run yet; it will show here as it happens.")


@st.fragment(run_every=POLL_S)
def watch_run(version: int, current: Broadcast) -> None:
    """During a run: the live lanes; the whole page again when it ends or another begins."""
    feed = room_feed()
    if feed.snapshot()[0] != version or feed.result_ready(current):
        st.rerun(scope="app")
    if feed.has_ended(current.run_id):
        # Ended, and the presenter's page is drawing the result: one line, not thirty
        # sessions redrawing every lane while it does.
        st.markdown(f"#### The presenter's run has ended: {current.title}")
        st.caption("The result shows here as soon as the presenter's page has it.")
        return
    st.markdown(f"#### The presenter is running {current.title}")
    view = LiveView(
        st.container(), list(current.levels), current.pipeline, schedule=current.schedule
    )
    view.draw(feed.live_snapshots(), "following the presenter's run")
