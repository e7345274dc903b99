"""The sidebar's cluster panel: which backend, which nodes are up, and controls to hurt them."""

from __future__ import annotations

import time
from collections import Counter

import streamlit as st

from engine.face import (
    AUTOSTART,
    BACKEND,
    NODES,
    LabError,
    default_nodes,
)
from pages._roles import is_presenter
from pages._shared import ClusterService, cluster_service, show_error

STATE_ICONS = {"running": "🟢", "paused": "🟡", "down": "🔴"}
SEEN_STATE = "_lab_cluster_state_seen"
# How often a viewer's sidebar asks again (the presenter's: every 2 s).
VIEWER_REFRESH_S = 6.0


def render_cluster_panel() -> None:
    service = cluster_service()
    if AUTOSTART.flag():
        # Once per server process: a cluster stopped in the sidebar stays stopped. The
        # dashboard container of docker-compose.yml sets LAB_BACKEND=docker.
        backend = str(BACKEND.get())
        nodes = int(NODES.get() or default_nodes(backend))
        service.autostart(backend=backend, nodes=nodes)
    # The state this page was drawn with; the sidebar's own reruns compare against it.
    st.session_state[SEEN_STATE] = service.state
    with st.sidebar:
        st.subheader("Cluster")
        # A viewer's sidebar is redrawn less often: each redraw costs the dashboard's one
        # process CPU, and a room of viewers redrawing every 2 s was the second-largest
        # cost of 60 viewers (a py-spy profile, docs/serving-a-room.md); the status itself
        # is asked of the brokers once for everyone (ClusterService.status).
        (_status_for_presenter if is_presenter() else _status_for_viewer)(service)


def _status(service: ClusterService) -> None:
    # When a start ends between two of the sidebar's own reruns, the whole page is drawn
    # again, so its Run buttons follow the cluster.
    seen, st.session_state[SEEN_STATE] = st.session_state.get(SEEN_STATE), service.state
    if seen == "starting" and service.state != "starting":
        st.rerun(scope="app")
    if service.state == "starting":
        what = "embedded" if service.starting_backend == "local" else service.starting_backend
        with st.status(f"Starting the {what} Kafka cluster…", expanded=True):
            for step in service.steps:
                st.write(step)
        return
    if service.state == "failed":
        st.error(service.error or "The cluster could not start.", icon="⚠️")
        if is_presenter() and st.button("Try again"):
            service.state = "idle"
            st.rerun()
        return
    if service.state == "idle" or service.cluster is None:
        _start_controls(service)
        return

    cluster = service.cluster
    try:
        status = service.status()
    except Exception as exc:
        show_error(exc)
        return
    st.caption(
        f"**{status.backend}** backend · Kafka {status.kafka_version} · "
        + ("reachable" if status.reachable else "**not reachable**")
    )
    leaders = status.partition_leaders  # from the status's own metadata request
    led = Counter(leader for parts in (leaders or {}).values() for leader in parts.values())
    for node in status.nodes:
        controller = " · controller" if node.node_id == status.controller_id else ""
        leads = f" · leads {led[node.node_id]}" if leaders is not None else ""
        st.markdown(
            f"{STATE_ICONS.get(str(node.state), '⚪')} node {node.node_id}: "
            f"{node.state}{controller}{leads}"
        )
    if led[-1]:
        st.warning(f"{led[-1]} partition(s) have no leader right now.", icon="⚠️")
    if leaders:
        with st.expander("Partition leaders"):
            st.caption("The newest topics first (run topics carry the run's time in their name).")
            newest = sorted((t for t in leaders if not t.startswith("__")), reverse=True)[:8]
            shown = newest + sorted(t for t in leaders if t.startswith("__"))
            st.markdown(
                "\n".join(
                    f"- `{topic}`: "
                    + ", ".join(
                        f"p{p} → {'none' if n < 0 else f'node {n}'}"
                        for p, n in sorted(leaders[topic].items())
                    )
                    for topic in shown
                )
            )
    with st.popover("Addresses"):
        st.code(
            f"clients (through the fault proxy): {status.proxied_bootstrap}\n"
            f"direct (admin, checkers, kcat):    {status.direct_bootstrap}"
        )

    if not is_presenter():  # a viewer watches the cluster; the presenter acts on it
        _announcements(service)
        return
    if cluster.supports_broker_faults:
        node_id = st.selectbox("Node", cluster.node_ids, key="fault_node")
        actions = ("kill", "pause", "resume", "restart")
        for row in (actions[:2], actions[2:]):
            for col, action in zip(st.columns(2), row, strict=True):
                if col.button(action, key=f"node_{action}", width="stretch"):
                    try:
                        with st.spinner(f"{action} node {node_id}…"):
                            service.node_action(action, node_id)
                    except Exception as exc:
                        show_error(exc)
    if st.button("Stop cluster", type="secondary"):
        try:
            service.stop()
        except LabError as exc:
            show_error(exc)
        else:
            st.rerun()
    _announcements(service)


def _announcements(service: ClusterService) -> None:
    recent = [a for a in service.announcements if time.time() - a.at < 30]
    for note in recent[-3:]:
        st.info(f"{time.strftime('%H:%M:%S', time.localtime(note.at))} · {note.text}")


_status_for_presenter = st.fragment(run_every=2.0)(_status)
_status_for_viewer = st.fragment(run_every=VIEWER_REFRESH_S)(_status)


def _start_controls(service: ClusterService) -> None:
    st.write("No cluster is running.")
    if not is_presenter():
        st.caption("The presenter starts one.")
        return
    backend = st.radio(
        "Backend",
        ["local", "docker", "external"],
        horizontal=True,
        help="local: Kafka JVMs on this machine (default). docker: the "
        "docker-compose cluster. external: any cluster you name.",
    )
    nodes = st.radio("Nodes", [1, 3], horizontal=True) if backend == "local" else 3
    bootstrap = (
        st.text_input("Bootstrap servers", "localhost:9092") if backend == "external" else None
    )
    if st.button("Start", type="primary"):
        try:
            service.ensure_started(backend=backend, nodes=nodes, bootstrap=bootstrap)
        except LabError as exc:
            show_error(exc)
        else:
            st.rerun()
