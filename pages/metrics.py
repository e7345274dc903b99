"""Metrics: a run's duplicates, losses, latency and throughput per level, computed by PySpark."""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from engine.face import (
    LATENCY_DEFINITION,
    RECORD_SOURCE,
    SO_FAR_EVERY_S,
    STREAM_SOURCE,
    STREAMING_METRICS,
    LabError,
    LevelResult,
    LiveRun,
    MetricsService,
    SoFar,
    compute_and_save,
    followed,
    is_live,
    live_runs,
    load_metrics,
    read_page,
    run_kafka_version,
    verdict_kinds,
    wait_for_followed,
    why_not_followed,
)
from pages._keep import kept
from pages._metrics_view import (
    COMPARED,
    draw_damage,
    draw_history,
    draw_latency,
    draw_throughput,
    failing_level,
    ordered_results,
    room_reason,
    shared_judged,
    shared_metrics,
    shared_runs,
    so_far_figure,
    versioned_metrics,
)
from pages._presenter import presenter_on, room_chart, room_table
from pages._roles import is_presenter
from pages._run_view import (
    default_verdicts,
    readable_verdicts,
    render_verdicts,
    scroll_to_key,
    verdicts_in_words,
)
from pages._shared import require_app, show_error
from pages._spark import SparkService, spark_service

require_app()

# The block holding Spark's counts, brought to the first screen once per computed version.
COUNTS_KEY = "metrics-counts"
THROUGHPUT_HELP = (
    "Messages whose latency was measured (delivered and seen by the sink), counted in the "
    "time bucket in which the sink first saw them. The width of a level's buckets comes from "
    "its length: up to 60 buckets over the level (50 ms for a 2-second level, 1 s for a "
    "minute). Bands are the faults the nemesis injected."
)

st.title("Metrics")
st.caption(
    "Computed by PySpark: Spark reads the run's topics from Kafka at both isolation levels, "
    "joins them with the run's history, and judges every message."
)


def label(meta: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0))
    return f"{meta.get('scenario', '?')} · {when} · {meta['run_id'][-4:]}"


def spark_panel(service: SparkService, presenter: bool) -> None:
    """Spark's state; while it starts, a progress bar that refreshes itself every second."""
    state = service.state
    if state == "starting":
        st.session_state["metrics_waiting_for_spark"] = True

    @st.fragment(run_every=1.0 if state == "starting" else None)
    def panel() -> None:
        now = service.state
        if now == "starting":
            st.progress(service.fraction, text=f"Starting Spark in the background: {service.step}")
        elif now == "failed":
            show_error(service.error or LabError("Spark did not start."))
            if presenter and st.button("Try starting Spark again"):
                service.ensure_started()
                st.rerun()
        elif now == "ready" and st.session_state.pop("metrics_waiting_for_spark", False):
            st.rerun()  # the whole page: now it can compute

    panel()


@kept
def computations() -> MetricsService:
    return MetricsService()


def compute_once(run_id: str, service: SparkService) -> dict[str, Any] | None:
    """The run's saved metrics, computed now unless another session just did, or Spark's
    streaming queries that followed the run are finishing them (then they are awaited)."""
    if followed(run_id) and load_metrics(run_id) is None:
        with st.spinner("Spark is finishing the metrics it computed while the run ran…"):
            wait_for_followed(run_id)
    elif (why := why_not_followed(run_id)) and load_metrics(run_id) is None:
        st.info(f"{why} Spark's batch job computes them now, after the run.")
    return computations().saved_or_computed(run_id, lambda: compute(run_id, service))


def recompute(run_id: str, service: SparkService) -> dict[str, Any] | None:
    return computations().computed_again(run_id, lambda: compute(run_id, service))


def compute(run_id: str, service: SparkService) -> dict[str, Any] | None:
    with st.status("Spark is computing the metrics…", expanded=True) as status:
        bar = st.progress(0.0)
        line = st.empty()

        def progress(what: str, fraction: float) -> None:
            bar.progress(min(1.0, max(0.0, fraction)))
            line.write(what)

        began = time.monotonic()
        try:
            output = compute_and_save(run_id, spark=service.session(), progress=progress)
        except Exception as exc:
            status.update(label="Spark could not compute the metrics", state="error")
            show_error(exc)
            return None
        status.update(
            label=f"Computed by Spark in {time.monotonic() - began:.1f} s",
            state="complete",
            expanded=False,
        )
    return output


def produced_by(metrics: dict[str, Any]) -> str:
    """Which Spark computation produced the numbers, as the end of a sentence."""
    if metrics.get("source") == STREAM_SOURCE:
        return (
            "computed by Spark's streaming queries, which read the run's topics at both "
            "isolation levels while it ran, and finished at its end"
        )
    return "computed by Spark's batch job after the run"


def agreement(metrics: dict[str, Any], checked: dict[str, LevelResult]) -> list[str]:
    """Where Spark's counts (metrics.json: JSON) differ from the checker's (result.json, typed):
    one line per difference."""
    differences = []
    for level, result in metrics.get("results", {}).items():
        theirs = checked.get(level)
        for key in COMPARED:
            counted = None if theirs is None else theirs.count(key)
            if counted is not None and counted != result.get(key):
                differences.append(f"{level} {key}: Spark {result.get(key)}, checker {counted}")
    return differences


def render(meta: dict[str, Any], version: float, metrics: dict[str, Any]) -> None:
    """The run's metrics as saved in `version` of its metrics.json; the charts and tables are
    drawn once per version for the whole room (pages/_metrics_view.py, shared drawings)."""
    when = time.strftime("%H:%M:%S", time.localtime(metrics.get("computed_at") or 0))
    made_on = run_kafka_version(meta["run_id"])
    st.caption(
        f"**Final numbers**, {produced_by(metrics)}. Spark read **{metrics.get('source')}** "
        f"(computed at {when})." + (f" The run was made on Kafka {made_on}." if made_on else "")
    )
    reason = metrics.get("fallback_reason")
    if reason and metrics.get("source") == RECORD_SOURCE:
        st.info(
            "The cluster this run was made on no longer serves its topics, so Spark read the "
            f"records saved with the run. {room_reason(reason)}"
        )
    elif reason:
        st.info(f"{room_reason(reason)} Spark's batch job read Kafka after the run instead.")
    results = ordered_results(metrics, meta.get("levels"))
    try:
        checked = shared_judged(meta["run_id"])
    except LabError:
        checked = {}
    differences = agreement(metrics, checked)
    if checked and not differences:
        st.success("Spark's counts equal the engine's checker on every level.", icon="✅")
    elif differences:
        st.warning(
            "Spark and the checker disagree (the topics changed since the run?): "
            + "; ".join(differences),
            icon="⚠️",
        )

    run_id, levels = meta["run_id"], tuple(results)
    with st.container(key=COUNTS_KEY):
        st.subheader("Duplicates, losses, reorders")
        draw_damage(run_id, version, levels, presenter_on())
    # Spark's counts on the first screen, once per computed version (at 150% the page walk
    # found them below it, under the picker and the agreement line).
    scrolled: set[tuple[str, float]] = st.session_state.setdefault("_metrics_scrolled", set())
    if (run_id, version) not in scrolled:
        scrolled.add((run_id, version))
        scroll_to_key(COUNTS_KEY)

    st.subheader("End-to-end latency", help=LATENCY_DEFINITION)
    log_x = st.toggle("Logarithmic time axis", key="metrics_log_x")
    draw_latency(run_id, version, levels, log_x, presenter_on())

    st.subheader("Throughput over time", help=THROUGHPUT_HELP)
    draw_throughput(run_id, version, levels, presenter_on())

    verdicts = metrics.get("verdicts") or {}
    if verdicts or metrics.get("verdicts_parquet"):
        st.subheader("Spark's verdict for each message")
        levels = list(results)
        level = st.radio(
            "Level",
            levels,
            index=failing_level(results),
            horizontal=True,
            # Per run: a choice made for another run's levels or verdicts must not carry
            # over (a filter kept from a run without duplicates hid this run's five).
            key=f"metrics_verdict_level_{meta['run_id']}",
        )
        if verdicts:
            # The Failure lab's table: anomalies first, times in seconds since the level started.
            render_verdicts(
                verdicts.get(level) or [],
                results[level].get("started_at"),
                key=f"metrics_verdicts_{meta['run_id']}_{level}",
            )
        else:
            render_verdict_pages(meta["run_id"], level, results[level].get("started_at"))


VERDICT_PAGE_SIZE = 1_000


def render_verdict_pages(run_id: str, level: str, start: float | None) -> None:
    """A big run's table, a page at a time from its Parquet copy (never loaded whole); its
    moments in seconds since `start`, when the level started."""
    try:
        kinds = verdict_kinds(run_id, level)
    except LabError as exc:
        st.error(str(exc))
        return
    key = f"metrics_verdicts_{run_id}_{level}"
    chosen = st.multiselect("Show verdicts", kinds, default=default_verdicts(kinds), key=key)
    if not chosen:
        st.caption("Choose at least one verdict to list.")
        return
    page_key = f"{key}_page"
    number = st.session_state.get(page_key, 1)
    page = read_page(run_id, level, chosen, page=number - 1, page_size=VERDICT_PAGE_SIZE)
    pages = max(1, -(-page.total // VERDICT_PAGE_SIZE))
    if number > pages:  # fewer rows match now: show the last page (read_page did)
        st.session_state[page_key] = pages
    left, right = st.columns([1, 3])
    left.number_input("Page", min_value=1, max_value=pages, step=1, key=page_key)
    right.caption(
        f"Rows {page.first + 1:,}-{page.first + len(page.rows):,} of {page.total:,} "
        f"({pages:,} pages of {VERDICT_PAGE_SIZE:,}). The table has one row per message, so "
        "Spark wrote it to Parquet beside the run; each page is read from there."
    )
    shown = verdicts_in_words(readable_verdicts(page.rows, start))
    room_table(shown, hide_index=True, width="stretch")


def render_history(
    scenario: str, runs: list[dict[str, Any]], service: SparkService, presenter: bool
) -> None:
    st.subheader(f"Across runs: {scenario}")
    same = [m for m in runs if m.get("scenario") == scenario]
    saved_by_id = {m["run_id"]: versioned_metrics(m["run_id"]) for m in same}
    missing = [m for m in same if saved_by_id[m["run_id"]] is None]
    if missing and not presenter:
        st.caption(
            f"{len(missing)} run(s) of {scenario} have no Spark metrics yet; the presenter can "
            "compute them."
        )
    elif missing:
        clicked = st.button(
            f"Compute the {len(missing)} run(s) without Spark metrics",
            disabled=service.state != "ready",
            key="metrics_fill_history",
        )
        if clicked:
            bar = st.progress(0.0, text="Spark is computing the older runs…")
            for i, meta in enumerate(missing, start=1):
                try:
                    computations().saved_or_computed(
                        meta["run_id"],
                        lambda run_id=meta["run_id"]: compute_and_save(
                            run_id, spark=service.session()
                        ),
                    )
                    saved_by_id[meta["run_id"]] = versioned_metrics(meta["run_id"])
                except Exception as exc:
                    show_error(exc)
                bar.progress(i / len(missing), text=f"{i} of {len(missing)} runs computed")
    versions = [(m, saved_by_id[m["run_id"]]) for m in same if saved_by_id[m["run_id"]]]
    if len(versions) < 2:
        st.caption(
            f"{len(versions)} run(s) of {scenario} have Spark metrics; the history needs two. "
            "Run the scenario again in the Failure lab."
        )
        return
    draw_history(
        tuple((m["run_id"], version) for m, (version, _metrics) in versions),
        [(m, metrics) for m, (_version, metrics) in versions],
        presenter_on(),
    )


LIVE_EVERY_S = 1.0  # the live panel's refresh; Spark counts at most every SO_FAR_EVERY_S
LIVE_KEY = "metrics-live"  # the live panel's block


def live_panel(presenter: bool) -> None:
    """While a run is followed by Spark's streaming queries (LAB_STREAMING_METRICS=1), the
    counts its records read so far decide, refreshed every second; when it ends, the page
    draws again with the run's final numbers. Only the presenter's session makes Spark count;
    viewers show what it counted last."""
    # With the setting on, the panel keeps looking, so a run started from another page
    # shows here as it starts.
    if not STREAMING_METRICS.flag() and not live_runs():
        return

    @st.fragment(run_every=LIVE_EVERY_S)
    def panel() -> None:
        running = live_runs()
        if not running:
            if st.session_state.pop("metrics_live_shown", False):
                st.rerun()  # the run has ended: the whole page, with its final numbers
            return
        st.session_state["metrics_live_shown"] = True
        run = running[0]
        so_far = run.so_far() if presenter else run.latest()
        with st.container(key=LIVE_KEY):
            draw_so_far(run, so_far)
        # Brought to the first screen as the run starts: the page may be scrolled down to
        # the previous run's numbers. Drawn at every refresh, unchanged, so the browser keeps
        # the one frame whose script scrolled once (a frame drawn only once was gone at the
        # next refresh, before its script had run).
        scroll_to_key(LIVE_KEY)

    panel()


def draw_so_far(run: LiveRun, so_far: SoFar | None) -> None:
    """The live panel's heading, caption and chart."""
    st.subheader(f"While {run.scenario or 'the run'} runs: what Spark has read so far")
    if so_far is None:
        st.caption(
            "Spark's streaming queries follow the run's topics; they have not read a "
            "record of this run yet."
        )
        return
    age = max(0.0, time.time() - so_far.at)
    every = SO_FAR_EVERY_S
    st.caption(
        f"Counted by Spark {age:.0f} s ago (at most every {every:.0f} s) from the "
        f"{so_far.rows_read:,} records its streaming queries have read from Kafka (each "
        "record once per isolation level), counted at each level's own isolation: the "
        "same definitions as the final numbers, over the records read so far. Losses "
        "and latency need the run's end; the final numbers replace these when it ends."
    )
    room_chart(
        so_far_figure(so_far.counts, so_far.messages),
        width="stretch",
        key="metrics_so_far",
    )


live_panel(is_presenter())

runs = [m for m in shared_runs() if m.get("status") == "complete"]
if not runs:
    st.info(
        "No recorded runs yet. Run a scenario in the Failure lab, or with "
        "`python -m engine run scenarios/ack-loss.yaml`."
    )
    st.stop()

ids = [m["run_id"] for m in runs]
latest = st.session_state.get("lab_run_id")
meta = st.selectbox(
    "Run",
    runs,
    index=ids.index(latest) if latest in ids else 0,
    format_func=label,
    key="metrics_run",
)
service = spark_service()
# Only the presenter's session makes Spark work: a room's viewers read what it computed
# (runs/RUN_ID/metrics.json) and start no computation of their own.
presenter = is_presenter()
if presenter:
    service.ensure_started()
spark_panel(service, presenter)

saved = shared_metrics(meta["run_id"])
if saved is None and is_live(meta["run_id"]):
    # Its streaming queries' final numbers are being finished: no batch job beside them.
    st.info("Spark's streaming queries are finishing this run's numbers; they show here then.")
    st.stop()
if presenter and service.state == "ready" and saved is None:
    saved = compute_once(meta["run_id"], service)  # a run opened for the first time
if (
    presenter
    and saved is not None
    and st.button("Recompute with Spark (reads Kafka again)", disabled=service.state != "ready")
):
    saved = recompute(meta["run_id"], service) or saved
current = versioned_metrics(meta["run_id"])  # what was saved, as every session draws it
if current is None:
    if not presenter:
        st.info(
            "The presenter has not computed this run's metrics yet. Spark computes them once "
            "for the whole room, when the presenter opens this run here; they show here then.",
            icon="👀",
        )
    elif service.state == "starting":
        st.info("The metrics appear here as soon as Spark is up.")
    elif saved is not None:  # computed, but its metrics.json cannot be read back
        show_error(LabError(f"The metrics of run {meta['run_id']} were not saved beside it."))
    st.stop()
render(meta, *current)
render_history(meta["scenario"], runs, service, presenter)
