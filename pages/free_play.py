"""Free play: a steady stream through the levels side by side, and buttons that strike now.

Every button is the real fault, fired through engine.run.freeplay on every running level at once;
the counts and the live view are read from the session's own history files as they grow.
The session outlives the page's script runs (it has its own thread, kept in the browser
session's state), and a fragment redraws it twice a second while the buttons stay live.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path

import pandas as pd
import streamlit as st

from engine.face import (
    BUTTONS,
    CORE_LEVELS,
    LEVELS,
    RATE_BOUNDS,
    RESTART_BOUNDS,
    TIME_LIMIT_BOUNDS,
    FreePlay,
    FreePlaySettings,
    LabError,
    LevelSnapshot,
    RunWatch,
    broker_faults_refused,
    load_run,
)
from pages._follow import Broadcast, follow_panel, proxy_start, room_feed
from pages._live_view import COUNTERS, LiveView
from pages._presenter import presenter_on
from pages._roles import is_presenter, require_presenter
from pages._run_view import render_run, scroll_to_key
from pages._shared import cluster_service, require_app, show_error

require_app()

SESSION, WATCH = "free_play", "free_play_watch"
REFRESH_S = 0.5

st.title("Free play")
st.markdown(
    "A steady stream of messages flows through every level at once: a producer with the "
    "level's settings writes the input topic, a processor reads it in the level's commit "
    "mode and writes the output topic, and a consumer at the level's isolation reads that. "
    "Each button strikes **now**, in every level at the same moment, and each fault is the "
    "real one: **Drop the next ack**: the fault proxy forwards the producer's next Produce "
    "request and drops the broker's answer. **Kill the processor**: SIGKILL. **Freeze** and "
    "**Wake**: SIGSTOP and SIGCONT. **Kill the partition leader** (3 nodes): SIGKILL of the "
    "broker's JVM. The counts below come from what the clients have written, as they write it."
)

if not is_presenter():  # the room watches the presenter's stream, live
    follow_panel("free_play")
    st.stop()

service = cluster_service()
cluster = service.cluster if service.state == "ready" else None
session: FreePlay | None = st.session_state.get(SESSION)
running = session is not None and session.active


def settings_form() -> FreePlaySettings:
    """The session's settings; the application's choices are labelled as such."""
    leader_refused = broker_faults_refused(cluster) if cluster is not None else None
    if leader_refused is not None:
        st.session_state["fp_brokers"] = False  # ticked before the cluster was known
    # Open until a session starts; the results of the last one come first after it.
    with st.expander("Settings", expanded=session is None):
        left, middle, right = st.columns(3)
        levels = left.multiselect(
            "Levels", list(LEVELS), default=list(CORE_LEVELS), key="fp_levels", disabled=running
        )
        rate = middle.slider(
            "Messages per second, per level",
            *map(int, RATE_BOUNDS),
            value=10,
            key="fp_rate",
            disabled=running,
        )
        limit = right.slider(
            "Stops by itself after (s)",
            *map(int, TIME_LIMIT_BOUNDS),
            value=60,
            step=10,
            key="fp_limit",
            disabled=running,
        )
        replace_frozen = left.checkbox(
            "Start a replacement when the processor freezes",
            value=True,
            key="fp_replace",
            disabled=running,
            help="The application's choice, as an orchestrator that gives up on a stalled "
            "instance would: the frozen one becomes a zombie when it wakes.",
        )
        broker_faults = middle.checkbox(
            "Allow killing the partition leader",
            value=leader_refused is None,
            disabled=leader_refused is not None or running,
            key="fp_brokers",
            help="Every topic is then replicated on 3 nodes (min.insync.replicas=2), and free "
            "play has the cluster alone: other runs wait until it ends.",
        )
        restart_after = right.slider(
            "A killed broker restarts after (s)",
            *map(int, RESTART_BOUNDS),
            value=12,
            key="fp_restart",
            disabled=not broker_faults or running,
            help="After the controller has noticed the dead broker (6 s) and moved leadership.",
        )
        if leader_refused:
            st.caption(f"🔌 {leader_refused}")
        st.caption(
            "The application's choices: a killed processor is replaced at once (a supervisor "
            "restarting a crashed service); a replacement joins the consumer group as the same "
            "member (static membership) and reads from the last committed offset; the stream's "
            "producer is never restarted and never resends."
        )
    return FreePlaySettings(
        levels=tuple(levels),
        rate=float(rate),
        time_limit_s=float(limit),
        replace_frozen=replace_frozen,
        broker_faults=bool(broker_faults and leader_refused is None),
        restart_after_s=float(restart_after),
    )


def hold_for(settings: FreePlaySettings) -> AbstractContextManager[None]:
    """The cluster alone while a broker may be killed; shared with other runs otherwise."""
    if settings.broker_faults:
        return service.exclusive("free play may kill a broker")
    return service.shared()


def start(settings: FreePlaySettings) -> None:
    try:
        require_presenter("start free play")
        if cluster is None:
            raise LabError("The cluster is not ready yet; its progress shows in the sidebar.")
        new = FreePlay(cluster, settings, hold=lambda: hold_for(settings))
    except LabError as exc:
        show_error(exc)
        return
    proxy = Path(cluster.proxy.events_path) if cluster.proxy else None
    offset = proxy_start(proxy)
    # The watch follows the session's folder from its first line; it lives with the session.
    st.session_state[WATCH] = RunWatch(
        new.folder, list(settings.levels), proxy_events=proxy, proxy_offset=offset
    )
    st.session_state[SESSION] = new.start()
    room_feed().begin(
        Broadcast(
            run_id=new.run_id,
            title="Free play",
            levels=tuple(settings.levels),
            pipeline="stream",
            schedule="side-by-side",
            proxy_events=proxy,
            proxy_offset=offset,
        )
    )
    st.rerun()  # the page again, with the settings closed and the live panel open


settings = settings_form()
left, right = st.columns([1, 4])
if left.button("▶ Start free play", type="primary", disabled=running or cluster is None):
    start(settings)
if cluster is None:
    right.info("The cluster is not ready yet; its progress shows in the sidebar.")


def counts_table(snapshots: list[LevelSnapshot]) -> pd.DataFrame:
    """The levels side by side, one row per counter, read from the history so far: the same
    counters as the lanes (every viewer's too), COUNTERS["stream"]."""
    counters = COUNTERS["stream"]
    return pd.DataFrame(
        {s.level: [getattr(s, field) for field, _, _ in counters] for s in snapshots},
        index=[label for _, label, _ in counters],
    )


def strike_buttons(live: FreePlay) -> None:
    columns = st.columns(len(BUTTONS) + 1)
    for column, (label, kind, what) in zip(columns, BUTTONS, strict=False):
        refused = live.refused(kind)
        # "fp_strike_": a strike's own prefix. "fp_{kind}" made the restart button's key
        # "fp_restart", the restart-delay slider's, and the page failed on a duplicate key.
        key = f"fp_strike_{kind}"
        if column.button(label, key=key, disabled=refused is not None, help=what):
            try:
                require_presenter("strike a fault")
                live.strike(kind)
            except LabError as exc:
                show_error(exc)
    if columns[-1].button("⏹ Stop", key="fp_stop", disabled=live.phase != "running"):
        live.stop()
    if live.killed_node is not None and live.restart_due is not None:
        due = max(0.0, live.restart_due - time.time())
        st.caption(f"🔌 Node {live.killed_node} is down; it restarts by itself in {due:.0f} s.")
    elif not live.settings.broker_faults:
        why = broker_faults_refused(live.cluster)
        st.caption(f"🔌 {why or 'Killing the partition leader is off in these settings.'}")


LIVE_BLOCK = "fp_live"  # the live panel's block: .st-key-fp_live in the page
SCROLLED = "free_play_scrolled"  # run id -> when its live panel was first drawn
SCROLL_FOR_S = 3.0


def bring_live_panel_into_view(run_id: str) -> None:
    """Scroll the live panel to the top of the screen as the stream starts, so that its
    counts are on the first screen at any zoom (at 150% the screen is 720 px high, and the
    page's introduction and settings fill most of it). Only in the stream's first seconds,
    while the page settles: a teacher who scrolls away afterwards is not pulled back."""
    first = st.session_state.setdefault(SCROLLED, {}).setdefault(run_id, time.time())
    if time.time() - first < SCROLL_FOR_S:
        scroll_to_key(LIVE_BLOCK)


@st.fragment(run_every=REFRESH_S)
def live_panel() -> None:
    live: FreePlay | None = st.session_state.get(SESSION)
    watch: RunWatch | None = st.session_state.get(WATCH)
    if live is None or watch is None:
        return
    if not live.active:
        st.rerun(scope="app")  # the session ended: the whole page draws its results
    with st.container(key=LIVE_BLOCK):
        draw_live_panel(live, watch)
    bring_live_panel_into_view(live.run_id)


def draw_live_panel(live: FreePlay, watch: RunWatch) -> None:
    left, right = st.columns([3, 1])
    remaining = live.remaining_s()
    clock = (
        f" · {remaining:.0f} s left" if remaining is not None and live.phase == "running" else ""
    )
    left.markdown(f"#### {live.stage}{clock}")
    if not presenter_on():  # the run id is for engineers, not the projector
        right.caption(f"run `{live.run_id}`")
    strike_buttons(live)
    snapshots = watch.poll()
    # The counts and what the buttons did, side by side: both in the projector's first screen.
    table, notices = st.columns([3, 2])
    if snapshots:
        table.table(counts_table(snapshots))
        # Reads and sightings are events, not ids, so they may exceed what was sent.
        table.caption(
            "Reads and sightings count events, not ids: a batch read again after an abort or a "
            "restart counts again. Seen more than once: the copies beyond each id's first."
        )
    if live.notices:
        notices.markdown("\n".join(f"- {n.text}" for n in live.notices[-7:]))
    LiveView(st.container(), list(live.settings.levels), "stream").draw(snapshots, live.stage)


if session is not None and session.active:
    live_panel()
elif session is not None:
    if session.error is not None:
        show_error(
            session.error if isinstance(session.error, Exception) else LabError(str(session.error))
        )
    if session.notices:
        st.markdown("\n".join(f"- {n.text}" for n in session.notices))
    if session.output is not None:
        st.success(
            "Free play ended: every message judged, as in a scenario run."
            if presenter_on()  # the run id is for the engineer's screen, not the projector
            else f"Free play ended: run {session.run_id}, judged like a scenario run."
        )
        st.session_state["lab_run_id"] = session.run_id  # the Metrics page opens on it
        try:
            render_run(load_run(session.run_id))
        except LabError as exc:
            show_error(exc)
