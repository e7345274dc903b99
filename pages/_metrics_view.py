"""Charts of Spark's metrics: rates, latency distribution, throughput, and a scenario's history.

Every figure is drawn from the `engine metrics` object saved in a run folder (metrics.json);
the pure functions here build Plotly figures and tables, and the Metrics page lays them out.
Spark's metrics stay JSON, read by name: each level's entry holds the checker's fields with
Spark's own beside them (messages, duplicated_share, latency_distribution_ms, throughput);
the run's judged result, which the page compares them with, is the typed LevelResult
(shared_judged). A run's meta (run.json) is JSON too.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from engine.face import (
    LevelResult,
    list_runs,
    load_judged,
    load_metrics,
    runs_signature,
    saved_stamp,
)
from pages._presenter import DESK_PX, ROOM_PX, room_chart, room_table
from pages._run_view import ANOMALY_COUNTS, draw_fault_bands

# One colour per level, the same in every chart of the page.
LEVEL_COLOURS = {
    "at-most-once": "#c62828",
    "at-least-once": "#ef6c00",
    "idempotent-only": "#6a1b9a",
    "exactly-once": "#2e7d32",
    "idempotency-key": "#1565c0",
}
RATES = [
    ("duplicated_share", "messages duplicated"),
    ("lost", "messages lost"),
    ("reordered", "messages reordered"),
    ("aborted_visible", "aborted records visible"),
]


def colour(level: str) -> str:
    return LEVEL_COLOURS.get(level, "#616161")


def ordered_results(metrics: dict[str, Any], order: list[str] | None = None) -> dict[str, Any]:
    results = metrics.get("results", {})
    first = [lv for lv in order or [] if lv in results]
    return {lv: results[lv] for lv in first + sorted(set(results) - set(first))}


def failing_level(results: dict[str, Any]) -> int:
    """The level to open Spark's verdicts on: the first where Spark counted the scenario's
    failure, else the first (as the run's view opens on its own: _run_view.failing_level)."""
    for index, result in enumerate(results.values()):
        if any((result.get(count) or 0) > 0 for count in ANOMALY_COUNTS):
            return index
    return 0


def rate(result: dict[str, Any], key: str) -> float:
    """A count as a share of the run's messages (duplicated_share is one already)."""
    if key == "duplicated_share":
        return float(result.get("duplicated_share") or 0.0)
    messages = result.get("messages") or 0
    return (result.get(key) or 0) / messages if messages else 0.0


# Each kind of damage in its own panel and colour, so that a lone bar (at-most-once's losses)
# cannot be read as one of its neighbours (the duplicates beside it, in a grouped chart).
RATE_COLOURS = {
    "duplicated_share": "#ef6c00",
    "lost": "#c62828",
    "reordered": "#6a1b9a",
    "aborted_visible": "#1565c0",
}


def rates_figure(results: dict[str, Any]) -> go.Figure:
    """One panel per kind of damage, one bar per level, as a share of the messages."""
    from plotly.subplots import make_subplots

    levels = list(results)
    figure = make_subplots(
        rows=1, cols=len(RATES), subplot_titles=[label for _key, label in RATES], shared_yaxes=True
    )
    for column, (key, label) in enumerate(RATES, start=1):
        figure.add_trace(
            _panel_bar(
                label,
                levels,
                [100 * rate(results[level], key) for level in levels],
                RATE_COLOURS[key],
                [_count_text(results[level], key) for level in levels],
                "%{y:.1f}%",
            ),
            row=1,
            col=column,
        )
    figure.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        bargap=0.3,
    )
    figure.update_yaxes(title_text="% of the run's messages", row=1, col=1)
    figure.update_xaxes(tickangle=-30)
    return figure


def _panel_bar(
    title: str, levels: list[str], values: list[float], hue: str, texts: list[str], shown: str
) -> go.Bar:
    """A panel's bars: one per level, its count written above it, `shown` on hover."""
    return go.Bar(
        name=title,
        x=levels,
        y=values,
        marker_color=hue,
        text=texts,
        textposition="outside",
        textfont={"size": 14},
        hovertemplate="%{x}: " + shown + "<extra>" + title + "</extra>",
        showlegend=False,
    )


# What the live panel shows of a followed run's records so far (SoFar.counts' keys).
SO_FAR_PANELS = [
    ("delivered", "messages in the topic", "#2e7d32"),
    ("duplicates", "extra copies (duplicates)", "#ef6c00"),
    ("aborted_visible", "aborted records visible", "#1565c0"),
]


def so_far_figure(counts: dict[str, dict[str, int]], messages: int) -> go.Figure:
    """One panel per count, one bar per level, each bar labelled with its count."""
    levels = list(counts)
    figure = make_subplots(
        rows=1, cols=len(SO_FAR_PANELS), subplot_titles=[t for _k, t, _c in SO_FAR_PANELS]
    )
    for column, (key, title, hue) in enumerate(SO_FAR_PANELS, start=1):
        values = [counts[level].get(key, 0) for level in levels]
        texts = [f"{v:,}" if v else "" for v in values]
        figure.add_trace(_panel_bar(title, levels, values, hue, texts, "%{y:,}"), row=1, col=column)
    # Fixed axes while the bars grow: the messages for the first panel, so a level's bar
    # reaching the top means all of the run's messages are in its topic.
    figure.update_yaxes(range=[0, messages * 1.15], row=1, col=1)
    for column, (key, _title, _hue) in enumerate(SO_FAR_PANELS[1:], start=2):
        top = max([counts[level].get(key, 0) for level in levels] + [4])
        figure.update_yaxes(range=[0, top * 1.3], row=1, col=column)
    figure.update_layout(height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10}, bargap=0.3)
    figure.update_xaxes(tickangle=-30)
    return figure


def _count_text(result: dict[str, Any], key: str) -> str:
    """The count behind a bar, written on it; nothing on an empty bar."""
    if key == "duplicated_share":
        extra = result.get("duplicates") or 0
        return f"{extra} extra" if extra else ""
    return str(result.get(key) or "")


def latency_cdf_figure(results: dict[str, Any], *, log_x: bool = False) -> go.Figure:
    """The share of messages seen by the sink within x ms, per level (nearest-rank quantiles)."""
    figure = go.Figure()
    for level, result in results.items():
        points = [p for p in result.get("latency_distribution_ms") or [] if p["ms"] is not None]
        if not points:
            continue
        figure.add_trace(
            go.Scatter(
                name=level,
                x=[p["ms"] for p in points],
                y=[p["q"] / 100 for p in points],
                mode="lines",
                line={"color": colour(level), "shape": "hv", "width": 3},
                hovertemplate="%{y:.0%} within %{x:.0f} ms<extra>" + level + "</extra>",
            )
        )
    figure.update_layout(
        height=360,
        xaxis_title="end-to-end latency (ms)",
        yaxis_title="share of delivered messages",
        yaxis_tickformat=".0%",
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": -0.2},
    )
    if log_x:
        figure.update_xaxes(type="log")
    return figure


def percentile_table(results: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for level, result in results.items():
        lat = result.get("latency_ms") or {}
        tp = result.get("throughput") or {}
        rows.append(
            {
                "level": level,
                "p50 ms": lat.get("p50"),
                "p95 ms": lat.get("p95"),
                "p99 ms": lat.get("p99"),
                "max ms": lat.get("max"),
                "messages timed": tp.get("messages"),
                "msg/s": tp.get("messages_per_s"),
            }
        )
    return pd.DataFrame(rows)


def buckets(throughput: dict[str, Any]) -> tuple[float, list[int]]:
    """(bucket width in s, messages per bucket); older saved metrics counted whole seconds."""
    if "per_bucket" in throughput:
        return float(throughput.get("bucket_s") or 1.0), list(throughput["per_bucket"])
    return 1.0, list(throughput.get("per_second") or [])


def width_text(width: float) -> str:
    return f"{width * 1000:.0f} ms" if width < 1 else f"{width:g} s"


def throughput_figure(results: dict[str, Any], *, type_px: int = DESK_PX) -> go.Figure:
    """Messages first seen by the sink per time bucket, one row per level, with its fault bands.

    Each level's bucket width was chosen from its length (engine.metrics.buckets), so a
    2-second run shows tens of bars rather than two. The x axis is seconds since the level
    started, the same axis as the run's timeline, so a dip lines up with the fault behind it.
    """
    levels = [lv for lv, r in results.items() if buckets(r.get("throughput") or {})[1]]
    titles = [
        f"{lv}: messages per {width_text(buckets(results[lv]['throughput'])[0])}" for lv in levels
    ]
    figure = make_subplots(
        rows=max(1, len(levels)),
        cols=1,
        shared_xaxes=True,
        subplot_titles=titles or ["no message reached the sink"],
        vertical_spacing=0.08,
    )
    for row, level in enumerate(levels, start=1):
        result = results[level]
        tp = result["throughput"]
        width, counts = buckets(tp)
        started = result.get("started_at")
        window_start = tp.get("window_start")
        offset = window_start - started if started is not None and window_start else 0.0
        figure.add_trace(
            go.Bar(
                name=level,
                x=[offset + (k + 0.5) * width for k in range(len(counts))],
                y=counts,
                width=0.9 * width,
                marker_color=colour(level),
                hovertemplate=f"%{{x:.2f}} s: %{{y}} messages in {width_text(width)}"
                f"<extra>{level}</extra>",
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        if started is None or not window_start:
            continue  # without a common origin, bands would be drawn in the wrong place
        faults = result.get("faults", [])
        draw_fault_bands(figure, faults, started, opacity=0.25, type_px=type_px, row=row, col=1)
    figure.update_layout(
        height=max(220, 170 * len(levels)),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        bargap=0.05,
    )
    figure.update_xaxes(title_text="seconds since the level started", row=max(1, len(levels)))
    figure.update_yaxes(title_text="messages")
    return figure


def history_frame(saved_runs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (run, level) from the saved metrics of one scenario's runs, oldest first."""
    rows = []
    for meta, metrics in saved_runs:
        for level, result in metrics.get("results", {}).items():
            lat = result.get("latency_ms") or {}
            rows.append(
                {
                    "run": meta["run_id"],
                    "started": time.strftime(
                        "%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0)
                    ),
                    "started_at": meta.get("started_at") or 0,
                    "level": level,
                    "messages": result.get("messages"),
                    "duplicates": result.get("duplicates"),
                    "lost": result.get("lost"),
                    "reordered": result.get("reordered"),
                    "aborted visible": result.get("aborted_visible"),
                    "p99 ms": lat.get("p99"),
                    "source": metrics.get("source"),
                }
            )
    frame = pd.DataFrame(rows)
    return frame.sort_values("started_at") if not frame.empty else frame


def history_figure(frame: pd.DataFrame) -> go.Figure:
    """Duplicates, losses and p99 latency of each level across runs of one scenario."""
    panels = [("duplicates", "duplicates"), ("lost", "lost"), ("p99 ms", "p99 latency (ms)")]
    figure = make_subplots(rows=1, cols=len(panels), subplot_titles=[title for _c, title in panels])
    for col, (column, _title) in enumerate(panels, start=1):
        for level, rows in frame.groupby("level", sort=False):
            figure.add_trace(
                go.Scatter(
                    name=level,
                    x=rows["started"],
                    y=rows[column],
                    mode="lines+markers",
                    line={"color": colour(level)},
                    legendgroup=level,
                    showlegend=col == 1,
                    customdata=rows["run"],
                    hovertemplate="%{customdata}: %{y}<extra>" + level + "</extra>",
                ),
                row=1,
                col=col,
            )
    figure.update_layout(
        height=340,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.25},
    )
    figure.update_xaxes(type="category", showticklabels=len(frame["run"].unique()) <= 12)
    return figure


def room_reason(reason: str) -> str:
    """Why Kafka could not serve the run, without the command line's advice (a bootstrap
    variable, --from-record): the page has already read the record instead."""
    return re.split(r"\s+(?:Start the run's cluster|Point LAB_METRICS_BOOTSTRAP)", reason)[0]


# ---- the room's shared reads ------------------------------------------------------------
# Sixty viewers opening Metrics at once each parsed every run.json and the same large
# metrics.json files, under one GIL beside the presenter's run. Each file is read once per
# version (its modification time) and the parsed object is shared between sessions:
# read-only, as every caller here uses it.
@st.cache_resource(show_spinner=False, max_entries=64)
def _metrics_version(run_id: str, stamp: float) -> dict[str, Any] | None:
    return load_metrics(run_id)


@st.cache_resource(show_spinner=False, max_entries=64)
def _judged_version(run_id: str, stamp: float) -> dict[str, LevelResult]:
    return load_judged(run_id)


def versioned_metrics(run_id: str) -> tuple[float, dict[str, Any]] | None:
    """(version, metrics): a run's saved metrics with the version (metrics.json's modification
    time) they were parsed from, once per version for every session (read-only); None when
    there are none, or they are damaged."""
    version = saved_stamp(run_id, "metrics")
    metrics = None if version is None else _metrics_version(run_id, version)
    return None if metrics is None else (version, metrics)


def shared_metrics(run_id: str) -> dict[str, Any] | None:
    """A run's saved metrics, parsed once per version for every session (read-only)."""
    saved = versioned_metrics(run_id)
    return None if saved is None else saved[1]


def shared_judged(run_id: str) -> dict[str, LevelResult]:
    """A run's judged result per level (result.json, typed), read once per version for every
    session (read-only)."""
    stamp = saved_stamp(run_id, "result")
    if stamp is None:
        return load_judged(run_id)  # raises the record's own error
    return _judged_version(run_id, stamp)


@st.cache_resource(show_spinner=False, max_entries=8)
def _runs_version(signature: tuple[tuple[str, float | None], ...]) -> list[dict[str, Any]]:
    return list_runs()


def shared_runs() -> list[dict[str, Any]]:
    """The recorded runs, parsed again only when a run.json changed (a stat per run, not a
    parse per run and session); read-only."""
    signature = runs_signature()
    if any(stamp is None for _name, stamp in signature):
        return list_runs()  # a run being written, or damaged: as the record says now
    return _runs_version(signature)


# ---- the room's shared drawings ---------------------------------------------------------
# Parsing once was not enough: building the page's Plotly figures (make_subplots, validation,
# JSON) took each session about a second of Python under the one GIL, and sixty viewers
# opening Metrics held the presenter's verdict back by tens of seconds (benchmarks/README.md).
# Each block below is drawn once per version of the run's metrics: st.cache_data records the
# elements a cached function draws and replays them in every later session, without running
# it (https://docs.streamlit.io/develop/concepts/architecture/caching, "Using Streamlit
# commands in cached functions"). Widgets stay outside: a cached function may not hold one.
# Each block is called on the page's main area, never inside a `with` container, which the
# replay could not find again.

# The counts the engine's checker wrote in result.json; Spark must find the same ones.
COMPARED = ("sent", "acked", "delivered", "duplicates", "lost", "reordered", "aborted_visible")
COUNT_WORDS = {"aborted_visible": "aborted records visible"}


def _version_results(run_id: str, version: float, levels: tuple[str, ...]) -> dict[str, Any]:
    return ordered_results(_metrics_version(run_id, version) or {}, list(levels))


@st.cache_data(show_spinner=False, max_entries=64)
def draw_damage(run_id: str, version: float, levels: tuple[str, ...], projector: bool) -> None:
    """Duplicates, losses, reorders: the counts table and the rates chart (`projector`: in
    the projector's type; a key of the cache, which replays what it drew)."""
    results = _version_results(run_id, version, levels)
    shown = ("messages", *COMPARED)
    counts = pd.DataFrame({level: {k: r.get(k) for k in shown} for level, r in results.items()})
    # Rows headed in words, not by the checker's field names (aborted_visible).
    room_table(counts.rename(index=COUNT_WORDS), projector=projector, width="stretch")
    room_chart(rates_figure(results), projector=projector, width="stretch", key="metrics_rates")


@st.cache_data(show_spinner=False, max_entries=64)
def draw_latency(
    run_id: str, version: float, levels: tuple[str, ...], log_x: bool, projector: bool
) -> None:
    """The latency distribution beside its percentiles."""
    results = _version_results(run_id, version, levels)
    left, right = st.columns([3, 2])
    cdf = latency_cdf_figure(results, log_x=log_x)
    room_chart(cdf, where=left, projector=projector, width="stretch", key="metrics_cdf")
    room_table(
        percentile_table(results),
        where=right,
        projector=projector,
        hide_index=True,
        width="stretch",
    )


@st.cache_data(show_spinner=False, max_entries=64)
def draw_throughput(run_id: str, version: float, levels: tuple[str, ...], projector: bool) -> None:
    results = _version_results(run_id, version, levels)
    type_px = ROOM_PX if projector else DESK_PX  # its fault labels are placed at that size
    figure = throughput_figure(results, type_px=type_px)
    room_chart(figure, projector=projector, width="stretch", key="metrics_throughput")


@st.cache_data(show_spinner=False, max_entries=16)
def draw_history(
    versions: tuple[tuple[str, float], ...],
    _saved: list[tuple[dict[str, Any], dict[str, Any]]],
    projector: bool,
) -> None:
    """A scenario's runs across time; `versions` (run id, metrics version) of `_saved`, in its
    order, is the cache's key."""
    frame = history_frame(_saved)
    room_chart(history_figure(frame), projector=projector, width="stretch", key="metrics_history")
    shown = frame.drop(columns=["started_at"])
    room_table(shown, projector=projector, hide_index=True, width="stretch")
