"""Zombie fencing: the transactional id, the epoch bump, and the zombie's rejected write.

Evidence comes from two places: the run's history (when each instance registered its
transactional.id, when the old one froze and woke up, the error that rejected it), and the
broker's own record batches for the output partition (producer id and epoch of every batch,
and the COMMIT or ABORT marker that ended each transaction).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.face import (
    Event,
    LabError,
    TopicGoneError,
    dump_log,
    lasting_spans,
    list_runs,
    list_scenarios,
    load_run,
    load_scenario,
    process_words,
)
from pages._presenter import presenter_on, room_chart, room_table
from pages._roles import is_presenter
from pages._run_control import run_live
from pages._shared import cluster_service, require_app, show_error

require_app()

LEVEL = "exactly-once"
PID_EPOCH = re.compile(r"PID\{Id:(\d+),Epoch:(\d+)\}")

st.title("Zombie fencing")
st.markdown(
    "A processor freezes mid-transaction, a replacement with the **same transactional.id** "
    "takes over, and the old one wakes up. Registering the id again (`init_transactions`) "
    "bumps its **epoch** and aborts the open transaction; any write carrying the old epoch is "
    "rejected. Here is that story, from the run's history and from the broker's log."
)

service = cluster_service()
if is_presenter() and st.button(
    "▶ Run the zombie scenario (exactly-once)", type="primary", disabled=service.state != "ready"
):
    scenario = load_scenario(list_scenarios()["zombie"])
    output = run_live(service, scenario, [LEVEL])
    if output is not None:
        st.session_state["zombie_run"] = output["run_id"]
        # The picker below opens on the run just made, not on the one it showed before.
        st.session_state["zombie_pick"] = output["run_id"]

runs = [
    r
    for r in list_runs()
    if r.get("scenario") == "zombie"
    and LEVEL in r.get("levels", [])
    and r.get("status") == "complete"
]
if not runs:
    st.info("No zombie run is recorded yet: run one with the button above.")
    st.stop()
ids = [r["run_id"] for r in runs]
chosen = st.session_state.get("zombie_run")
if st.session_state.get("zombie_pick") not in ids:
    st.session_state["zombie_pick"] = chosen if chosen in ids else ids[0]
run_id = st.selectbox("Run", ids, key="zombie_pick")
try:
    run = load_run(run_id)
except LabError as exc:
    show_error(exc)
    st.stop()
# The history's events are free-form JSON (each kind of event its own fields); the level's
# judged result is typed.
history: list[dict[str, Any]] = run.levels[LEVEL].history
result = run.levels_judged[LEVEL]
start = result.settings.started_at or history[0]["t"]


def instance_label(proc: str) -> str:
    return (
        "zombie (first instance)" if proc == "processor" else f"replacement ({process_words(proc)})"
    )


inits = [e for e in history if e["ev"] == Event.TXN_INIT and e["proc"].startswith("processor")]
fenced = [e for e in history if e["ev"] == Event.FENCED]
txn_id = inits[0]["transactional_id"] if inits else "?"
left, mid, writes, calls = st.columns(4)
left.metric("transactional.id", "shared by both", help=txn_id)
mid.metric("Registrations", len(inits), help="init_transactions calls: each bumps the epoch")
writes.metric(
    "Writes refused (epoch)",
    result.counts.writes_refused,
    help="Produce requests a partition leader refused for their out-of-date producer epoch",
)
calls.metric(
    "Transaction calls refused",
    result.counts.txn_calls_refused,
    help="calls of the zombie's transaction (adding offsets or partitions, ending it) that "
    "the transaction coordinator refused for its out-of-date epoch",
)
if not presenter_on():  # the id carries the run's id: for the engineer's screen, not the projector
    st.caption(f"`transactional.id = {txn_id}`")
for event in fenced:
    match = PID_EPOCH.search(event.get("reason", ""))
    detail = f" (producer id {match[1]}, old epoch {match[2]})" if match else ""
    # Fencing is exactly-once working, so it is shown as a success, with Kafka's own words.
    st.success(
        f"Fencing worked: {instance_label(event['proc'])} was refused{detail}. "
        f"Kafka said: “{event.get('reason')}”",
        icon="🛡️",
    )

# The timeline: one row per instance.
figure = go.Figure()
style = {
    "txn_init": ("registers the id: epoch bump", "#6a1b9a", "diamond", 14),
    "txn_commit": ("commits", "#2e7d32", "circle", 10),
    "output_acked": ("writes a result", "#90a4ae", "circle-open", 7),
    "fenced": ("rejected: fenced", "#c62828", "x", 16),
}
for kind, (label, colour, symbol, size) in style.items():
    events = [e for e in history if e["ev"] == kind and e["proc"].startswith("processor")]
    if events:
        figure.add_trace(
            go.Scatter(
                x=[e["t"] - start for e in events],
                y=[instance_label(e["proc"]) for e in events],
                mode="markers",
                name=label,
                marker={"color": colour, "symbol": symbol, "size": size},
            )
        )
# The first lasting fault (the zombie's pause) and the record that ended it (its resume).
spans = lasting_spans(e for e in history if e["ev"] == Event.NEMESIS)
paused_at, woke_at = (spans[0][0]["t"], (spans[0][1] or {}).get("t")) if spans else (None, None)
if paused_at and woke_at:
    figure.add_vrect(
        x0=paused_at - start,
        x1=woke_at - start,
        fillcolor="#f9a825",
        opacity=0.2,
        line_width=0,
        annotation_text="zombie frozen (SIGSTOP … SIGCONT)",
    )
figure.update_layout(
    height=320,
    xaxis_title="seconds since the level started",
    margin={"l": 10, "r": 10, "t": 30, "b": 10},
    legend={"orientation": "h", "y": -0.35},
)
room_chart(figure, width="stretch")

st.subheader("The broker's log: who wrote each batch, with which epoch")
cluster = service.cluster
if cluster is None or not cluster.supports_broker_faults:
    st.info(
        "The batches are read from a running cluster's log files; start the cluster to "
        "see them. The history above needs no cluster."
    )
    st.stop()

try:
    dump = dump_log(cluster, result.settings.sink_topic, 0)
except TopicGoneError:
    # A run recorded on an earlier cluster: its topics went with it, its record did not.
    st.info(
        f"The topic `{result.settings.sink_topic}` is not on the running cluster: the batches went "
        "with the cluster this run was made on. The history above comes from the run's record.",
        icon="🗂️",
    )
    st.stop()
except LabError as exc:
    show_error(exc)
    st.stop()
rows = []
for batch in dump.batches:
    writer = None
    for rec in batch.records:
        try:
            writer = json.loads(rec.payload or "{}").get("processed_by")
        except (json.JSONDecodeError, AttributeError, TypeError):
            writer = None
        if writer:
            break
    rows.append(
        {
            "offsets": f"{batch.base_offset}–{batch.last_offset}",
            "producer id": batch.producer_id,
            "epoch": batch.producer_epoch,
            "kind": batch.control_type if batch.is_control else "data",
            "written by": instance_label(writer) if writer else "",
        }
    )
table = pd.DataFrame(rows)
room_table(table, hide_index=True, width="stretch")
epochs = sorted({(r["producer id"], r["epoch"]) for r in rows if r["producer id"] >= 0})
if len(epochs) > 1:
    aborted = "ABORT" in set(table["kind"])
    st.markdown(
        "The same producer id appears with epochs "
        + ", ".join(str(e) for _, e in epochs)
        + ": the replacement's registration bumped the epoch."
        + (
            " The zombie's open transaction ends in an **ABORT** marker (written by the "
            "transaction coordinator), so read_committed readers never see its results."
            if aborted
            else " The zombie had no open transaction in this partition when it froze, so "
            "there was nothing to abort here; its late write was still rejected."
        )
    )
