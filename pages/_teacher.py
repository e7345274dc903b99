"""A lesson's cluster, said before the class: how many nodes it needs, and the one button that
starts (or restarts) the dashboard's cluster with them, so that no step restarts it mid-class.
"""

from __future__ import annotations

import streamlit as st

from engine.face import (
    LabError,
    nodes_text,
)
from pages._roles import is_presenter
from pages._shared import ClusterService, node_advice, show_error


def lesson_cluster(
    service: ClusterService, nodes: int, *, key: str, quiet_when_ready: bool = False
) -> bool:
    """True when the running cluster has the `nodes` a lesson needs; otherwise say so and offer
    the presenter the start or restart that gives them (a viewer is only told)."""
    cluster = service.cluster
    if service.state == "starting":
        st.info("A cluster is starting; its progress shows in the sidebar.", icon="⏳")
        return False
    if service.state == "ready" and cluster is not None:
        have = len(cluster.node_ids)
        advice = node_advice(nodes, have, owned=service.owned, backend=cluster.backend)
        if advice is None:
            if not quiet_when_ready:
                st.success(f"The running cluster has {nodes_text(have)}: every step runs on it.")
            return True
        said = f"This lesson needs {nodes_text(nodes)}; the running cluster has {have}."
        if advice.restart_nodes is None:  # not the dashboard's cluster: how to change it
            st.info(f"{said} {advice.text.split('. ', 1)[-1]}", icon="🧩")
            return False
        st.info(f"{said} Restart it now, before the class, so that no step waits for it.")
        restart, label = True, f"Restart the cluster with {nodes} nodes"
    else:
        st.info(f"This lesson needs a cluster of {nodes_text(nodes)}.")
        restart, label = False, f"Start a {nodes}-node cluster"
    if is_presenter() and st.button(label, key=key, type="primary"):
        try:
            if restart:
                service.restart(nodes=nodes)
            else:
                service.ensure_started(nodes=nodes)
        except LabError as exc:
            show_error(exc)
        else:
            st.rerun()
    return False
