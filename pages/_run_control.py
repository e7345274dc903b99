"""Running a scenario from a page: live progress, serialised broker faults, errors as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from engine.errors import LabError
from engine.runner import run_scenario
from engine.scenario import Scenario
from pages._shared import ClusterService, show_error

# Faults that reach beyond the run's own clients: brokers, and the proxy as a whole. A run
# with any of them has the cluster alone; other runs (drops aimed at their own client ids,
# crashes and pauses of their own processes, their own topics) share it.
BROKER_FAULTS = {"kill-leader", "pause-followers", "resume-nodes", "restart-nodes"}
PROXY_WIDE_FAULTS = {"blackhole", "latency", "reset-connections"}


def run_live(
    service: ClusterService,
    scenario: Scenario,
    levels: list[str],
    *,
    show: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """Run on the shared cluster with st.status and st.progress; None (and a message) on error.

    `show(run_id)` draws the run's results below the status. The status says "Done" only
    after that, in the same script run, so the room never sees "Done" over an empty page.
    """
    cluster = service.cluster
    status = None
    try:
        if cluster is None:
            raise LabError("The cluster is not ready yet; its progress shows in the sidebar.")
        if len(cluster.node_ids) < scenario.nodes:
            raise LabError(
                f"This scenario needs a {scenario.nodes}-node cluster; the running one has "
                f"{len(cluster.node_ids)}. Stop it in the sidebar and start one with "
                f"{scenario.nodes} nodes."
            )
        # Not `with st.status(...)`: leaving the block would mark it complete before the
        # results are drawn.
        status = st.status(f"Running {scenario.name}…", expanded=True)
        bar = status.progress(0.0)
        line = status.empty()

        def progress(what: str, fraction: float) -> None:
            bar.progress(min(1.0, fraction))
            line.write(what)

        kinds = {f.kind for f in scenario.faults}
        if service.usage.busy:
            line.write("Waiting for the cluster: " + service.latest_announcement())
        if kinds & (BROKER_FAULTS | PROXY_WIDE_FAULTS):
            # These faults hit every client on the cluster: one such run at a time, alone.
            what = "brokers" if kinds & BROKER_FAULTS else "the whole network"
            with service.exclusive(f"{scenario.name} is hurting {what}"):
                output = run_scenario(scenario, cluster, levels=levels, progress=progress)
        else:
            with service.shared():
                output = run_scenario(scenario, cluster, levels=levels, progress=progress)
        if show is not None:
            line.write("Drawing the results")
            show(output["run_id"])
        status.update(label=f"Done: run {output['run_id']}", state="complete")
        return output
    except Exception as exc:
        if status is not None:
            status.update(label=f"{scenario.name} did not finish", state="error")
        show_error(exc)
        return None
