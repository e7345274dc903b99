"""Lesson mode: a guided class. For each step the room predicts, the lab runs, then explains.

The type is large enough for a projector. The lesson itself is a file in lessons/, so a
teacher can reorder the steps or rewrite the questions without touching code.
"""

from __future__ import annotations

import streamlit as st

from engine.face import (
    FIRST_LESSON,
    Ballot,
    LabError,
    LessonProgress,
    ScenarioError,
    lesson_nodes,
    list_lessons,
    list_scenarios,
    load_lesson,
    load_run,
    load_scenario,
    save_vote,
    scenario_nodes,
)
from pages._follow import room_feed
from pages._roles import is_presenter, room_watches
from pages._run_control import run_live
from pages._run_view import render_run, scroll_to_selector
from pages._shared import (
    ClusterService,
    cluster_service,
    node_advice,
    require_app,
    show_error,
)
from pages._sources import render_sources
from pages._teacher import lesson_cluster
from pages._votes import (
    explain,
    presenter_tally,
    room_votes,
    runs_side_by_side,
    viewer_lesson,
    what_if_block,
)

require_app()


@st.fragment(run_every=1.0)
def restart_progress(service: ClusterService) -> None:
    """The restart's steps on the projected page (the sidebar may be hidden)."""
    if service.state != "starting":
        st.rerun(scope="app")  # the new cluster is up (or failed): draw the step for it
    with st.status("Restarting the cluster…", expanded=True):
        for line in service.steps:
            st.write(line)


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
    viewer_lesson()  # the presenter's step: its question and a vote, then its run
    st.stop()

lessons = list_lessons()
if not lessons:
    st.error("No lesson files were found in lessons/.")
    st.stop()
names = list(lessons)


def progress_of(name: str) -> LessonProgress:
    """The class's place in a lesson, outside every widget's key: Streamlit drops a widget's
    state when its page is left, and a teacher sent to Metrics must find the room's
    predictions and runs where they were."""
    kept: dict[str, LessonProgress] = st.session_state.setdefault("lesson_progress", {})
    return kept.setdefault(name, LessonProgress(lesson=name))


def lesson_chosen() -> None:
    # Another lesson starts at its first step; coming back to one keeps where it was.
    st.session_state["lesson_current"] = st.session_state["lesson_name"]


# The first class, the one every other builds on, unless the teacher picks another.
current = st.session_state.get("lesson_current")
if current not in names:
    current = FIRST_LESSON if FIRST_LESSON in names else names[0]
    st.session_state["lesson_current"] = current
lesson_name = st.selectbox(
    "Lesson", names, index=names.index(current), key="lesson_name", on_change=lesson_chosen
)
try:
    lesson = load_lesson(lessons[lesson_name])
except LabError as exc:
    show_error(exc)
    st.stop()

progress = progress_of(lesson_name)
progress.step = min(progress.step, len(lesson.steps) - 1)
index = progress.step
step = lesson.steps[index]
here = progress.at(index)
try:
    scenario = load_scenario(list_scenarios()[step.scenario])
    needed = lesson_nodes(lesson)
    largest = [s.scenario for s in lesson.steps if scenario_nodes(s.scenario) == needed]
except ScenarioError as exc:  # a broken scenario file: named in one line, never a traceback
    show_error(exc)
    st.stop()

st.title(lesson.title)
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
widget = f"lesson-{lesson_name}-{index}"

st.subheader("1 · Predict")
st.markdown(step.question)
texts = [o.text for o in step.options]
# The room votes on this step (engine.teach.vote): the ballot opens when the presenter shows it.
room, ballot = room_votes(), Ballot(lesson_name, index, step.question, tuple(texts))
room.show(ballot)
in_a_room = room_watches()
if here.locked and not room.step(ballot.key).locked:  # locked in an earlier ballot's time
    room.lock(ballot.key, here.vote)


def vote_changed() -> None:
    here.vote = st.session_state[f"{widget}-vote"]


st.radio(
    "The room's prediction" + (" (or leave it to the vote)" if in_a_room else ""),
    texts,
    index=texts.index(here.vote) if here.vote in texts else None,
    key=f"{widget}-vote",
    on_change=vote_changed,
    disabled=here.locked,
    horizontal=True,
)
if in_a_room and not here.locked:
    presenter_tally(ballot.key)
if not here.locked and st.button(
    "Lock the vote" if in_a_room else "Lock in the prediction",
    disabled=here.vote is None and not in_a_room,
    help="Closes the vote. The room's prediction is the one picked above, or else the "
    "option most viewers voted for."
    if in_a_room
    else None,
):
    prediction = here.vote or room.tally(ballot.key).leader()
    if prediction is None:
        st.warning(
            "No prediction to lock: pick the room's prediction above (the vote has no "
            "single leader)."
        )
    else:
        here.vote, here.locked = prediction, True
        room.lock(ballot.key, prediction)
        st.rerun()

if here.locked:
    st.subheader("2 · Run it, for real")
    # The story tells the outcome: it waits for the explanation, after the run.
    service = cluster_service()
    if not here.runs and not cluster_fits(service, scenario.nodes):
        st.stop()  # the step says what it needs and offers the restart; Run comes after it
    again = bool(here.plain_runs)
    label = "▶ Run this step again" if again else "▶ Run the scenario"
    run_column, what_if_column = st.columns(2)
    if (not again or cluster_fits(service, scenario.nodes)) and run_column.button(
        label,
        type="secondary" if again else "primary",
        help="Runs the scenario once more; the new run's verdict replaces this one's, and "
        "every run of the step is shown side by side below it."
        if again
        else None,
    ):
        output = run_live(
            service,
            scenario,
            scenario.levels,
            started=lambda run_id: room.ran(ballot.key, run_id),
            caller_draws_result=True,
        )
        if output is not None:
            here.runs.append(output["run_id"])
            if in_a_room:
                save_vote(output["run_id"], room.step(ballot.key))
            st.session_state[f"{widget}-scroll"] = True  # once, right after the run
            st.rerun()
    what_if = step.what_if
    if (
        what_if is not None
        and again
        and what_if_column.button(
            f"🔀 What if {what_if.label}?",
            help="Runs the step that way, beside the room's run, with its own explanation. "
            "The room's vote stays with the room's run.",
        )
    ):
        output = run_live(
            service,
            step.what_if_scenario(),
            scenario.levels,
            started=lambda run_id: room.ran(ballot.key, run_id, what_if.label),
            caller_draws_result=True,
        )
        if output is not None:
            here.runs.append(output["run_id"])
            here.what_ifs[output["run_id"]] = what_if.label
            st.rerun()

if here.plain_runs:
    try:
        run = load_run(here.plain_runs[-1])
    except LabError as exc:
        show_error(exc)
        st.stop()
    results = run.results
    st.subheader("3 · Explain", anchor="explain")
    if st.session_state.pop(f"{widget}-scroll", False):
        scroll_to_selector("#explain")
    explain(step, here.vote, results, room.step(ballot.key) if in_a_room else None)
    runs_side_by_side(step, here.runs, here.what_ifs)
    what_if_block(step, here.runs, here.what_ifs)
    with st.expander("The scenario's story"):
        st.markdown(scenario.story)
        render_sources(scenario.sources)
    # A lesson is always in front of a room: the verdict cards (the projector view's) come first.
    render_run(run, presenter=True)
    # Drawn on this screen: the viewers' pages draw it now (pages._follow, AFTER_PRESENTER_S),
    # not at the same moment as this page, whose verdict is what the room waits for.
    room_feed().presenter_drew(here.runs[-1])

left, right = st.columns(2)
if left.button("← Previous step", disabled=index == 0):
    progress.step = index - 1
    st.rerun()
if right.button("Next step →", disabled=index == len(lesson.steps) - 1):
    progress.step = index + 1
    st.rerun()
