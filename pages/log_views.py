"""Log views: compaction before and after, both isolation levels, and the batches underneath.

Every table here is read back from Kafka (a consumer on the direct listener, ListOffsets,
or Kafka's own DumpLogSegments tool); the page only labels what came back.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine import logs, record
from engine.cluster import Cluster
from pages._shared import cluster_service, require_app, show_error

require_app()

ROW_HEIGHT = 35  # st.dataframe's row height: tables are sized to show every row at once
STATUS_COLORS = {
    "removed": "#ffcdd2",
    "tombstone removed": "#ffcdd2",
    "roll record, removed": "#ffcdd2",
    "kept": "#c8e6c9",
    "tombstone kept": "#e0e0e0",
    "not cleaned yet": "#fff9c4",
    "roll record": "#bbdefb",
    "gap": "#f5f5f5",
}
KIND_COLORS = {
    "committed": "#c8e6c9",
    "not transactional": "#c8e6c9",
    "aborted": "#ffcdd2",
    "open": "#ffe0b2",
    "marker": "#e1bee7",
}
STATUS_ICONS = {
    "removed": "🗑️ removed",
    "tombstone removed": "🗑️ tombstone removed",
    "roll record, removed": "🗑️ roll record, removed",
    "kept": "✅ kept",
    "tombstone kept": "🪦 tombstone kept",
    "not cleaned yet": "⏳ not cleaned yet",
    "roll record": "🔄 roll record",
}


def cluster_or_none() -> Cluster | None:
    service = cluster_service()
    return service.cluster if service.state == "ready" else None


def not_ready() -> None:
    st.info(
        "The cluster is not ready: start it in the sidebar (or with "
        "`python -m engine cluster up`). Recorded runs work without one.",
        icon="⏳",
    )


def table(df: pd.DataFrame, colors: dict[str, str]) -> None:
    """A full-height table, each row coloured by its hidden `_state` column."""

    def paint(row: pd.Series) -> list[str]:
        color = colors.get(str(row["_state"]), "")
        return [f"background-color: {color}" if color else ""] * len(row)

    # Whole-number columns with gaps (None) would otherwise show as floats: 2.000000.
    for column in df.columns:
        if df[column].dtype == float and df[column].dropna().apply(float.is_integer).all():
            df[column] = df[column].astype("Int64")
    height = min(ROW_HEIGHT * (len(df) + 1) + 3, 900)
    shown = [c for c in df.columns if c != "_state"]
    st.dataframe(df.style.apply(paint, axis=1), hide_index=True, height=height, column_order=shown)


# ---- compaction -----------------------------------------------------------------------------
PRESETS = {
    "Lecture example (offsets 0-10)": logs.LECTURE_PRESET,
    "Lecture example, then K2 deleted (a tombstone)": logs.LECTURE_PRESET + ",K2=",
    "Your own": None,
}


def compaction_tab(cluster: Cluster | None) -> None:
    st.markdown(
        "A compacted topic keeps **the last record of every key**. The log cleaner copies "
        "closed segments without the records a later write of the same key made obsolete; "
        "**offsets never change**, so the cleaned log has gaps. An empty value is a "
        "**tombstone**: it deletes its key, and is itself removed `delete.retention.ms` "
        "after the cleaning that first kept it."
    )
    st.markdown(
        "The **active segment is never compacted**: the cleaner only touches closed segments. "
        "Kafka 4 refuses `segment.bytes` under 1 MiB, so this demo closes segments by time: "
        f"`segment.ms` after the writes the lab writes one record with key `{logs.ROLL_KEY}`, "
        "which rolls a new active segment (while waiting for tombstones to go, it writes "
        "more: only new dirty data brings the cleaner back). The broker's "
        "`log.cleaner.backoff.ms` is 1 s."
    )
    preset = st.selectbox("Records", list(PRESETS), key="logs_preset")
    text = st.text_area(
        "KEY=VALUE pairs separated by commas (KEY= writes a tombstone)",
        value=PRESETS[preset] or "A=1,B=1,A=2,B=",
        key=f"logs_records_{preset}",
        disabled=PRESETS[preset] is not None,
    )
    defaults = logs.CompactionSettings()
    c1, c2, c3, c4 = st.columns(4)
    ratio = c1.number_input(
        "min.cleanable.dirty.ratio",
        0.0,
        1.0,
        defaults.min_cleanable_dirty_ratio,
        0.01,
        help="clean when this share of the log is dirty (not cleaned yet)",
    )
    segment_ms = c2.number_input(
        "segment.ms",
        100,
        60_000,
        defaults.segment_ms,
        100,
        help="a segment older than this rolls at the next write",
    )
    lag_ms = c3.number_input(
        "min.compaction.lag.ms",
        0,
        300_000,
        defaults.min_compaction_lag_ms,
        500,
        help="records younger than this are never cleaned",
    )
    retention_ms = c4.number_input(
        "delete.retention.ms",
        0,
        300_000,
        defaults.delete_retention_ms,
        500,
        help="how long a tombstone survives after the cleaning that first kept it",
    )
    c5, c6 = st.columns([1, 3])
    timeout = c5.number_input("Wait for the cleaner at most (s)", 5, 600, 60, 5)
    wait_tombs = c6.checkbox("Wait until tombstones are removed too", value=True)

    if cluster is None:
        not_ready()
    elif st.button("Write, roll, and wait for the cleaner", type="primary"):
        settings = logs.CompactionSettings(
            min_cleanable_dirty_ratio=float(ratio),
            segment_ms=int(segment_ms),
            min_compaction_lag_ms=int(lag_ms),
            delete_retention_ms=int(retention_ms),
        )
        try:
            records = logs.parse_records(text)
            with st.status("Compacting…", expanded=True) as status:
                result = logs.run_compaction(
                    cluster,
                    records,
                    settings,
                    timeout=float(timeout),
                    wait_for_tombstones=wait_tombs,
                    progress=status.write,
                )
                status.update(label="Done", state="complete", expanded=False)
            st.session_state["logs_compaction"] = result
            st.session_state["logs_last_topic"] = result.topic
        except Exception as exc:
            show_error(exc)
    result: logs.CompactionResult | None = st.session_state.get("logs_compaction")
    if result is not None:
        show_compaction(result)


def show_compaction(result: logs.CompactionResult) -> None:
    rows = logs.compaction_rows(result)
    st.subheader(f"`{result.topic}`")
    for note in result.notes:
        st.warning(note, icon="⏱️")
    removed = sum(1 for r in rows if r["status"].endswith("removed") and r["key"] != logs.ROLL_KEY)
    layout = result.layout
    m = st.columns(5)
    m[0].metric(
        "Cleaner took",
        "-" if result.cleaner_seconds is None else f"{result.cleaner_seconds:.1f} s",
        help="from the roll that closed the segment to the first read without obsolete records",
    )
    if not any(r.value is None for r in result.before):
        tombstones = "none written"
    elif not result.tombstones_waited:
        tombstones = "not waited for"
    elif result.tombstone_seconds is None:
        tombstones = "not yet"
    else:
        tombstones = f"{result.tombstone_seconds:.1f} s"
    m[1].metric(
        "Tombstones gone after",
        tombstones,
        help="from the same roll; a tombstone leaves only after delete.retention.ms",
    )
    m[2].metric("Records removed", f"{removed} of {len(result.before)}")
    m[3].metric(
        "Cleaned up to offset",
        "-" if not layout or layout.cleaner_checkpoint is None else layout.cleaner_checkpoint,
        help="the cleaner's checkpoint: the first offset it has not cleaned",
    )
    m[4].metric(
        "Active segment begins at",
        "-" if not layout or layout.active_segment_base is None else layout.active_segment_base,
        help="the segment being written; the cleaner never touches it",
    )

    left, right = st.columns(2)
    with left:
        st.markdown("**Before**: read back from the broker right after the writes")
        before = pd.DataFrame(
            [
                {
                    "offset": r["offset"],
                    "key": r["key"],
                    "value": r["value"],
                    "what became of it": STATUS_ICONS.get(r["status"], r["status"]),
                    "made obsolete by offset": r["superseded_by"],
                    "_state": r["status"],
                }
                for r in rows
                if r["key"] != logs.ROLL_KEY
            ]
        )
        table(before, STATUS_COLORS)
    with right:
        st.markdown("**After**: read back once the cleaner had run (gaps are removed offsets)")
        kept = {r.offset: r for r in result.after}
        by_offset = {r["offset"]: r for r in rows}
        after_rows = []
        for offset in range(0, max([*kept, *by_offset], default=-1) + 1):
            r = by_offset.get(offset)
            if offset in kept:
                rec = kept[offset]
                after_rows.append(
                    {
                        "offset": offset,
                        "key": rec.key,
                        "value": "null (tombstone)" if rec.value is None else rec.value,
                        "segment": logs.segment_label(offset, layout),
                        "_state": r["status"] if r else "kept",
                    }
                )
            else:
                after_rows.append(
                    {
                        "offset": offset,
                        "key": "",
                        "value": "— gap —",
                        "segment": "",
                        "_state": "gap",
                    }
                )
        table(pd.DataFrame(after_rows), STATUS_COLORS)

    st.markdown("**Why**: each offset, what the cleaner did, and the later write responsible")
    why = pd.DataFrame(rows)[["offset", "key", "value", "status", "why", "segment"]]
    why = why.assign(_state=why["status"])
    table(why, STATUS_COLORS)
    if result.after_first_clean is not None and result.tombstones_waited:
        with st.expander("After the first cleaning (tombstones still there)"):
            st.dataframe(
                pd.DataFrame([r.to_json() for r in result.after_first_clean]),
                hide_index=True,
            )
    with st.expander("The topic's settings, as the broker reports them"):
        st.json(result.settings)
    st.button(
        "Show this topic's batches in the Batches tab",
        # Setting the widget's own key before it is drawn selects the topic there.
        on_click=lambda: st.session_state.update(logs_batch_topic=result.topic),
        key="logs_to_batches",
    )


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
    runs = [r for r in record.list_runs() if r.get("status") == "complete"]
    if not runs:
        st.info(
            "No recorded runs yet. Run `python -m engine run scenarios/aborted-transaction.yaml`."
        )
        return
    # The aborted-transaction scenario is the one written for this view.
    default = next((i for i, r in enumerate(runs) if r.get("scenario") == "aborted-transaction"), 0)

    def label(meta: dict[str, Any]) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0))
        return f"{meta.get('scenario', '?')} · {when}"

    left, mid, right = st.columns([3, 2, 1])
    meta = left.selectbox("Run", runs, index=default, format_func=label, key="logs_iso_run")
    run = record.load_run(meta["run_id"])
    levels = list(run["levels"])
    with_txn = [lv for lv in levels if logs.run_has_transactions(run, lv)]
    level = mid.selectbox(
        "Level",
        levels,
        index=levels.index(with_txn[0]) if with_txn else 0,
        key=f"logs_iso_level_{meta['run_id']}",
    )
    partition = int(right.number_input("Partition", 0, 999, 0, key="logs_iso_run_part"))
    if level not in with_txn:
        st.info("This level wrote no transactions, so both isolation levels read the same.")
    show_isolation(logs.isolation_from_run(run, level, partition))


def topic_picker(cluster: Cluster, key: str) -> tuple[str, int] | None:
    """A topic of the cluster (the one used last preselected) and a partition number."""
    topics = logs.list_topic_names(cluster.direct_bootstrap)
    if not topics:
        st.info("The cluster has no topics yet: run the compaction or transaction demo first.")
        return None
    # A topic the page just made (compaction, demo) is picked once; then the user's choice.
    newest = st.session_state.get("logs_last_topic")
    if newest in topics and st.session_state.get(f"{key}_newest") != newest:
        st.session_state[key] = st.session_state[f"{key}_newest"] = newest
    elif st.session_state.get(key) not in topics:
        st.session_state[key] = topics[-1]
    left, right = st.columns([4, 1])
    topic = left.selectbox("Topic", topics, key=key)
    partition = int(right.number_input("Partition", 0, 999, 0, key=f"{key}_partition"))
    return topic, partition


def live_isolation(cluster: Cluster) -> None:
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
        view = logs.isolation_live(cluster.direct_bootstrap, topic, partition)
        if exact:
            view = logs.apply_batches(view, logs.dump_log(cluster, topic, partition).batches)
        st.session_state["logs_live_view"] = view
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
    if st.button("Run the demo", type="primary"):
        with st.status("Running the transactions…", expanded=True) as status:
            demo = logs.open_transaction_demo(
                cluster.direct_bootstrap, open_records=count, progress=status.write
            )
            if cluster.backend in ("local", "docker"):
                # The log only grows: one dump after the commit types both views' markers.
                status.write("Dumping the log for the exact markers and producer ids")
                batches = logs.dump_log(cluster, demo.topic).batches
                logs.apply_batches(demo.while_open, batches)
                logs.apply_batches(demo.after_commit, batches)
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


def show_isolation(view: logs.IsolationView) -> None:
    st.caption(f"`{view.topic}` partition {view.partition} · {view.source}")
    m = st.columns(5)
    m[0].metric("Log start", view.log_start)
    m[1].metric("Last stable offset", view.last_stable_offset, help="read_committed stops here")
    m[2].metric("High watermark", view.high_watermark, help="read_uncommitted stops here")
    m[3].metric("Aborted records", len(view.aborted))
    m[4].metric("Markers", len(view.markers))
    st.plotly_chart(isolation_figure(view))
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


def isolation_figure(view: logs.IsolationView) -> go.Figure:
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


# ---- batches ---------------------------------------------------------------------------------
def batches_tab(cluster: Cluster | None) -> None:
    st.markdown(
        "Kafka's own log-dump tool reads the partition's segment files on the broker: "
        "`java -cp LIBS/* kafka.tools.DumpLogSegments --files SEGMENT.log --deep-iteration` "
        "(on the docker backend, `kafka-dump-log.sh` inside the broker's container). Each "
        "batch carries its producer id and epoch, its base sequence, whether it is "
        "transactional, and whether it is a control batch: a COMMIT or ABORT marker."
    )
    if cluster is None:
        not_ready()
        return
    try:
        picked = topic_picker(cluster, "logs_batch_topic")
        if picked is None:
            return
        topic, partition = picked
        nodes = ["leader", *cluster.node_ids]
        left, right = st.columns([1, 3])
        node = left.selectbox("Node", nodes, key="logs_batch_node")
        with_data = right.checkbox("Keys and payloads", value=True, key="logs_batch_data")
        if st.button("Dump the log", type="primary"):
            dump = logs.dump_log(
                cluster,
                topic,
                partition,
                node_id=None if node == "leader" else int(node),
                print_data=with_data,
            )
            st.session_state["logs_dump"] = dump
    except Exception as exc:
        show_error(exc)
        return
    dump: logs.LogDump | None = st.session_state.get("logs_dump")
    if dump is None:
        return
    st.caption(
        f"`{dump.topic}` partition {dump.partition} on node {dump.node_id}: "
        f"{len(dump.files)} segment file(s), {len(dump.batches)} batch(es)"
    )
    rows = logs.batch_rows(dump.batches)
    if not rows:
        st.info("The partition holds no batches.")
        return
    df = pd.DataFrame(rows)
    df["_state"] = [
        "abort" if r["control type"] == "ABORT" else "commit" if r["control"] else "data"
        for r in rows
    ]
    table(df, {"abort": "#ffcdd2", "commit": "#c8e6c9"})
    with st.expander("Records inside the batches"):
        records = [
            {
                "batch": b.base_offset,
                "offset": r.offset,
                "sequence": r.sequence,
                "key": r.key,
                "payload": r.payload if r.value_size != -1 else "null (tombstone)",
                "marker": r.marker,
            }
            for b in dump.batches
            for r in b.records
        ]
        st.dataframe(pd.DataFrame(records), hide_index=True)
    with st.expander("The tool's own output"):
        st.code(dump.raw or "(no output)", language=None)


st.title("Log views")
st.caption(
    "Compaction, isolation levels and record batches, read back from the brokers: nothing "
    "on this page is computed on the client."
)
tabs = st.tabs(["Compaction", "Isolation levels", "Batches"])
current = cluster_or_none()
with tabs[0]:
    compaction_tab(current)
with tabs[1]:
    isolation_tab(current)
with tabs[2]:
    batches_tab(current)
