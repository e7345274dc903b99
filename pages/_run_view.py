"""Shows a recorded run: counts per level side by side, a timeline, the verdict table.

Used by the Failure lab (right after a run) and by Replay (any run from runs/, no cluster
needed). Everything drawn here is read from the run's record; nothing is made up.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.checker import LATENCY_DEFINITION

COUNTS = [
    ("sent", "Sent", "ids the producer handed to the client library"),
    ("acked", "Acked", "ids the broker acknowledged to the producer"),
    ("delivered", "Delivered", "distinct ids in the judged topic, at the level's isolation"),
    ("duplicates", "Duplicates", "extra copies beyond the first"),
    ("lost", "Lost", "ids the workload meant to deliver that are not there"),
    ("reordered", "Reordered", "ids stored after a later-created id in the same partition"),
]
EVENT_STYLE = {
    "send": ("sent", "#9e9e9e", "circle-open"),
    "ack": ("acked", "#2e7d32", "circle"),
    "fail": ("failed", "#c62828", "x"),
    "output_acked": ("output written", "#6a1b9a", "diamond"),
    "consumed_sink": ("seen by the sink", "#1565c0", "triangle-up"),
}


def render_run(run: dict[str, Any]) -> None:
    meta, stored = run["meta"], run["result"]["results"]
    # Show the levels in the order they were run (the saved JSON's keys are sorted).
    order = [lv for lv in meta.get("levels", []) if lv in stored]
    results = {lv: stored[lv] for lv in order + sorted(set(stored) - set(order))}
    if meta.get("status") == "failed":
        st.error(f"This run failed: {meta.get('reason')}", icon="⚠️")
    if not results:
        st.info("This run recorded no results.")
        return
    st.caption(f"Run `{meta['run_id']}` · scenario **{meta['scenario']}** · {', '.join(results)}")
    columns = st.columns(len(results))
    for column, (level, result) in zip(columns, results.items(), strict=True):
        with column, st.container(border=True):
            st.subheader(level)
            st.caption(f"reads `{result['sink_topic']}` at **{result['isolation']}**")
            left, right = st.columns(2)
            for i, (key, label, helptext) in enumerate(COUNTS):
                (left if i % 2 == 0 else right).metric(label, result[key], help=helptext)
            extra = []
            if result.get("fenced"):
                extra.append(f"🛡️ **{result['fenced']}** write(s) fenced")
            if result.get("aborted_visible"):
                extra.append(f"👻 **{result['aborted_visible']}** aborted record(s) visible")
            if "effects" in result:
                extra.append(
                    f"🗝️ **{result['effects']}** effect(s) applied in the database; "
                    f"**{result['duplicates_absorbed']}** duplicate delivery(ies) absorbed by "
                    "the idempotency key"
                )
            for line in extra:
                st.markdown(line)
            # Every count the level's promise excludes (and any reordering), explained
            # from this run's own history.
            for line in (result.get("explain") or {}).get("why", []):
                st.markdown(f"🔎 {line}")
            lat = result["latency_ms"]
            if lat.get("p50") is not None:
                st.caption(
                    f"latency p50 {lat['p50']:.0f} ms · p99 {lat['p99']:.0f} ms · "
                    f"max {lat['max']:.0f} ms",
                    help=LATENCY_DEFINITION,
                )

    render_evidence(results)
    level = st.radio(
        "Level to inspect", list(results), horizontal=True, key=f"lvl-{meta['run_id']}"
    )
    data = run["levels"].get(level)
    if not data:
        return
    st.plotly_chart(timeline_figure(data["history"], results[level]), width="stretch")
    verdicts = pd.DataFrame(data["verdicts"])
    if verdicts.empty:
        return
    kinds = sorted(verdicts["verdict"].unique())
    chosen = st.multiselect(
        "Show verdicts", kinds, default=kinds, key=f"v-{meta['run_id']}-{level}"
    )
    shown = verdicts[verdicts["verdict"].isin(chosen)]
    st.dataframe(
        shown[
            [
                "id",
                "verdict",
                "copies",
                "offsets",
                "ack",
                "latency_ms",
                "reordered",
                "aborted_copies",
            ]
        ],
        hide_index=True,
        width="stretch",
    )


def render_evidence(results: dict[str, Any]) -> None:
    """What the faults did and how Kafka answered, per level; then the application's choices."""
    explained = {lv: r["explain"] for lv, r in results.items() if r.get("explain")}
    if not any(e["evidence"] or e["choices"] for e in explained.values()):
        return
    # A choice every level made is said once, below the columns.
    shared = set.intersection(*(set(e["choices"]) for e in explained.values()))
    with st.expander("What happened, from the run's evidence", expanded=True):
        columns = st.columns(len(explained))
        for column, (level, why) in zip(columns, explained.items(), strict=True):
            with column:
                st.markdown(f"**{level}**")
                for line in why["evidence"]:
                    st.markdown(f"- {line}")
                for line in why["choices"]:
                    if line not in shared:
                        st.markdown(f"- 🧩 *The application's choice:* {line}")
        for line in sorted(shared):
            st.markdown(f"🧩 *The application's choice, at every level:* {line}")


def timeline_figure(history: list[dict[str, Any]], result: dict[str, Any]) -> go.Figure:
    """Each message's path over time (sent, acked, written, seen), with faults as bands."""
    start = result.get("started_at") or (history[0]["t"] if history else 0.0)
    points: dict[str, list[tuple[float, int, str]]] = {k: [] for k in EVENT_STYLE}
    for event in history:
        message_id = event.get("id")
        if message_id is None:
            continue
        base = str(event.get("proc", "")).split("#")[0]
        kind = event.get("ev")
        if base == "sink" and kind == "consumed":
            kind = "consumed_sink"
        elif base == "source":
            continue
        if kind in points:
            points[kind].append((event["t"] - start, message_id, event.get("proc", "")))
    figure = go.Figure()
    for kind, rows in points.items():
        if not rows:
            continue
        label, colour, symbol = EVENT_STYLE[kind]
        figure.add_trace(
            go.Scatter(
                x=[r[0] for r in rows],
                y=[r[1] for r in rows],
                mode="markers",
                name=label,
                marker={"color": colour, "symbol": symbol, "size": 8},
                text=[r[2] for r in rows],
                hovertemplate="id %{y} · %{x:.3f}s · %{text}",
            )
        )
    draw_fault_bands(figure, result, start)
    figure.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title="seconds since the level started",
        yaxis_title="message id",
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def draw_fault_bands(
    figure: go.Figure, result: dict[str, Any], start: float, *, opacity: float = 0.18, **where: Any
) -> None:
    """Shade each fault of a level's result on `figure` (`where`: a subplot's row and col)."""
    for band in fault_bands(result, start):
        figure.add_vrect(
            x0=band["x0"],
            x1=band["x1"],
            fillcolor=band["colour"],
            opacity=opacity,
            line_width=0,
            annotation_text=band["label"],
            annotation_position="top left",
            **where,
        )


def fault_bands(result: dict[str, Any], start: float) -> list[dict[str, Any]]:
    """Faults as time bands: a pause lasts until its resume; an instant fault gets 50 ms."""
    bands = []
    paused_at: dict[str, float] = {}
    for fault in result.get("faults", []):
        kind, t = fault["kind"], fault["t"] - start
        if kind == "pause":
            paused_at[str(fault.get("target"))] = t
            continue
        if kind == "resume" and str(fault.get("target")) in paused_at:
            bands.append(
                {
                    "x0": paused_at.pop(str(fault["target"])),
                    "x1": t,
                    "label": f"{fault['target']} paused",
                    "colour": "#f9a825",
                }
            )
            continue
        if kind in ("rules_cleared", "latency_set", "drop-produce-response", "connection_reset"):
            continue  # set-up and clean-up, or the consequence of a drop already shown
        duration = float(fault.get("duration_s") or 0.05)
        label = {
            "produce_response_dropped": "ack dropped",
            "produce_request_dropped": "request lost",
        }.get(kind, kind)
        colour = "#c62828" if kind in ("crash", "kill-leader") else "#ef6c00"
        bands.append({"x0": t, "x1": t + duration, "label": label, "colour": colour})
    for target, t in paused_at.items():
        bands.append({"x0": t, "x1": t + 0.05, "label": f"{target} paused", "colour": "#f9a825"})
    return bands
