"""Heavy reads done once for the room: the presenter computes, viewers see that result.

A log dump starts a JVM (Kafka's DumpLogSegments) and reading both isolation levels starts
consumers; sixty viewers each pressing the button would run sixty of them on the presenter's
cores. So only the presenter's session runs them, and keeps its latest result here, shared by
every session of this dashboard; a viewer's page shows that result, or one line saying the
presenter has not made it yet. (Spark's metrics are shared the same way, through the run's
metrics.json: pages/metrics.py.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from pages._keep import kept


@dataclass(frozen=True)
class Shared:
    value: Any
    made_at: float

    @property
    def when(self) -> str:
        return time.strftime("%H:%M:%S", time.localtime(self.made_at))


class RoomResults:
    """The presenter's latest result of each kind ("log dump", "isolation read", ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Shared] = {}

    def put(self, kind: str, value: Any) -> None:
        with self._lock:
            self._latest[kind] = Shared(value, time.time())

    def get(self, kind: str) -> Shared | None:
        with self._lock:
            return self._latest.get(kind)


@kept
def room_results() -> RoomResults:
    return RoomResults()


def not_yet(what: str) -> None:
    """A viewer's line where the presenter's result will show."""
    st.info(
        f"Only the presenter {what}, once for the whole room: it shows here as soon as the "
        "presenter has done it.",
        icon="👀",
    )


def show_presenters(kind: str, what: str, made: str, show: Callable[[Any], None]) -> None:
    """A viewer's view of a heavy read: the presenter's latest result of `kind`, drawn by
    `show`, or the line saying the presenter has not made it yet."""
    shared = room_results().get(kind)
    if shared is None:
        not_yet(what)
        return
    st.caption(f"The presenter's latest {made}, made at {shared.when}.")
    show(shared.value)
