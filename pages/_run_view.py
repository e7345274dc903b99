"""Shows a recorded run: counts per level side by side, a timeline, the verdict table.

Used by the Failure lab (right after a run) and by Replay (any run from runs/, no cluster
needed). Everything drawn here is read from the run's record (typed: levels_judged).
"""

from __future__ import annotations

import re
from html import escape, unescape
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.face import (
    HURT,
    LATENCY_DEFINITION,
    PROXY_WORDS,
    Event,
    LevelResult,
    NemesisRecord,
    ProxyRecord,
    RecordedRun,
    fault_fold,
    fault_kind_of,
    fault_raw,
    fault_text,
    fold_text,
    lasting_spans,
    nemesis_text,
    process_words,
    room_words,
    say_fault,
)
from pages._presenter import DESK_PX, ROOM_PX, presenter_on, room_table
from pages._streams_view import render_store_counts

COUNTS = [
    ("sent", "Sent", "ids the producer handed to the client library"),
    ("acked", "Acked", "ids the broker acknowledged to the producer"),
    ("delivered", "Delivered", "distinct ids in the judged topic, at the level's isolation"),
    ("duplicates", "Duplicates", "extra copies beyond the first"),
    (
        "lost",
        "Lost",
        "ids a producer sent that are not there (never sent, or not processed yet by a "
        "stopped processor, are said apart: Kafka was not asked to keep those)",
    ),
    (
        "reordered",
        "Reordered",
        "ids with a copy (retries too) stored after a later-created id in the same partition",
    ),
]
EVENT_STYLE = {
    "send": ("sent", "#9e9e9e", "circle-open"),
    "ack": ("acked", "#2e7d32", "circle"),
    "fail": ("failed", "#c62828", "x"),
    "output_acked": ("output written", "#6a1b9a", "diamond"),
    "consumed_sink": ("seen by the sink", "#1565c0", "triangle-up"),
}
# A second instance of a role (processor#2, a replacement) in its own colour, so the room sees
# which instance wrote what.
INSTANCE_COLOURS = ["#ef6c00", "#00838f", "#ad1457"]
# What an out-of-date instance was refused, by kind (engine.judging.checker.count_refusals).
REFUSALS = ("writes_refused", "commits_refused", "txn_calls_refused")
# A level "shows the failure" when any of these counts is above zero.
ANOMALY_COUNTS = ("duplicates", "lost", "reordered", "aborted_visible")
DELIVERED_ONCE = "delivered once"
LABEL_ROWS = 5  # rows of fault labels above the timeline: a label takes the first with room


def render_run(
    run: RecordedRun, *, presenter: bool | None = None, scroll: bool | None = None
) -> None:
    """The run's verdict cards, evidence, counts and timeline, the key numbers first.

    The first screen holds one card per level with the numbers its scenario teaches and a
    one-sentence verdict (the "why"); the page is brought there once per run. In the projector
    view the timeline follows the cards and no run id or topic name is shown. A page that
    sets the layout itself (`presenter` given: the Lesson, which scrolls to its own
    explanation) is not scrolled unless it asks (`scroll`).
    """
    meta, stored = run.meta, run.levels_judged
    # Show the levels in the order they were run (the saved JSON's keys are sorted).
    order = [lv for lv in meta.get("levels", []) if lv in stored]
    results = {lv: stored[lv] for lv in order + sorted(set(stored) - set(order))}
    if scroll is None:
        scroll = presenter is None
    if presenter is None:
        presenter = presenter_on()
    with st.container(key=RESULTS_KEY):
        if meta.get("status") == "failed":
            st.error(f"This run failed: {meta.get('reason')}", icon="⚠️")
        for level, why in (meta.get("not_run") or {}).items():
            st.error(f"{level} was not run: {why}", icon="⚠️")
        if not results:
            st.info("This run recorded no results.")
            return
        run_words = f"scenario **{meta['scenario']}** · {', '.join(results)}"
        # Runs of one scenario on two Kafka versions differ only here at a glance.
        if kafka := run.kafka_version:
            run_words += f" · Kafka {kafka}"
        # The run id is for engineers (Replay, the command line); the projector has no use for it.
        st.caption(run_words if presenter else f"{run_words} · run `{meta['run_id']}`")
        teaches = (run.config.get("scenario") or {}).get("teaches") or {}
        render_verdict_cards(results, teaches)
        if presenter:
            render_timeline(run, results, type_px=ROOM_PX)
            render_count_cards(results, presenter=True)
            render_evidence(results, presenter=True)
            render_store_counts(run, results)
        else:
            render_evidence(results)
            render_store_counts(run, results)
            render_count_cards(results)
            render_timeline(run, results)
    if scroll:
        bring_to_first_screen(str(meta["run_id"]))


RESULTS_KEY = "lab_results"  # the results' container: .st-key-lab_results in the page
SCROLLED = "lab_results_scrolled"  # the runs whose results were brought into view already
SCROLL_SCRIPT = """<script>
// Bring a block (the run's results, its live view, a lesson's heading) to the top of the
// screen, and keep it there for a few seconds: it may be drawn a moment after this frame,
// the page above it may still grow, and the page below it may still be too short to let it
// reach the top (charts drawn later). Stops at once if the person scrolls or types.
(function () {
  const win = window.parent, doc = win.document;
  const until = Date.now() + 12000;
  // The watch ends at the person's first scroll, click or key, or when its time is up;
  // aborting it removes every listener.
  const watch = new AbortController();
  for (const ev of ["wheel", "touchstart", "keydown", "mousedown"]) {
    win.addEventListener(ev, () => watch.abort(), {passive: true, signal: watch.signal});
  }
  (function bring() {
    if (watch.signal.aborted) return;
    const block = doc.querySelector("%s");
    if (block) {
      const margin = parseFloat(win.getComputedStyle(block).scrollMarginTop) || 0;
      if (Math.abs(block.getBoundingClientRect().top - margin) > 8) {
        block.scrollIntoView({block: "start", behavior: "instant"});
      }
    }
    if (Date.now() < until) setTimeout(bring, 150);
    else watch.abort();
  })();
})();
</script>"""


def bring_to_first_screen(run_id: str) -> None:
    """Scroll the page to the results' top, once per run, so the key numbers are on screen."""
    done: set[str] = st.session_state.setdefault(SCROLLED, set())
    if run_id in done:
        return
    done.add(run_id)
    scroll_to_key(RESULTS_KEY)


def scroll_to_key(key: str) -> None:
    """Scroll the page so that the block drawn with `st.container(key=key)` is at the top.

    Streamlit has no scrolling call; a script in the page (st.html, which runs it when asked
    to: the removed components.v1.html is not used) scrolls it. The block's CSS gives it room
    below Streamlit's header bar.
    """
    # Room below Streamlit's header bar, so that the block's own heading is not under it.
    margin = f"<style>.st-key-{key} {{ scroll-margin-top: 4.5rem; }}</style>"
    st.markdown(margin, unsafe_allow_html=True)
    scroll_to_selector(f".st-key-{key}")


def scroll_to_selector(selector: str) -> None:
    """Scroll the page so that the first element matching `selector` is at the top, and keep
    it there for a few seconds while the page settles (scrolls at fixed moments left the
    lesson's "3 · Explain" at 389 px in two CI runs), unless the person scrolls first."""
    st.html(SCROLL_SCRIPT % selector, unsafe_allow_javascript=True)


def render_timeline(
    run: RecordedRun, results: dict[str, LevelResult], *, type_px: int = DESK_PX
) -> None:
    """The level picker (opened on the failing level), its timeline and its verdict table."""
    run_id = run.run_id
    level = st.radio(
        "Level to inspect",
        list(results),
        index=failing_level(results),
        horizontal=True,
        key=f"lvl-{run_id}",
    )
    data = run.levels.get(level)
    if not data:
        return
    history, verdicts = data.history, data.verdicts
    figure, unlabelled = timeline(history, results[level], verdicts, type_px=type_px)
    st.plotly_chart(figure, width="stretch")
    if unlabelled:  # shaded on the chart, but no room for their words there
        st.caption(
            "Also on the chart, unlabelled: "
            + "; ".join(
                f"{b['x0']:.2f} s {b['label']}" + (f" ×{b['count']}" if b["count"] > 1 else "")
                for b in unlabelled
            )
        )
    render_verdicts(data.verdicts, results[level].settings.started_at, key=f"v-{run_id}-{level}")


# The counts a card may teach, with the words the room reads under the number.
TEACHING_LABELS = {
    "delivered": "delivered",
    "duplicates": "duplicates",
    "lost": "lost",
    "reordered": "reordered",
    "acked": "acknowledged",
    "aborted_visible": "aborted, yet visible",
    "never_sent": "never sent",
    "not_processed": "not processed yet",
    "read_uncommitted_duplicates": "duplicates at read_uncommitted",
    "writes_refused": "writes refused (epoch)",
    # Its offset commits, or the member itself (fenced before it committed).
    "commits_refused": "refused by the consumer group",
    "txn_calls_refused": "transaction calls refused",
    # A run recorded before refusals were counted by kind: all of them, not only writes.
    "fenced": "refusals of any kind",
    "effects": "effects in the database",
    "duplicates_absorbed": "duplicates absorbed",
}


# Counts the card's sentence may cite (explain.headline): on the card whenever they are not
# zero, so the sentence never names a number the card does not show.
CITED_COUNTS = (*ANOMALY_COUNTS, "never_sent", "not_processed")
Teaches = dict[str, dict[str, str]]  # a scenario's `teaches`: level -> count -> its bound


def teaching_counts(level: str, result: LevelResult, teaches: Teaches) -> list[str]:
    """The counts this level's card shows: delivered, what the scenario teaches, then every
    other count its sentence may cite that this run made."""
    wanted = teaches.get(level) or {}
    taught = [k for k in wanted if k != "delivered" and result.count(k) is not None]
    if "fenced" in taught and result.count(REFUSALS[0]) is not None:
        # A scenario that teaches "fenced" shows what was refused, each kind under its name.
        at = taught.index("fenced")
        taught[at : at + 1] = refused_kinds(result)
    shown = ["delivered", *taught] if taught else ["delivered", "duplicates", "lost"]
    cited = [k for k in CITED_COUNTS if (result.count(k) or 0) > 0 and k not in shown]
    headline = result.explanation.headline or ""
    if "refused" in headline or "fenced" in headline:  # explain.refusals_phrase cites them
        cited += [k for k in refused_kinds(result) if result.count(k) and k not in shown]
    # A read_committed level's duplicates as a read_uncommitted reader would count them.
    other = ["read_uncommitted_duplicates"] if result.count("read_uncommitted_duplicates") else []
    return shown + cited + other


def refused_kinds(result: LevelResult) -> list[str]:
    """The kinds of refusal this level counts above zero; writes (0) when there is none."""
    return [k for k in REFUSALS if result.count(k)] or [REFUSALS[0]]


def level_heading(level: str, result: LevelResult) -> str:
    """The level's name, and what it really ran as where the scenario changed that."""
    return f"{level}: {result.settings.label}" if result.settings.label else level


def level_heading_html(level: str, result: LevelResult) -> str:
    """The same, with the name in one piece: "idempotency-key" never breaks at its hyphen."""
    name = f"<span class='lab-name'>{escape(level)}</span>"
    return f"{name}: {escape(result.settings.label)}" if result.settings.label else name


def render_verdict_cards(results: dict[str, LevelResult], teaches: Teaches) -> None:
    """One card per level: the numbers the scenario teaches, large, and the verdict in words."""
    columns = st.columns(len(results), border=True)
    for column, (level, result) in zip(columns, results.items(), strict=True):
        cells = []
        for key in teaching_counts(level, result, teaches):
            value = result.count(key) or 0
            alarm = key in ANOMALY_COUNTS and value > 0
            cells.append(
                "<div class='lab-count'>"
                f"<div class='lab-number{' lab-alarm' if alarm else ''}'>{value}</div>"
                f"<div class='lab-label'>{escape(TEACHING_LABELS.get(key, key))}</div></div>"
            )
        verdict = result.explanation.headline or ""
        with column:
            st.markdown(
                f"<div class='lab-card'><div class='lab-level'>"
                f"{level_heading_html(level, result)}</div>"
                f"<div class='lab-counts'>{''.join(cells)}</div>"
                f"<div class='lab-verdict'>{escape(verdict)}</div></div>",
                unsafe_allow_html=True,
            )
    st.markdown(CARD_STYLE, unsafe_allow_html=True)


# Words break only between words, at any zoom: titles and labels shrink with the window
# (vw) instead, down to a floor, and a level's name stays in one piece.
CARD_STYLE = """<style>
/* Brought into view below Streamlit's header bar (hidden on the projector), not under it. */
.st-key-lab_results, .st-key-lab_live { scroll-margin-top: 4.5rem; }
.lab-card, .lab-card * { word-break: normal; overflow-wrap: normal; hyphens: none; }
.lab-card { padding-bottom: 0.4rem; }
.lab-level { font-size: clamp(1.05rem, 1.5vw, 1.6rem); font-weight: 700; line-height: 1.25; }
.lab-name { white-space: nowrap; }
.lab-counts { display: grid; grid-template-columns: repeat(auto-fit, minmax(4.6rem, 1fr));
  gap: 0.3rem 0.8rem; margin: 0.2rem 0 0.4rem 0; }
.lab-count { min-width: 0; }
.lab-number { font-size: clamp(1.7rem, 2.4vw, 2.8rem); font-weight: 700; line-height: 1.1;
  white-space: nowrap; }
.lab-alarm { color: #c62828; }
.lab-label { font-size: clamp(0.8rem, 0.9vw, 0.95rem); line-height: 1.2; }
.lab-verdict { font-size: clamp(1rem, 1.2vw, 1.3rem); line-height: 1.35; }
</style>"""


def render_count_cards(results: dict[str, LevelResult], *, presenter: bool = False) -> None:
    """Every count of every level, side by side, with what explains them.

    The topic a level reads is named in the hover help, and not at all on the projector.
    """
    columns = st.columns(len(results))
    for column, (level, result) in zip(columns, results.items(), strict=True):
        with column, st.container(border=True):
            st.subheader(level_heading(level, result))
            if headline := result.explanation.headline:
                st.markdown(f"**{headline}**")
            topic = None if presenter else f"The topic it reads: `{result.settings.sink_topic}`"
            st.caption(f"reads at **{result.isolation}**", help=topic)
            left, right = st.columns(2)
            for i, (key, label, helptext) in enumerate(COUNTS):
                (left if i % 2 == 0 else right).metric(label, result.count(key), help=helptext)
            extra = []
            for key in REFUSALS:
                if refused := result.count(key):
                    extra.append(f"🛡️ {TEACHING_LABELS[key]}: **{refused}**")
            # A run recorded before the refusals were counted by kind: all of them at once.
            if result.count(REFUSALS[0]) is None and (fenced := result.count("fenced")):
                extra.append(f"🛡️ {TEACHING_LABELS['fenced']}: **{fenced}**")
            if aborted := result.counts.aborted_visible:
                extra.append(f"👻 **{aborted}** aborted record(s) visible")
            if (reader := result.uncommitted_reader) is not None:
                extra.append(
                    f"👓 A read_uncommitted reader of this topic (the Java consumer's default "
                    f"isolation) reads **{reader.read_uncommitted_aborted}** record(s) of "
                    f"aborted transactions and counts **{reader.read_uncommitted_duplicates}** "
                    "duplicate(s): exactly-once holds for read_committed readers"
                )
            if (effects := result.effects) is not None:
                extra.append(
                    f"🗝️ **{effects.effects}** effect(s) applied in the database; "
                    f"**{effects.duplicates_absorbed}** duplicate delivery(ies) absorbed by "
                    "the idempotency key"
                )
            for line in extra:
                st.markdown(line)
            # Every count the level's promise excludes (and any reordering), explained
            # from this run's own history.
            for line in result.explanation.why:
                st.markdown(f"🔎 {room_words(line)}")
            lat = result.counts.latency_ms
            if lat.get("p50") is not None:
                st.caption(
                    f"latency p50 {lat['p50']:.0f} ms · p99 {lat['p99']:.0f} ms · "
                    f"max {lat['max']:.0f} ms",
                    help=LATENCY_DEFINITION,
                )


def failing_level(results: dict[str, LevelResult]) -> int:
    """The level to open on: the first where the scenario's failure shows, else the first."""
    for index, result in enumerate(results.values()):
        if any((result.count(count) or 0) > 0 for count in ANOMALY_COUNTS):
            return index
    return 0


def render_verdicts(rows: list[dict[str, Any]], start: float | None, *, key: str) -> None:
    """The verdict table (JSON rows), opened on the anomalies when there are any."""
    verdicts = pd.DataFrame(rows)
    if verdicts.empty:
        return
    kinds = sorted(verdicts["verdict"].unique())
    chosen = st.multiselect("Show verdicts", kinds, default=default_verdicts(kinds), key=key)
    shown = readable_verdicts(verdicts[verdicts["verdict"].isin(chosen)], start)
    room_table(verdicts_in_words(shown), hide_index=True, width="stretch")


def default_verdicts(kinds: list[str]) -> list[str]:
    """Every verdict but "delivered once" when there is another: the rows that tell the story."""
    anomalies = [k for k in kinds if k != DELIVERED_ONCE]
    return anomalies or kinds


TIME_COLUMNS = {"sent_at": "sent (s)", "acked_at": "acked (s)", "consumed_at": "first seen (s)"}
VERDICT_COLUMNS = ["id", "verdict", "copies", "offsets", "ack", *TIME_COLUMNS.values()]
VERDICT_COLUMNS += ["latency_ms", "reordered", "aborted_copies"]


def readable_verdicts(verdicts: pd.DataFrame, start: float | None) -> pd.DataFrame:
    """The table's columns, with moments as seconds since `start` (the level's), not epochs."""
    start = start or 0.0
    out = verdicts.copy()
    for column, title in TIME_COLUMNS.items():
        values = out[column] if column in out else pd.Series(None, index=out.index)
        out[title] = (pd.to_numeric(values, errors="coerce") - start).round(3)
    return out[[c for c in VERDICT_COLUMNS if c in out]]


ACK_WORDS = {
    "acked": "acked",
    "failed": "failed: the producer gave up",
    "unacked": "no answer",
    "unsent": "never sent",
}
# What an empty cell means, per column: a table on a projector shows no "None".
MISSING_WORDS = {
    "acked (s)": "not acked",
    "first seen (s)": "never seen",
    "sent (s)": "never sent",
    "latency_ms": "—",
    "offsets": "—",
}


# The checker's field names that would otherwise head a column, as the room reads them.
COLUMN_WORDS = {"latency_ms": "latency (ms)", "aborted_copies": "aborted copies"}


def verdicts_in_words(table: pd.DataFrame) -> pd.DataFrame:
    """The verdict table as the room reads it: an empty cell says why it is empty (not acked,
    never seen) or is a dash, never "None"; lists of offsets are plain text; no column is
    headed by the checker's own field name (latency_ms)."""
    out = table.copy().astype(object)
    for column in out.columns:
        out[column] = [word_cell(column, value) for value in out[column]]
    return out.rename(columns=COLUMN_WORDS)


def word_cell(column: str, value: Any) -> Any:
    """One cell of the verdict table, in words where it would be empty or raw."""
    if isinstance(value, list | tuple):
        value = ", ".join(map(str, value)) or None
    elif value is not None and not isinstance(value, str) and pd.isna(value):
        value = None
    if value is None or value == "":
        return MISSING_WORDS.get(column, "—")
    if column == "ack":
        return ACK_WORDS.get(str(value), str(value))
    if column == "reordered":
        return "yes" if value is True else "—"
    if column == "latency_ms" or column in TIME_COLUMNS.values():
        return f"{float(value):.{0 if column == 'latency_ms' else 3}f}"
    return value


LOGGED = " logged: "  # evidence that quotes a broker's log line: "Node 2 logged: [...] ..."
# A run's id and its topics' names: for the engineer's screen, not the projector.
RUN_NAMES = re.compile(r"\blab\.[A-Za-z0-9._-]+|\b20\d{6}-\d{6}-[a-z0-9-]+")
TOPIC_WORDS = "the level's topic"


def render_evidence_line(line: str, *, presenter: bool) -> None:
    """One line of evidence; a quoted broker log line follows verbatim in a code block (Kafka's
    own words, its brackets and lists kept). On the projector a topic's name is said as "the
    level's topic" (leader-disk-lost names the partition whose copy was deleted)."""
    if presenter:
        line = RUN_NAMES.sub(TOPIC_WORDS, line)
    said, logged, quote = line.partition(LOGGED)
    st.markdown(f"- {room_words(said)}{logged.rstrip() if logged else ''}")
    if logged:
        st.code(quote, language=None, wrap_lines=True)


def render_evidence(results: dict[str, LevelResult], *, presenter: bool = False) -> None:
    """What the faults did and how Kafka answered, per level; then the application's choices."""
    explained = {lv: r.explanation for lv, r in results.items() if "explain" not in r.not_recorded}
    if not any(e.evidence or e.choices for e in explained.values()):
        return
    # A choice every level made is said once, below the columns.
    shared = set.intersection(*(set(e.choices) for e in explained.values()))
    with st.expander("What happened, from the run's evidence", expanded=True):
        columns = st.columns(len(explained))
        for column, (level, why) in zip(columns, explained.items(), strict=True):
            with column:
                st.markdown(f"**{level_heading(level, results[level])}**")
                # room_words: a run recorded before the evidence was said in the room's
                # words still shows no raw error code.
                for line in why.evidence:
                    render_evidence_line(line, presenter=presenter)
                for line in why.choices:
                    if line not in shared:
                        st.markdown(f"- 🧩 *The application's choice:* {room_words(line)}")
        for line in sorted(shared):
            st.markdown(f"🧩 *The application's choice, at every level:* {room_words(line)}")


def timeline_figure(
    history: list[dict[str, Any]],
    result: LevelResult,
    verdicts: list[dict[str, Any]] | None = None,
) -> go.Figure:
    """Each message's path over time (sent, acked, written, seen), with faults as bands."""
    return timeline(history, result, verdicts)[0]


def timeline(
    history: list[dict[str, Any]],
    result: LevelResult,
    verdicts: list[dict[str, Any]] | None = None,
    *,
    type_px: int = DESK_PX,
) -> tuple[go.Figure, list[dict[str, Any]]]:
    """The timeline, and the fault bands whose labels found no room on it (said below it).

    `type_px` is its smallest type: the labels' rows and widths are reckoned at that size, so
    the projector's (ROOM_PX) draws the same chart in larger type, not labels over labels.

    Duplicated and lost ids are marked large (from the verdicts), and the points of a second
    instance of a role (a replacement) have their own colour. Fault labels sit in rows above
    the plot, never over the data nor over each other.
    """
    start = result.settings.started_at or (history[0]["t"] if history else 0.0)
    faults = result.faults  # JSON records, each kind its own fields
    figure = go.Figure()
    points = timeline_points(history, start)
    several = {p.split("#")[0] for _, p in points if "#" in p}  # roles with a replacement
    for (kind, proc), rows in points.items():
        named = proc.split("#")[0] in several
        figure.add_trace(point_trace(kind, proc, rows, instance_rank(proc), named=named))
    draw_anomalies(figure, history, verdicts or [], start, type_px=type_px)
    # The x axis is set, not left to autorange, so that the labels' room is known.
    xs = [x for rows in points.values() for x, _ in rows]
    xs += [b["x1"] for b in fault_bands(faults, start)] + [0.0]
    lo, hi = min(xs), max(max(xs), 1.0)
    pad = 0.03 * (hi - lo)
    span = (lo - pad, hi + pad)
    unlabelled = draw_fault_bands(figure, faults, start, span=span, above=True, type_px=type_px)
    used = [a.yshift for a in figure.layout.annotations if a.yref == "y domain"]
    row_px = label_row_px(type_px)
    rows_used = (max(used) - 4) // row_px + 1 if used else 0
    font = {"size": type_px}
    figure.update_layout(
        height=520 + rows_used * row_px,
        font=font,
        margin={"l": 10, "r": 10, "t": 20 + rows_used * row_px, "b": 10},
        legend={"orientation": "h", "y": -0.2, "font": font},
    )
    figure.update_xaxes(range=list(span))
    for axis, title in (
        (figure.update_xaxes, "seconds since the level started"),
        (figure.update_yaxes, "message id"),
    ):
        axis(title={"text": title, "font": {"size": type_px + 2}}, tickfont=font)
    return figure, unlabelled


def timeline_points(
    history: list[dict[str, Any]], start: float
) -> dict[tuple[str, str], list[tuple[float, int]]]:
    """(event kind, process instance) -> (seconds, id) of each drawn event."""
    points: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for event in history:
        message_id = event.get("id")
        proc = str(event.get("proc", ""))
        base = proc.split("#")[0]
        kind = event.get("ev")
        if message_id is None or base == "source":
            continue
        if base == "sink" and kind == "consumed":
            kind = "consumed_sink"
        if kind in EVENT_STYLE:
            points.setdefault((str(kind), proc), []).append((event["t"] - start, message_id))
    return points


def instance_rank(proc: str) -> int:
    """0 for a role's first instance; n-1 for its n-th (processor#2 is 1)."""
    _, _, number = proc.partition("#")
    return int(number) - 1 if number.isdigit() else 0


def point_trace(
    kind: str, proc: str, rows: list[tuple[float, int]], rank: int, *, named: bool = False
) -> go.Scatter:
    """One kind of event of one process; `named` puts the instance in the legend."""
    label, colour, symbol = EVENT_STYLE[kind]
    if rank:  # a later instance (a replacement) in its own colour
        colour = INSTANCE_COLOURS[(rank - 1) % len(INSTANCE_COLOURS)]
    if named:
        label = f"{label} by {process_words(proc)}"
    return go.Scatter(
        x=[r[0] for r in rows],
        y=[r[1] for r in rows],
        mode="markers",
        name=label,
        marker={"color": colour, "symbol": symbol, "size": 11},
        hovertemplate=f"id %{{y}} · %{{x:.3f}}s · {process_words(proc)}<extra></extra>",
    )


def anomaly_marks(
    history: list[dict[str, Any]], verdicts: list[dict[str, Any]], start: float
) -> dict[str, list[tuple[float, int, int]]]:
    """Where to mark each anomaly: a duplicate's extra copies when written, a lost id's end.

    An extra copy is placed at the moment its writer's ack named that partition and offset
    (or, failing that, when the sink read it); a lost id at its last recorded event.
    Each mark is (seconds, id, copy number; 0 for a lost id).
    """
    written: dict[str, float] = {}
    read: dict[str, float] = {}
    last_seen: dict[int, float] = {}
    for event in history:
        base = str(event.get("proc", "")).split("#")[0]
        where = f"{event.get('partition')}:{event.get('offset')}"
        if event.get("ev") in (Event.ACK, Event.OUTPUT_ACKED) and base != "source":
            written.setdefault(where, event["t"])
        elif base == "sink" and event.get("ev") == Event.CONSUMED:
            read.setdefault(where, event["t"])
        if event.get("id") is not None and base not in ("sink", "source"):
            last_seen[event["id"]] = event["t"]
    written = {**read, **written}  # the writer's moment where there is one
    marks: dict[str, list[tuple[float, int, int]]] = {"duplicated": [], "lost": []}
    for verdict in verdicts:
        message_id = verdict["id"]
        if verdict["verdict"] == "duplicated":
            for copy, offset in enumerate(verdict.get("offsets", [])[1:], start=2):
                if offset in written:
                    marks["duplicated"].append((written[offset] - start, message_id, copy))
        elif verdict["verdict"] == "lost" and message_id in last_seen:
            marks["lost"].append((last_seen[message_id] - start, message_id, 0))
    return marks


ANOMALY_STYLE = {
    "duplicated": ("duplicate: an extra copy written", "#d50000", "star"),
    "lost": ("lost: last seen here, never delivered", "#212121", "x"),
}


def id_runs(rows: list[tuple[float, int, int]]) -> list[list[tuple[float, int, int]]]:
    """Marks grouped by copy and consecutive ids, so a batch gets one label, not one per id."""
    groups: list[list[tuple[float, int, int]]] = []
    for row in sorted(rows, key=lambda r: (r[2], r[1])):
        last = groups[-1][-1] if groups else None
        if last is not None and last[2] == row[2] and row[1] - last[1] <= 1:
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def anomaly_label(group: list[tuple[float, int, int]]) -> str:
    """ "copy 2 of ids 5–9" or "lost ids 5–9": what the marks of one batch show."""
    first, last, copy = group[0][1], group[-1][1], group[0][2]
    ids = f"id {first}" if first == last else f"ids {first}–{last}"
    return f"copy {copy} of {ids}" if copy else f"lost {ids}"


def draw_anomalies(
    figure: go.Figure,
    history: list[dict[str, Any]],
    verdicts: list[dict[str, Any]],
    start: float,
    *,
    type_px: int = DESK_PX,
) -> None:
    """Large marks for the ids the checker found duplicated or lost, one label per batch.

    A label sits beside the middle of its batch, away from the fault labels along the top,
    and on the left of marks near the right edge, so it stays inside the chart.
    """
    marks = anomaly_marks(history, verdicts, start)
    right_edge = max((t for rows in marks.values() for t, _, _ in rows), default=0.0)
    for verdict, rows in marks.items():
        if not rows:
            continue
        label, colour, symbol = ANOMALY_STYLE[verdict]
        figure.add_trace(
            go.Scatter(
                x=[r[0] for r in rows],
                y=[r[1] for r in rows],
                mode="markers",
                name=label,
                marker={"color": colour, "symbol": symbol, "size": 16, "line": {"width": 1}},
                hovertemplate=f"id %{{y}} · %{{x:.3f}}s · {verdict}<extra></extra>",
            )
        )
        for group in id_runs(rows):
            x, y, _ = group[len(group) // 2]
            figure.add_annotation(
                x=x,
                y=y,
                text=anomaly_label(group),
                font={"size": type_px + 2, "color": colour},
                bgcolor="rgba(255,255,255,0.85)",
                arrowcolor=colour,
                ax=-90 if right_edge and x > 0.8 * right_edge else 90,
                ay=0,
            )


def draw_fault_bands(
    figure: go.Figure,
    faults: list[dict[str, Any]],
    start: float,
    *,
    opacity: float = 0.18,
    span: tuple[float, float] | None = None,
    above: bool = False,
    type_px: int = DESK_PX,
    **where: Any,
) -> list[dict[str, Any]]:
    """Shade each fault of a level (its JSON records) on `figure` (`where`: a subplot's cell).

    Repeats of one fault fold into one band with a count, and each label gets a row where it
    overlaps no other (`place_labels`), above the plot (`above`) or along its top. A label
    that finds no row is left off the chart; those bands are returned, for a line below it.
    """
    bands = fold_bands(fault_bands(faults, start))
    if span is None:  # a subplot's axis is not known here: the faults' own extent
        span = (min([0.0, *(b["x0"] for b in bands)]), max([1.0, *(b["x1"] for b in bands)]))
    placed = place_labels(bands, span, type_px=type_px)
    row_px = label_row_px(type_px)
    unlabelled = []
    for band, slot in zip(bands, placed, strict=True):
        figure.add_vrect(
            x0=band["x0"],
            x1=band["x1"],
            fillcolor=band["colour"],
            opacity=opacity,
            line_width=0,
            **where,
        )
        if slot is None:
            unlabelled.append(band)
            continue
        row, x = slot
        figure.add_annotation(
            x=x,
            xanchor="left",
            y=1,
            yref="y domain",
            yanchor="bottom" if above else "top",
            yshift=(4 + row * row_px) if above else -row * row_px,
            text=band_text(band, raw=type_px < ROOM_PX),
            showarrow=False,
            font={"size": type_px, "color": "#212121"},
            bgcolor="rgba(255,255,255,0.85)",
            **where,
        )
    return unlabelled


FOLD_GAP_S = 2.0  # repeats of one fault this close together are one band
LABEL_ROW_PX = 26  # a label row's height at the desk: 16 px type with its padding


def label_row_px(type_px: int) -> int:
    """A label row's height for labels in `type_px` type (LABEL_ROW_PX at the desk's)."""
    return type_px + LABEL_ROW_PX - DESK_PX


PLOT_WIDTH_PX = 900  # the narrowest the timeline is drawn: 150% zoom on a 1920 px screen
CHAR_PX = 0.6  # a character's width, in font sizes: generous for the dashboard's sans serif
RAW_FONT_PX = 11  # the raw names' small type (engine.model.words.Said.plotly)


def fold_bands(bands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bands of one fault repeated within FOLD_GAP_S of each other merged into one, counted.

    isr-shrink's producer meets dozens of refused writes while the ISR is short: one band
    "node 2 refused writes ×60" tells the room what sixty labels hid.
    """
    open_by_key: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for band in sorted(bands, key=lambda b: b["x0"]):
        key = band.get("fold") or band["label"]
        current = open_by_key.get(key)
        if current is not None and band["x0"] <= current["x1"] + FOLD_GAP_S:
            current["x1"] = max(current["x1"], band["x1"])
            current["count"] += 1
            current["label"] = band.get("fold_label") or current["label"]
            continue
        fresh = {**band, "count": 1}
        open_by_key[key] = fresh
        out.append(fresh)
    return out


def band_text(band: dict[str, Any], *, raw: bool = True) -> str:
    """A band's label in plotly's markup: the words, ×count, the raw name in small type
    (`raw`: for the engineer's screen; the projector's type has no small type)."""
    count = f" <b>×{band['count']}</b>" if band.get("count", 1) > 1 else ""
    name = (band.get("raw") or "") if raw else ""
    small = f" <span style='font-size:{RAW_FONT_PX}px;color:#757575'>{escape(name)}</span>"
    return escape(band["label"]) + count + (small if name else "")


def label_width_px(text: str, type_px: int = DESK_PX) -> float:
    """A label's width on screen, estimated from its plotly markup: words, then small type."""
    plain = re.sub(r"<span[^>]*>.*?</span>", "", text)
    small = "".join(re.findall(r"<span[^>]*>(.*?)</span>", text))
    plain, small = (unescape(re.sub(r"<[^>]+>", "", t)) for t in (plain, small))
    return (len(plain) * type_px + len(small) * RAW_FONT_PX) * CHAR_PX + 12


def place_labels(
    bands: list[dict[str, Any]],
    span: tuple[float, float],
    width_px: float = PLOT_WIDTH_PX,
    *,
    type_px: int = DESK_PX,
) -> list[tuple[int, float] | None]:
    """(row, x of the label's left edge) for each band's label, or None where none has room.

    A label starts at its band and runs right; near the right edge it ends there instead, and
    a label wider than the chart starts at the left edge. It takes the first of LABEL_ROWS
    rows where it meets no label already placed.
    """
    lo, hi = span
    per_px = max(hi - lo, 1e-9) / width_px
    gap = 6 * per_px
    rows: list[list[tuple[float, float]]] = [[] for _ in range(LABEL_ROWS)]
    placed: list[tuple[int, float] | None] = []
    for band in bands:
        width = label_width_px(band_text(band, raw=type_px < ROOM_PX), type_px) * per_px
        x0 = max(lo, min(band["x0"], hi - width))
        slot = None
        for index, taken in enumerate(rows):
            if all(x0 + width + gap <= a or b + gap <= x0 for a, b in taken):
                taken.append((x0, x0 + width))
                slot = (index, x0)
                break
        placed.append(slot)
    return placed


def fault_bands(faults: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """A level's faults (JSON records) as time bands: a lasting fault (its kind's `ended_by`:
    a pause) until the record that ends it, for the same target; an instant fault gets 50 ms.

    Each band has the room's words (`label`), the engine's names (`raw`, small type), and
    `fold`: equal for repeats of one fault, which fold_bands merges.
    """
    bands = []
    paired = set()  # the records a lasting band covers: its start and its end
    for began, ended in lasting_spans(faults):
        its_kind = fault_kind_of(began)
        assert its_kind is not None  # lasting_spans starts a span only on a lasting kind
        label, raw = its_kind.lasting(began)
        # Never ended within the level: a 50 ms band, as an instant fault's.
        x0 = began["t"] - start
        x1 = ended["t"] - start if ended is not None else x0 + 0.05
        bands.append(band(x0, x1, label, its_kind.colour, raw))
        paired.update(id(r) for r in (began, ended) if r is not None)
    for fault in faults:
        if id(fault) in paired:
            continue
        kind, t = fault["kind"], fault["t"] - start
        fault_kind = fault_kind_of(fault)
        if kind in (
            ProxyRecord.RULES_CLEARED,
            ProxyRecord.LATENCY_SET,
            ProxyRecord.CONNECTION_RESET,
        ) or (fault_kind is not None and not fault_kind.drawn):
            continue  # set-up and clean-up, or the consequence of a drop already shown
        if kind in (NemesisRecord.ELR, NemesisRecord.BROKER_LOG, NemesisRecord.OFFSETS):
            continue  # evidence read from Kafka's tools and logs, listed with the evidence
        duration = float(fault.get("duration_s") or 0.05)
        colour = fault_kind.colour if fault_kind is not None else HURT
        event = {**fault, "ev": "proxy" if fault.get("source") == "proxy" else "nemesis"}
        # A proxy's drop is said in its short words; its request is in the evidence.
        dropped = kind.endswith("_dropped") and kind in PROXY_WORDS
        label = PROXY_WORDS[kind] if dropped else short_text(event) or say_fault(kind).words
        bands.append(
            {
                **band(t, t + duration, label, colour, fault_raw(event)),
                "fold": fault_fold(event, label),
                "fold_label": fold_text(event, label) if event["ev"] == Event.PROXY else label,
            }
        )
    return bands


def short_text(event: dict[str, Any]) -> str | None:
    """A fault's words for a band's label: the nemesis's short form, else the live view's."""
    if event["ev"] == Event.NEMESIS and event.get("kind") not in (NemesisRecord.OFFSETS,):
        return nemesis_text(event, short=True)
    return fault_text(event)


def band(x0: float, x1: float, label: str, colour: str, raw: str = "") -> dict[str, Any]:
    return {"x0": x0, "x1": x1, "label": label, "colour": colour, "raw": raw}
