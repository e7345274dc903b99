"""Draws a run while it happens: the level being run, its counters, its faults as they fire.

Everything comes from engine.live, which reads the run's own history files: a counter moves
only when a client has written the event, and a fault shows at the time the nemesis, the
proxy or the client recorded it. The placeholders are redrawn in place a few times a second.
"""

from __future__ import annotations

from html import escape

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from engine.live import LevelSnapshot

# (snapshot field, card label, what it counts); one set per pipeline.
COUNTERS: dict[str, list[tuple[str, str, str]]] = {
    "producer": [
        ("sent", "Sent", "send events: ids the producer handed to the client library"),
        ("acked", "Acknowledged", "ack events: the broker confirmed the write"),
        ("failed", "Failed", "fail events: the client library gave up on the id"),
        ("seen", "Seen by the sink", "consumed events of the sink, copies included"),
    ],
    "processor": [
        ("input_written", "Input written", "ack events of the source that writes the input"),
        ("read", "Read by the processor", "consumed events of every processor instance"),
        ("outputs", "Outputs written", "output_acked events of every processor instance"),
        ("seen", "Seen by the sink", "consumed events of the sink, copies included"),
    ],
}


class LiveView:
    """Placeholders inside the run's status box, filled again at each poll."""

    def __init__(self, box: DeltaGenerator, levels: list[str], pipeline: str) -> None:
        self.levels, self.pipeline = levels, pipeline
        self.header = box.empty()
        self.counters = box.empty()
        self.faults = box.empty()
        self.earlier = box.empty()

    def draw(self, snapshots: list[LevelSnapshot], stage: str) -> None:
        if not snapshots:
            self.header.markdown(f"**{stage}**")
            return
        current = snapshots[-1]
        self.draw_header(current, len(snapshots), stage)
        self.draw_counters(current)
        self.draw_faults(current)
        self.draw_earlier(snapshots[:-1])

    def draw_header(self, current: LevelSnapshot, number: int, stage: str) -> None:
        clock = ""
        if current.started_at is not None and current.last_t is not None:
            clock = f" · last event {current.last_t - current.started_at:.1f} s into the level"
        self.header.markdown(
            f"### Level {number} of {len(self.levels)}: {current.level}\n\n{stage}{clock}"
        )

    def draw_counters(self, current: LevelSnapshot) -> None:
        with self.counters.container():
            columns = st.columns(len(COUNTERS[self.pipeline]))
            for column, (field, label, helptext) in zip(
                columns, COUNTERS[self.pipeline], strict=True
            ):
                column.metric(label, getattr(current, field), help=helptext)

    def draw_faults(self, current: LevelSnapshot) -> None:
        if not current.faults:
            self.faults.markdown("*No fault has fired yet in this level.*")
            return
        lines = []
        for fault in current.faults:
            at = current.since_start(fault.t)
            when = f"{at:6.2f} s" if at is not None else ""
            lines.append(f"<div>⚡ <b>{when}</b> &nbsp;{escape(fault.text)}</div>")
        self.faults.markdown(
            "<div style='font-size:1.4rem;line-height:1.6'>" + "".join(lines) + "</div>",
            unsafe_allow_html=True,
        )

    def draw_earlier(self, done: list[LevelSnapshot]) -> None:
        if not done:
            self.earlier.empty()
            return
        self.earlier.markdown("\n".join(f"- {summary(s, self.pipeline)}" for s in done))


def summary(snapshot: LevelSnapshot, pipeline: str) -> str:
    """One line for a level already run: its final counters and its faults."""
    counts = " · ".join(
        f"{label.lower()} {getattr(snapshot, field)}" for field, label, _ in COUNTERS[pipeline]
    )
    faults = "; ".join(f.text for f in snapshot.faults) or "no fault fired"
    return f"**{snapshot.level}**: {counts} · {faults}"
