"""Draws a run while it happens: one lane per level, side by side, counters and faults ticking.

Everything comes from engine.teach.live, which reads the run's own history files: a counter moves
only when a client has written the event, and a fault shows at the time the nemesis, the
proxy or the client recorded it. The placeholders are redrawn in place a few times a second.
A level that has not begun (its scenario runs the levels one at a time) says so in its lane.
"""

from __future__ import annotations

from html import escape

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from engine.face import (
    LEVELS,
    LevelSnapshot,
    Schedule,
    fold_faults,
)

# The live view's header: how the levels share time (engine.run.runner.schedule_of).
SCHEDULE_WORDS: dict[Schedule, str] = {
    "side-by-side": "the levels run side by side, at the same time",
    "shared-faults": (
        "the levels run at the same time, and each broker fault strikes them all at once"
    ),
    "one-at-a-time": "the levels run one at a time: this scenario's faults hurt the whole cluster",
}

# (snapshot field, card label, what it counts); one set per pipeline. Labels are short words:
# at 150% zoom four lanes of two cards leave about 45 px a label, and a word never breaks.
COUNTERS: dict[str, list[tuple[str, str, str]]] = {
    "producer": [
        ("sent", "Sent", "send events: ids the producer handed to the client library"),
        ("acked", "Acked", "ack events: the broker acknowledged the write"),
        ("failed", "Failed", "fail events: the client library gave up on the id"),
        ("seen", "Seen by the sink", "consumed events of the sink, copies included"),
    ],
    "processor": [
        ("input_written", "Input written", "ack events of the source that writes the input"),
        ("read", "Read by the processor", "consumed events of every processor instance"),
        ("outputs", "Outputs written", "output_acked events of every processor instance"),
        ("seen", "Seen by the sink", "consumed events of the sink, copies included"),
    ],
    # Free play: the level's own producer writes the stream the processor reads. A viewer's
    # lanes carry every row of the presenter's table (pages/free_play.py, COUNT_ROWS).
    "stream": [
        ("sent", "Sent", "send events of the stream's producer"),
        ("acked", "Acked", "ack events: the broker acknowledged the write"),
        ("failed", "Failed", "fail events: the producer's client library gave up on the id"),
        (
            "read",
            "Reads by the processor",
            "consumed events of every processor instance; a "
            "batch read again after an abort or a restart counts again",
        ),
        ("outputs", "Outputs written", "output_acked events of every processor instance"),
        ("seen", "Seen by the sink", "consumed events of the sink, copies included"),
        (
            "seen_again",
            "Seen more than once",
            "copies beyond the first: the sink's consumed events minus the distinct ids it saw",
        ),
    ],
}


MAX_FAULT_LINES = 12  # the newest; a lane longer than the screen hides the counters' story


def level_title(level: str) -> str:
    return LEVELS[level].title if level in LEVELS else level


class LiveView:
    """Placeholders inside the run's status box, filled again at each poll."""

    def __init__(
        self,
        box: DeltaGenerator,
        levels: list[str],
        pipeline: str,
        *,
        schedule: Schedule = "side-by-side",
    ) -> None:
        self.levels, self.pipeline = levels, pipeline
        # Side by side or under shared faults the levels run at once, each lane at its step.
        self.together = schedule != "one-at-a-time"
        self.how = SCHEDULE_WORDS[schedule]
        self.header = box.empty()
        self.lanes = box.empty()

    def draw(
        self,
        snapshots: list[LevelSnapshot],
        stage: str,
        stages: dict[str, str] | None = None,
    ) -> None:
        """Redraw every lane from the snapshots; `stages` is each level's latest step."""
        by_level = {s.level: s for s in snapshots}
        self.draw_header(snapshots, stage)
        with self.lanes.container():
            columns = st.columns(len(self.levels), border=True)
            for column, level in zip(columns, self.levels, strict=True):
                with column:
                    self.draw_lane(level, by_level.get(level), (stages or {}).get(level))

    def draw_header(self, snapshots: list[LevelSnapshot], stage: str) -> None:
        how = self.how
        clock = ""
        starts = [s.started_at for s in snapshots if s.started_at is not None]
        lasts = [s.last_t for s in snapshots if s.last_t is not None]
        if starts and lasts:
            clock = f" · last event {max(lasts) - min(starts):.1f} s after the first"
        # Side by side, each lane shows its own step; one at a time, the run's step says which.
        step = "" if self.together else f"  \n{stage}"
        self.header.markdown(f"**Live, from the run's history files** ({how}){clock}{step}")

    def draw_lane(self, level: str, snapshot: LevelSnapshot | None, stage: str | None) -> None:
        st.markdown(f"#### {escape(level_title(level))}")
        if snapshot is None:
            st.caption(stage or "waiting for its turn")
            return
        st.caption(stage or "running")
        counters = COUNTERS[self.pipeline]
        for first in range(0, len(counters), 2):  # two a row; an odd last one alone
            row = counters[first : first + 2]
            for cell, (field, label, helptext) in zip(st.columns(2), row, strict=False):
                cell.metric(label, getattr(snapshot, field), help=helptext)
        if not snapshot.faults:
            st.markdown("*No fault has fired yet.*")
            return
        lines = []
        # Repeats of one fault (a broker refusing write after write) fold into one line.
        for fault in fold_faults(snapshot.faults)[-MAX_FAULT_LINES:]:
            at = snapshot.since_start(fault.t)
            when = f"{at:.2f} s" if at is not None else ""
            if fault.count > 1 and at is not None:
                until = snapshot.since_start(fault.last_t) or 0.0
                when = f"{at:.2f}–{until:.2f} s"
            times = f" <b>×{fault.count}</b>" if fault.count > 1 else ""
            raw = f" <small style='color:#757575'>{escape(fault.raw)}</small>" if fault.raw else ""
            lines.append(f"<div>⚡ <b>{when}</b> {escape(fault.text)}{times}{raw}</div>")
        st.markdown(
            "<div style='font-size:1.2rem;line-height:1.45'>" + "".join(lines) + "</div>",
            unsafe_allow_html=True,
        )


def summary(snapshot: LevelSnapshot, pipeline: str) -> str:
    """One line for a level already run: its final counters and its faults."""
    counts = " · ".join(
        f"{label.lower()} {getattr(snapshot, field)}" for field, label, _ in COUNTERS[pipeline]
    )
    faults = "; ".join(
        f.text + (f" ×{f.count}" if f.count > 1 else "") for f in fold_faults(snapshot.faults)
    )
    faults = faults or "no fault fired"
    return f"**{snapshot.level}**: {counts} · {faults}"
