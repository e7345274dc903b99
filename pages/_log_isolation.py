"""The Log views' Isolation levels tab: read_committed next to read_uncommitted, from a
recorded run, a live topic, or a transaction the lab holds open.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.face import (
    Cluster,
    Event,
    IsolationView,
    NemesisRecord,
    RecordedRun,
    apply_batches,
    dump_log,
    isolation_from_run,
    isolation_live,
    list_runs,
    load_run,
    marks_a_process,
    nemesis_text,
    run_has_transactions,
)
from engine.face import (
    open_transaction_demo as make_open_transaction,
)
from pages._log_common import not_ready, table, topic_picker
from pages._presenter import room_chart
from pages._roles import is_presenter, require_presenter
from pages._room_results import room_results, show_presenters
from pages._shared import show_error

ISOLATION_READ = "isolation read"
KIND_COLORS = {
    "committed": "#c8e6c9",
    "not transactional": "#c8e6c9",
    "aborted": "#ffcdd2",
    "open": "#ffe0b2",
    "marker": "#e1bee7",
}


# ---- isolation levels ------------------------------------------------------------------------
def isolation_tab(cluster: Cluster | None) -> None:
    st.markdown(
        "A **read_uncommitted** consumer gets every record up to the **high watermark** "
        "(HW), aborted ones included. A **read_committed** consumer gets only committed "
        "records, and stops at the **last stable offset** (LSO): the first offset of the "
        "oldest transaction still open. Commit and abort **markers** occupy an offset each, "
        "but no consumer ever receives them: they are the offsets missing from both reads."
    )
    source = st.radio(
        "Source",
        ["Recorded run", "Live topic", "Open a transaction (live demo)"],
        horizontal=True,
        key="logs_iso_source",
    )
    try:
        if source == "Recorded run":
            recorded_isolation()
        elif cluster is None:
            not_ready()
        elif source == "Live topic":
            live_isolation(cluster)
        else:
            open_transaction_demo(cluster)
    except Exception as exc:
        show_error(exc)


def recorded_isolation() -> None:
    runs = [r for r in list_runs() if r.get("status") == "complete"]
    if not runs:
        st.info(
            "No recorded runs yet. Run `python -m engine run scenarios/aborted-transaction.yaml`."
        )
        return
    # The aborted-transaction scenario is the one written for this view.
    default = next((i for i, r in enumerate(runs) if r.get("scenario") == "aborted-transaction"), 0)

    def label(meta: dict[str, Any]) -> str:  # a run's run.json, as list_runs reads it (JSON)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0))
        return f"{meta.get('scenario', '?')} · {when}"

    left, mid, right = st.columns([3, 2, 1])
    meta = left.selectbox("Run", runs, index=default, format_func=label, key="logs_iso_run")
    run = load_run(meta["run_id"])
    levels = list(run.levels)
    with_txn = [lv for lv in levels if run_has_transactions(run, lv)]
    level = mid.selectbox(
        "Level",
        levels,
        index=levels.index(with_txn[0]) if with_txn else 0,
        key=f"logs_iso_level_{meta['run_id']}",
    )
    partition = int(right.number_input("Partition", 0, 999, 0, key="logs_iso_run_part"))
    if level not in with_txn:
        st.info("This level wrote no transactions, so both isolation levels read the same.")
    show_isolation(isolation_from_run(run, level, partition))
    readings = offsets_readings(run, level)
    if readings:
        st.subheader("The last stable offset and the high watermark during the run")
        st.caption(
            "Read from the partition's leader every 0.1 s while the run lasted (ListOffsets at "
            "read_committed gives the LSO, at read_uncommitted the high watermark): read, not "
            "inferred. Where the LSO stays below the high watermark, a transaction is open and "
            "read_committed readers wait."
        )
        room_chart(offsets_figure(readings, run.levels[level].history))


def offsets_readings(run: RecordedRun, level: str) -> list[dict[str, Any]]:
    """The run's own readings of the LSO and high watermark (scenarios with watch_offsets):
    the nemesis's `offsets` records in the level's history, free-form JSON as written."""
    history = run.levels[level].history
    return [
        e
        for e in history
        if e.get("ev") == Event.NEMESIS and e.get("kind") == NemesisRecord.OFFSETS
    ]


def offsets_figure(readings: list[dict[str, Any]], history: list[dict[str, Any]]) -> go.Figure:
    """LSO and high watermark as steps over the run's seconds, with the nemesis's own acts."""
    start = min(e["t"] for e in history)
    fig = go.Figure()
    for key, name, colour in (
        ("high_watermark", "high watermark (read_uncommitted stops here)", "#1565c0"),
        ("lso", "last stable offset (read_committed stops here)", "#2e7d32"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[r["t"] - start for r in readings],
                y=[r[key] for r in readings],
                mode="lines+markers",
                line={"shape": "hv", "color": colour, "width": 3},
                name=name,
            )
        )
    for event in history:
        if event.get("ev") == Event.NEMESIS and marks_a_process(event):
            fig.add_vline(
                x=event["t"] - start,
                line_dash="dot",
                annotation_text=nemesis_text(event, short=True),
            )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": "seconds since the level started"},
        yaxis={"title": "offset"},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


def live_isolation(cluster: Cluster) -> None:
    if not is_presenter():
        # Consumers at both isolation levels and a log dump: once, for the room.
        show_presenters(ISOLATION_READ, "reads both isolation levels", "reading", show_isolation)
        return
    picked = topic_picker(cluster, "logs_live_topic")
    if picked is None:
        return
    topic, partition = picked
    exact = st.checkbox(
        "Exact markers and producer ids (runs Kafka's DumpLogSegments, about 2 s)",
        value=cluster.backend in ("local", "docker"),
        key="logs_live_exact",
    )
    if st.button("Read both isolation levels", type="primary"):
        view = isolation_live(cluster.direct_bootstrap, topic, partition)
        if exact:
            view = apply_batches(view, dump_log(cluster, topic, partition).batches)
        st.session_state["logs_live_view"] = view
        room_results().put(ISOLATION_READ, view)
    view = st.session_state.get("logs_live_view")
    if view is not None:
        show_isolation(view)


def open_transaction_demo(cluster: Cluster) -> None:
    st.markdown(
        "The lab commits a transaction of three records, aborts one of two, then leaves a "
        "third open and reads both isolation levels: read_committed is **held at the LSO** "
        "while read_uncommitted reads up to the HW. Then it commits, and reads again."
    )
    count = int(st.number_input("Records in the open transaction", 1, 100, 3))
    if not is_presenter():
        st.caption(
            "Running the demo's transactions is the presenter's to do, on the shared screen."
        )
    elif st.button("Run the demo", type="primary"):
        require_presenter("run transactions on the cluster")
        with st.status("Running the transactions…", expanded=True) as status:
            demo = make_open_transaction(
                cluster.direct_bootstrap, open_records=count, progress=status.write
            )
            if cluster.backend in ("local", "docker"):
                # The log only grows: one dump after the commit types both views' markers.
                status.write("Dumping the log for the exact markers and producer ids")
                batches = dump_log(cluster, demo.topic).batches
                apply_batches(demo.while_open, batches)
                apply_batches(demo.after_commit, batches)
            status.update(label="Done", state="complete", expanded=False)
        st.session_state["logs_demo"] = demo
        st.session_state["logs_last_topic"] = demo.topic
    demo = st.session_state.get("logs_demo")
    if demo is None:
        return
    st.subheader("While the third transaction is open")
    show_isolation(demo.while_open)
    st.subheader("After it commits")
    show_isolation(demo.after_commit)


def show_isolation(view: IsolationView) -> None:
    st.caption(f"`{view.topic}` partition {view.partition} · {view.source}")
    m = st.columns(5)
    m[0].metric("Log start", view.log_start)
    m[1].metric("Last stable offset", view.last_stable_offset, help="read_committed stops here")
    m[2].metric("High watermark", view.high_watermark, help="read_uncommitted stops here")
    m[3].metric("Aborted records", len(view.aborted))
    m[4].metric("Markers", len(view.markers))
    room_chart(isolation_figure(view))
    rows = []
    for r in view.rows:
        what = r.kind
        if r.kind == "marker":
            what = f"{r.marker or 'control'} marker" + ("" if r.exact else " (inferred)")
        elif r.kind == "open":
            what = "open transaction (beyond the LSO)"
        row = {
            "offset": r.offset,
            "key": r.key,
            view.value_label: r.value,
            "read_uncommitted": "✓" if r.read_uncommitted else "—",
            "read_committed": "✓" if r.read_committed else "—",
            "what": what,
            "_state": r.kind,
        }
        if any(x.producer for x in view.rows):
            row["producer id/epoch"] = r.producer
        if any(x.txn for x in view.rows):
            row["transaction"] = r.txn
        if any(x.sink_wait_ms is not None for x in view.rows):
            row["sink got it (ms after the ack)"] = r.sink_wait_ms
        if view.value_label != "value":
            row.pop("key")
        rows.append(row)
    table(pd.DataFrame(rows), KIND_COLORS)
    for note in view.notes:
        st.caption(note)


LANES = ("in the log", "read_uncommitted", "read_committed")
LEGEND = {"committed": "committed", "aborted": "aborted", "open": "open", "marker": "marker"}


def isolation_figure(view: IsolationView) -> go.Figure:
    """The log and both reads as rows of offset cells, with the LSO and the HW drawn across."""
    fig = go.Figure()
    for kind, label in LEGEND.items():
        of_kind = [
            r
            for r in view.rows
            if r.kind == kind or (kind == "committed" and r.kind == "not transactional")
        ]
        for lane in LANES:
            picked = [r for r in of_kind if lane == "in the log" or getattr(r, lane)]
            if not picked:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[r.offset for r in picked],
                    y=[lane] * len(picked),
                    mode="markers",
                    marker={
                        "symbol": "square",
                        "size": 18,
                        "color": KIND_COLORS[kind],
                        "line": {"width": 1, "color": "#555"},
                    },
                    name=label,
                    legendgroup=kind,
                    showlegend=lane == "in the log",
                    hovertext=[f"offset {r.offset}: {r.value or r.marker or ''}" for r in picked],
                )
            )
    lso, hw = view.last_stable_offset, view.high_watermark
    lines = [(hw, f"LSO = HW = {hw}")] if lso == hw else [(lso, f"LSO {lso}"), (hw, f"HW {hw}")]
    for x, label in lines:
        fig.add_vline(x=x - 0.5, line_dash="dash", annotation_text=label)
    fig.update_layout(
        height=240,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(LANES))},
        xaxis={"title": "offset", "dtick": 1 if view.high_watermark <= 60 else None},
    )
    return fig
