"""Running a scenario from a page: live progress, serialised broker faults, errors as text."""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.errors import LabError
from engine.runner import run_scenario
from engine.scenario import Scenario
from pages._shared import ClusterService, show_error

BROKER_FAULTS = {"kill-leader", "pause-followers", "resume-nodes", "restart-nodes"}


def run_live(
    service: ClusterService, scenario: Scenario, levels: list[str]
) -> dict[str, Any] | None:
    """Run on the shared cluster with st.status and st.progress; None (and a message) on error."""
    cluster = service.cluster
    try:
        if cluster is None:
            raise LabError("The cluster is not ready yet; its progress shows in the sidebar.")
        if len(cluster.node_ids) < scenario.nodes:
            raise LabError(
                f"This scenario needs a {scenario.nodes}-node cluster; the running one has "
                f"{len(cluster.node_ids)}. Stop it in the sidebar and start one with "
                f"{scenario.nodes} nodes."
            )
        with st.status(f"Running {scenario.name}…", expanded=True) as status:
            bar = st.progress(0.0)
            line = st.empty()

            def progress(what: str, fraction: float) -> None:
                bar.progress(min(1.0, fraction))
                line.write(what)

            if BROKER_FAULTS & {f.kind for f in scenario.faults}:
                # Killing brokers affects everyone: one such run at a time, announced to all.
                with service.exclusive(f"{scenario.name} is killing and pausing brokers"):
                    output = run_scenario(scenario, cluster, levels=levels, progress=progress)
            else:
                output = run_scenario(scenario, cluster, levels=levels, progress=progress)
            status.update(label=f"Done: run {output['run_id']}", state="complete")
        return output
    except Exception as exc:
        show_error(exc)
        return None
