"""Replay: open any recorded run from runs/ and see it all again, without a cluster."""

from __future__ import annotations

import time

import streamlit as st

from engine import record
from engine.errors import LabError
from pages._run_view import render_run
from pages._shared import require_app, show_error

require_app()

st.title("Replay")
st.caption("Every run is recorded under runs/. Replaying one needs no Kafka, no Java, no Docker.")
runs = record.list_runs()
if not runs:
    st.info(
        "No recorded runs yet. Run a scenario in the Failure lab, or with "
        "`python -m engine run scenarios/ack-loss.yaml`."
    )
    st.stop()


def label(meta: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0))
    return f"{meta.get('scenario', '?')} · {when} · {meta.get('status', '?')}"


chosen = st.selectbox("Run", runs, format_func=label, key="replay_run")
try:
    render_run(record.load_run(chosen["run_id"]))
except LabError as exc:
    show_error(exc)
