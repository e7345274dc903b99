"""Failure lab: pick a scenario and the levels, run it live, compare the levels side by side."""

from __future__ import annotations

import streamlit as st

from engine.face import (
    LEVELS,
    LabError,
    ScenarioError,
    describe_seconds,
    group_of,
    grouped_scenario_names,
    list_scenarios,
    load_run,
    load_scenario,
    nodes_text,
    recorded_seconds,
    scenario_label,
)
from pages._client_choice import choose_client
from pages._follow import follow_panel
from pages._presenter import presenter_on
from pages._roles import is_presenter
from pages._run_control import run_live
from pages._run_view import render_run
from pages._shared import ClusterService, cluster_service, node_advice, require_app, show_error
from pages._sources import render_sources

require_app()


@st.fragment(run_every=1.0)
def restart_progress(service: ClusterService) -> None:
    """The restart's steps where the presenter looks (the sidebar may be hidden)."""
    if service.state != "starting":
        st.rerun(scope="app")  # the new cluster is up (or failed): draw the page for it
    with st.status("Restarting the cluster, then running the scenario…", expanded=True):
        for step in service.steps:
            st.write(step)


st.title("Failure lab")
viewer = not is_presenter()
if viewer and follow_panel("lab"):
    st.stop()  # following: the presenter's run, live, then its result
scenarios = list_scenarios()
if not scenarios:
    st.error("No scenario files were found in scenarios/.")
    st.stop()

# Grouped by what they teach, each with the cluster it needs and how long a run takes.
names = grouped_scenario_names()
picker, level_picker = st.columns([1, 2])
# The lost ack is the first lesson: the simplest failure, and it splits the three levels.
name = picker.selectbox(
    "Scenario",
    names,
    index=names.index("ack-loss") if "ack-loss" in names else 0,
    key="lab_scenario",
    format_func=scenario_label,
    help="Grouped by what each scenario teaches. A run's length is that of the scenario's "
    "recorded real run (tests/data/recorded/, one run each); docs/scenarios.md has every "
    "scenario's story.",
)
try:
    scenario = load_scenario(scenarios[name])
except ScenarioError as exc:
    show_error(exc)
    st.stop()

levels = level_picker.multiselect(
    "Levels",
    list(LEVELS),
    default=scenario.levels,
    key=f"lab_levels_{name}",
)
with_chosen_client = choose_client(scenario, levels, key=f"lab_client_{name}")
if with_chosen_client is None:
    st.stop()
scenario = with_chosen_client
st.subheader(scenario.title)
group = group_of(name)
seconds = recorded_seconds(name)
st.caption(
    (f"**{group.title}.** {group.lesson} " if group else "")
    + f"Needs a cluster of {nodes_text(scenario.nodes)}; "
    + (f"its recorded run took {describe_seconds(seconds)}." if seconds else "no recorded run yet.")
)
# In the projector view the results need the screen: once this scenario runs or has a
# result, its story folds away (one click opens it). "lab_run" is the Run button, pressed in
# this rerun.
if presenter_on():
    ran = name in st.session_state.get("lab_runs", {}) or st.session_state.get("lab_run")
    with st.expander("The story", expanded=not ran):
        st.markdown(scenario.story)
        render_sources(scenario.sources)
else:
    st.markdown(scenario.story)
    render_sources(scenario.sources)
workload = scenario.workload
run_slot, parameters = st.columns([1, 9], vertical_alignment="top")
with parameters.expander("Parameters"):
    left, right = st.columns(2)
    messages = left.number_input("Messages", 1, 10_000, workload.messages)
    changes: dict[str, int | float] = {"messages": int(messages)}
    if scenario.runs_kafka_streams:
        # Kafka Streams commits on its own timer, and the lab's application reads one partition.
        right.caption(
            "Kafka Streams commits every commit.interval.ms (30 s at at_least_once, 100 ms at "
            "exactly_once_v2), not every N messages; its counts need one input partition."
        )
    else:
        changes["commit_every"] = int(
            right.number_input("Messages per commit or transaction", 1, 1000, workload.commit_every)
        )
    if scenario.pipeline == "processor" and not scenario.runs_kafka_streams:
        changes["partitions"] = int(
            left.number_input("Partitions", 1, 12, workload.partitions, key=f"lab_parts_{name}")
        )
    if scenario.pipeline == "processor":
        changes["processing_ms"] = float(
            right.number_input(
                "Processing time per message (ms)",
                0,
                1000,
                int(workload.processing_ms),
                key=f"lab_work_{name}",
            )
        )
    st.caption("The fault schedule:")
    st.json([f.model_dump(exclude_defaults=True) for f in scenario.faults], expanded=False)
scenario = scenario.model_copy(update={"workload": workload.model_copy(update=changes)})
# Settings with which the fault cannot happen are refused before the run, with the reason.
cannot_teach = scenario.cannot_teach()
if cannot_teach:
    st.warning(cannot_teach, icon="🚫")

service = cluster_service()
ready = service.state == "ready" and service.cluster is not None
too_small = None
# Set by the restart button below: run this scenario as soon as the new cluster is up.
autorun = st.session_state.get("lab_autorun") == name
if autorun and service.state == "starting":
    restart_progress(service)
elif autorun and service.state == "failed":
    st.session_state.pop("lab_autorun", None)
    st.error(service.error or "The cluster could not start.", icon="⚠️")
elif not ready:
    st.info("The cluster is not ready yet; its progress shows in the sidebar.")
elif service.cluster is not None:
    # Said before Run is pressed, with the one action that fixes it when the dashboard may.
    too_small = node_advice(
        scenario.nodes,
        len(service.cluster.node_ids),
        owned=service.owned,
        backend=service.cluster.backend,
    )
    if too_small is not None:
        st.info(too_small.text, icon="🧩")
        if (
            too_small.restart_nodes
            and not viewer
            and st.button(
                f"Restart the cluster with {too_small.restart_nodes} nodes and run",
                key="lab_restart",
                type="primary",
                help="Stops the dashboard's cluster (recorded runs keep their saved records), "
                "starts one with more nodes, then runs this scenario.",
            )
        ):
            try:
                service.restart(nodes=too_small.restart_nodes)
            except LabError as exc:
                show_error(exc)
            else:
                st.session_state["lab_autorun"] = name
                st.rerun()


def show_run(run_id: str) -> None:
    st.session_state["lab_runs"] = {**st.session_state.get("lab_runs", {}), name: run_id}
    st.session_state["lab_run_id"] = run_id  # the Metrics page opens on it
    try:
        render_run(load_run(run_id))
    except LabError as exc:
        show_error(exc)


# Each scenario keeps its own latest run, so a result never shows under another's heading.
runnable = ready and bool(levels) and not cannot_teach and too_small is None
# A viewer has no Run: the presenter runs, the room follows (run_live refuses viewers too).
pressed = not viewer and run_slot.button(
    "▶ Run", type="primary", disabled=not runnable, key="lab_run"
)
if pressed or (autorun and runnable):
    st.session_state.pop("lab_autorun", None)
    run_live(service, scenario, levels, show=show_run)
elif run_id := st.session_state.get("lab_runs", {}).get(name):
    show_run(run_id)
