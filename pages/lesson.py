"""Lesson mode: a guided class. For each step the room predicts, the lab runs, then explains.

The type is large enough for a projector. The lesson itself is a file in lessons/, so a
teacher can reorder the steps or rewrite the questions without touching code.
"""

from __future__ import annotations

import streamlit as st
import streamlit.components.v1 as components

from engine import record
from engine.errors import LabError
from engine.lesson import list_lessons, load_lesson
from engine.scenario import list_scenarios, load_scenario
from engine.teaching import FIRST_LESSON, lesson_nodes, scenario_nodes
from pages._follow import follow_panel
from pages._roles import is_presenter
from pages._run_control import run_live
from pages._run_view import render_run
from pages._shared import (
    ClusterService,
    cluster_service,
    node_advice,
    require_app,
    show_error,
)
from pages._sources import render_sources
from pages._teacher import lesson_cluster

require_app()


@st.fragment(run_every=1.0)
def restart_progress(service: ClusterService) -> None:
    """The restart's steps on the projected page (the sidebar may be hidden)."""
    if service.state != "starting":
        st.rerun(scope="app")  # the new cluster is up (or failed): draw the step for it
    with st.status("Restarting the cluster…", expanded=True):
        for line in service.steps:
            st.write(line)


def scroll_to(anchor: str) -> None:
    """Bring a heading to the top of the screen: the run's verdict, the count its explanation
    cites and the explanation sit under "3 · Explain", a screen below the prediction.

    Streamlit has no scrolling call; a zero-height component's script (same origin) scrolls
    its parent page, trying for a moment until the heading is drawn.
    """
    components.html(
        "<script>let tries = 0; const go = () => {"
        f"const el = window.parent.document.getElementById('{anchor}');"
        "if (el) { el.scrollIntoView({block: 'start'}); }"
        "else if (tries++ < 40) { setTimeout(go, 50); } }; go();</script>",
        height=0,
    )


def cluster_fits(service: ClusterService, nodes: int) -> bool:
    """Whether the step can run now; if not, say why and offer the restart where it may."""
    if service.state == "starting":
        restart_progress(service)
        return False
    if service.state != "ready" or service.cluster is None:
        st.info("The cluster is not ready yet; its progress shows in the sidebar.")
        return False
    advice = node_advice(
        nodes,
        len(service.cluster.node_ids),
        owned=service.owned,
        backend=service.cluster.backend,
    )
    if advice is None:
        return True
    st.info(advice.text, icon="🧩")
    if (
        advice.restart_nodes
        and is_presenter()
        and st.button(
            f"Restart the cluster with {advice.restart_nodes} nodes",
            key="lesson_restart",
            type="primary",
            help="Stops the dashboard's cluster (recorded runs keep their saved records) and "
            "starts one with more nodes; then run the step.",
        )
    ):
        try:
            service.restart(nodes=advice.restart_nodes)
        except LabError as exc:
            show_error(exc)
        else:
            st.rerun()
    return False


# Projector-sized type for this page only.
# The metric values hold a <p> too: their rule is more specific, so the enlarged text rule
# cannot shrink the key numbers to the size of their labels.
st.markdown(
    "<style>.stMainBlockContainer p, .stMainBlockContainer li, .stMainBlockContainer label "
    "{font-size: 1.35rem !important; line-height: 1.5;} "
    ".stMainBlockContainer [data-testid='stMetricValue'], "
    ".stMainBlockContainer [data-testid='stMetricValue'] p "
    "{font-size: 3rem !important; line-height: 1.2;}</style>",
    unsafe_allow_html=True,
)

if not is_presenter():
    st.title("Lesson")
    st.markdown("The presenter leads the lesson; its runs show here as they happen.")
    follow_panel("lesson")
    st.stop()

lessons = list_lessons()
if not lessons:
    st.error("No lesson files were found in lessons/.")
    st.stop()
# The first class, the one every other builds on, unless the teacher picks another.
names = list(lessons)
lesson_name = st.selectbox(
    "Lesson",
    names,
    index=names.index(FIRST_LESSON) if FIRST_LESSON in names else 0,
    key="lesson_name",
)
try:
    lesson = load_lesson(lessons[lesson_name])
except LabError as exc:
    show_error(exc)
    st.stop()

index = st.session_state.setdefault("lesson_step", 0)
index = min(index, len(lesson.steps) - 1)
step = lesson.steps[index]
scenario = load_scenario(list_scenarios()[step.scenario])

st.title(lesson.title)
needed = lesson_nodes(lesson)
largest = [s.scenario for s in lesson.steps if scenario_nodes(s.scenario) == needed]
st.caption(
    f"{len(lesson.steps)} steps · {lesson.minutes} min · a {needed}-node cluster"
    + ("" if needed == 1 else f" (for {', '.join(largest)})")
)
# Said up front, with the start or restart that gives the lesson its nodes before the class;
# a step that needs more than the running cluster has says so itself, at Run.
if scenario.nodes < needed:
    lesson_cluster(cluster_service(), needed, key="lesson_cluster", quiet_when_ready=True)
st.progress(
    (index + 1) / len(lesson.steps),
    text=f"Step {index + 1} of {len(lesson.steps)} · "
    f"about {step.minutes} min · {lesson.minutes} min in all",
)
st.header(scenario.title)

state_key = f"lesson-{lesson_name}-{index}"
phase = st.session_state.setdefault(f"{state_key}-phase", "predict")

st.subheader("1 · Predict")
st.markdown(step.question)
prediction = st.radio(
    "The room's prediction",
    step.options,
    index=None,
    key=f"{state_key}-vote",
    disabled=phase != "predict",
    horizontal=True,
)
if phase == "predict" and st.button("Lock in the prediction", disabled=prediction is None):
    st.session_state[f"{state_key}-phase"] = "run"
    st.rerun()

if phase in ("run", "explain"):
    st.subheader("2 · Run it, for real")
    # The story tells the outcome: it waits for the explanation, after the run.
    service = cluster_service()
    if phase == "run" and not cluster_fits(service, scenario.nodes):
        st.stop()  # the step says what it needs and offers the restart; Run comes after it
    if phase == "run" and st.button("▶ Run the scenario", type="primary"):
        output = run_live(service, scenario, scenario.levels)
        if output is not None:
            st.session_state[f"{state_key}-run"] = output["run_id"]
            st.session_state[f"{state_key}-phase"] = "explain"
            st.session_state[f"{state_key}-scroll"] = True  # once, right after the run
            st.rerun()

if phase == "explain":
    run_id = st.session_state[f"{state_key}-run"]
    try:
        run = record.load_run(run_id)
    except LabError as exc:
        show_error(exc)
        st.stop()
    st.subheader("3 · Explain", anchor="explain")
    if st.session_state.pop(f"{state_key}-scroll", False):
        scroll_to("explain")
    confirmed = step.check.holds(run["result"]["results"])
    guessed = st.session_state.get(f"{state_key}-vote")
    verdict = (
        "✅ The room was right."
        if guessed == step.answer
        else (f"❌ The room said “{guessed}”; the answer is “{step.answer}”.")
    )
    st.markdown(f"**{verdict}**")
    # The count the answer rests on, on the same screen as the explanation that cites it.
    level_result = run["result"]["results"].get(step.check.level, {})
    if step.check.field in level_result:
        st.metric(
            f"{step.check.field.replace('_', ' ').capitalize()} at {step.check.level}",
            level_result[step.check.field],
            help=f"The answer is confirmed when {step.check.describe()}.",
        )
    if confirmed is False:
        st.warning(
            f"This run did not show the usual outcome ({step.check.describe()}). Timing on a "
            "busy machine can do that; "
            "the counts below are what Kafka really holds. Run the step again to compare."
        )
    st.markdown(step.explain)
    render_sources(step.sources)
    with st.expander("The scenario's story"):
        st.markdown(scenario.story)
        render_sources(scenario.sources)
    # A lesson is always in front of a room: the verdict cards (the projector view's) come first.
    render_run(run, presenter=True)

left, right = st.columns(2)
if left.button("← Previous step", disabled=index == 0):
    st.session_state["lesson_step"] = index - 1
    st.rerun()
if right.button("Next step →", disabled=index == len(lesson.steps) - 1):
    st.session_state["lesson_step"] = index + 1
    st.rerun()
