"""The Log views' Compaction tab: a record list written to a compacted topic, before and
after the cleaner, and why each offset went or stayed.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.face import (
    LECTURE_PRESET,
    ROLL_KEY,
    Cluster,
    CompactionResult,
    CompactionSettings,
    compaction_rows,
    parse_records,
    run_compaction,
    segment_label,
)
from pages._log_common import no_none, not_ready, table
from pages._presenter import presenter_on, room_table
from pages._roles import is_presenter, require_presenter
from pages._run_view import scroll_to_key
from pages._shared import show_error

# The block holding a compaction's result, scrolled to after the action.
COMPACTION_KEY = "compaction-result"

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
STATUS_ICONS = {
    "removed": "🗑️ removed",
    "tombstone removed": "🗑️ tombstone removed",
    "roll record, removed": "🗑️ roll record, removed",
    "kept": "✅ kept",
    "tombstone kept": "🪦 tombstone kept",
    "not cleaned yet": "⏳ not cleaned yet",
    "roll record": "🔄 roll record",
}


# ---- compaction -----------------------------------------------------------------------------
PRESETS = {
    "Lecture example (offsets 0-10)": LECTURE_PRESET,
    "Lecture example, then K2 deleted (a tombstone)": LECTURE_PRESET + ",K2=",
    "Your own": None,
}


def compaction_tab(cluster: Cluster | None) -> None:
    st.markdown(
        "A compacted topic keeps **the last record of every key**. The log cleaner copies "
        "closed segments without the records a later write of the same key made obsolete; "
        "**offsets never change**, so the cleaned log has gaps. A record whose value is "
        "**null** (not an empty value, which is kept like any other) is a **tombstone**: it "
        "deletes its key, and is itself removed `delete.retention.ms` after the cleaning that "
        "first kept it. Here `KEY=`, with nothing after the `=`, writes a null value."
    )
    st.markdown(
        "The **active segment is never compacted**: the cleaner only touches closed segments. "
        "Kafka 4 refuses `segment.bytes` under 1 MiB, so this demo closes segments by time: "
        f"`segment.ms` after the writes the lab writes one record with key `{ROLL_KEY}`, "
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
    defaults = CompactionSettings()
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

    fresh = False
    if cluster is None:
        not_ready()
    elif not is_presenter():
        st.caption("Writing records is the presenter's to do, on the shared screen.")
    elif st.button("Write, roll, and wait for the cleaner", type="primary"):
        require_presenter("write records to a topic")
        settings = CompactionSettings(
            min_cleanable_dirty_ratio=float(ratio),
            segment_ms=int(segment_ms),
            min_compaction_lag_ms=int(lag_ms),
            delete_retention_ms=int(retention_ms),
        )
        try:
            records = parse_records(text)
            with st.status("Compacting…", expanded=True) as status:
                result = run_compaction(
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
            fresh = True
        except Exception as exc:
            show_error(exc)
    result: CompactionResult | None = st.session_state.get("logs_compaction")
    if result is not None:
        with st.container(key=COMPACTION_KEY):
            show_compaction(result)
        if fresh:  # the after-numbers on the first screen, once, right after the action
            scroll_to_key(COMPACTION_KEY)


def show_compaction(result: CompactionResult) -> None:
    rows = compaction_rows(result)
    # The topic's name carries a run id: the engineer's, not the projector's.
    st.subheader("The compacted topic" if presenter_on() else f"`{result.topic}`")
    for note in result.notes:
        st.warning(note, icon="⏱️")
    removed = sum(1 for r in rows if r["status"].endswith("removed") and r["key"] != ROLL_KEY)
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
                if r["key"] != ROLL_KEY
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
                        "segment": segment_label(offset, layout),
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
            room_table(
                no_none(pd.DataFrame([r.to_json() for r in result.after_first_clean])),
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
