"""Viewers follow the presenter: the run in progress, live, then its result, then the next.

The presenter's runs (Failure lab, Lesson, Free play) are announced on a server-wide feed.
A viewer's page polls the feed twice a second in a fragment: while a run goes on it draws
the same live lanes the presenter sees, read by this viewer's own follower of the run's
history files; when the run ends, or another begins, the whole page is drawn again with the
result. Nothing is pushed from the presenter's session, so a slow viewer never slows the run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from engine import record
from engine.errors import LabError
from engine.live import RunWatch
from pages._live_view import LiveView
from pages._run_view import render_run
from pages._shared import show_error

POLL_S = 0.5


@dataclass(frozen=True)
class Broadcast:
    """A run of the presenter's, as viewers need it to follow."""

    run_id: str
    title: str  # what the room is told it is watching
    levels: tuple[str, ...]
    pipeline: str  # the live view's counters: producer, processor or stream
    together: bool  # levels side by side, or one at a time
    proxy_events: Path | None = None
    proxy_offset: int = 0  # the proxy's event file's size when the run began


def proxy_start(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.exists() else 0


class RoomFeed:
    """The presenter's latest run; `version` changes whenever a new one begins.

    Whether it has ended is read from its own record (run.json), which the run writes when it
    ends, wherever the presenter's page is by then.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: Broadcast | None = None
        self.version = 0

    def begin(self, broadcast: Broadcast) -> None:
        with self._lock:
            self.current, self.version = broadcast, self.version + 1

    def snapshot(self) -> tuple[int, Broadcast | None]:
        with self._lock:
            return self.version, self.current


@st.cache_resource
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
    finished = current is not None and record.run_status(current.run_id) != "running"
    _watch(version, current, finished)
    if current is not None and finished:
        st.markdown(f"#### The presenter's latest run: {current.title}")
        try:
            render_run(record.load_run(current.run_id))
        except LabError as exc:
            show_error(exc)
    return True


@st.fragment(run_every=POLL_S)
def _watch(version: int, current: Broadcast | None, finished: bool) -> None:
    """Redraws the live lanes; draws the whole page again when a run begins or ends."""
    if room_feed().snapshot()[0] != version:
        st.rerun(scope="app")
    if current is None:
        st.info("The presenter has not started a run yet; it will show here as it happens.")
        return
    if finished:
        return
    if record.run_status(current.run_id) != "running":
        st.rerun(scope="app")
    key = "follow_watch"
    held = st.session_state.get(key)
    if held is None or held[0] != current.run_id:
        watch = RunWatch(
            record.run_folder(current.run_id),
            list(current.levels),
            current.proxy_events,
            proxy_offset=current.proxy_offset,
        )
        held = st.session_state[key] = (current.run_id, watch)
    st.markdown(f"#### The presenter is running {current.title}")
    view = LiveView(
        st.container(), list(current.levels), current.pipeline, together=current.together
    )
    view.draw(held[1].poll(), "following the presenter's run")
