"""Replay: open any recorded run from runs/ and see it all again, without a cluster."""

from __future__ import annotations

import time

import streamlit as st

from engine.face import (
    LabError,
    event_words,
    level_events,
    list_runs,
    load_run,
    load_vote,
    process_words,
    recorded_events,
    run_folder,
    votes_text,
)
from pages._presenter import room_table
from pages._run_view import render_run
from pages._shared import require_app, show_error
from pages._votes import lesson_named

require_app()

st.title("Replay")
st.caption("Every run is recorded under runs/. Replaying one needs no Kafka, no Java, no Docker.")
runs = list_runs()
if not runs:
    st.info(
        "No recorded runs yet. Run a scenario in the Failure lab, or with "
        "`python -m engine run scenarios/ack-loss.yaml`."
    )
    st.stop()


def label(meta: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(meta.get("started_at") or 0))
    return f"{meta.get('scenario', '?')} · {when} · {meta.get('status', '?')}"


LAST_EVENTS = 200  # of each level, in an interrupted run
MAX_EVENTS_READ = 200_000  # a level with more is not read into the page


def default_index(runs: list[dict], asked: str | None = None) -> int | None:
    """The run the address names (`?run=RUN_ID`, a link to one run), else the newest run
    that ended (complete or failed); never an interrupted or running one by default."""
    if asked is not None:
        named = next((i for i, meta in enumerate(runs) if meta.get("run_id") == asked), None)
        if named is not None:
            return named
    return next(
        (i for i, meta in enumerate(runs) if meta.get("status") in ("complete", "failed")), None
    )


def render_interrupted(meta: dict) -> None:
    """What an interrupted run can still say: when it stopped, and what was written by then."""
    st.warning(
        meta.get("reason")
        or "This run was interrupted: the process that ran it stopped before the run ended. "
        "Nothing was judged.",
        icon="⏹️",
    )
    recorded = meta.get("recorded") or recorded_events(meta["run_id"])
    if not recorded:
        st.caption("No client had written an event yet.")
        return
    st.caption("Events written before it stopped, by level and history file:")
    st.table(
        [
            {"level": level, "history": name, "events": count}
            for level, files in recorded.items()
            for name, count in files.items()
        ]
    )
    folder = run_folder(meta["run_id"])
    for level, files in recorded.items():
        total = sum(files.values())
        with st.expander(f"{level}: the last events before it stopped"):
            if total > MAX_EVENTS_READ:
                st.caption(f"{total:,} events: too many to read here; they are in {folder}.")
                continue
            events = level_events(meta["run_id"], level)
            began = float(meta.get("started_at") or 0)
            room_table(
                [
                    {
                        "s": round(e.t - began, 3),
                        "process": process_words(e.proc),
                        "event": event_words(str(e.ev)),
                        "id": e.get("id"),
                    }
                    for e in events[-LAST_EVENTS:]
                ],
                hide_index=True,
            )


def room_vote(run_id: str, results: dict) -> None:
    """The room's vote, when the run was a lesson step's (saved with it: engine.teach.vote)."""
    saved = load_vote(run_id)
    if saved is None:
        return
    try:
        step = lesson_named(saved.lesson).steps[saved.step]
        shown = step.outcome(results)
        against = saved.tally.against(shown.text if shown else None)
    except (LabError, IndexError):  # the lesson file changed since: the counts alone
        against = f"{votes_text(saved.tally.total)}: {saved.tally.split()}."
    st.markdown(
        f"**The room's vote** (lesson {saved.lesson}, step {saved.step + 1}): {saved.question}"
    )
    st.markdown(
        against + (f" The room's prediction: “{saved.prediction}”." if saved.prediction else "")
    )


asked = st.query_params.get("run")
chosen = st.selectbox(
    "Run",
    runs,
    index=default_index(runs, asked),
    format_func=label,
    key="replay_run",
    placeholder="Choose a run (none has ended yet)",
)
if asked is not None and all(meta.get("run_id") != asked for meta in runs):
    # The address is anyone's to write: its value is shown as code, never read as Markdown.
    shown = asked.replace("`", "")[:80]
    st.warning(f"There is no run `{shown}` here; the newest run is shown.", icon="🔎")
if chosen is None:
    st.info("Every recorded run is interrupted or still going on: choose one above to look.")
    st.stop()
try:
    if chosen.get("status") == "interrupted":
        render_interrupted(chosen)
    else:
        run = load_run(chosen["run_id"])
        room_vote(chosen["run_id"], run.results)
        render_run(run)
except LabError as exc:
    show_error(exc)
