"""The room's vote on the Lesson page: the presenter's live tally, and a viewer's whole page.

The vote lives in one RoomVotes for the dashboard (engine.teach.vote), kept where no browser
message can clear it. A viewer votes with a radio whose callback casts the vote under the
session's own id, read on the server: a browser can name an option, never another voter, and
an option the ballot lacks is refused. Nothing of the step's outcome reaches a viewer's page
before the presenter locks the vote: until then the page draws the question and the options
only, not the room's feed (which may hold an earlier run of the same scenario).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.face import (
    Condition,
    LabError,
    Lesson,
    RoomVotes,
    ScenarioError,
    Step,
    StepVote,
    Tally,
    VoteError,
    count_of,
    judge_prediction,
    list_lessons,
    list_scenarios,
    load_lesson,
    load_result,
    load_scenario,
    votes_text,
)
from pages._follow import ended, ended_run, room_feed, watch_run
from pages._keep import kept
from pages._roles import session_id
from pages._run_view import render_run
from pages._shared import show_error
from pages._sources import render_sources

TALLY_EVERY_S = 0.5  # the presenter's tally is redrawn this often while the vote is open
VIEWER_POLL_S = 1.0  # a viewer's page notices the presenter's next move this often


@kept
def room_votes() -> RoomVotes:
    return RoomVotes()


@st.cache_resource(max_entries=8)
def _lesson_file(path: str, mtime_ns: int) -> Lesson:
    return load_lesson(path)


def lesson_named(name: str) -> Lesson:
    """A lesson file, parsed once for the room for each version of it."""
    path = list_lessons().get(name)
    if path is None:
        raise LabError(f"The lesson {name!r} is no longer in lessons/.")
    return _lesson_file(str(path), Path(path).stat().st_mtime_ns)


def tally_bars(tally: Tally, *, marked: str | None = None) -> None:
    """Each option with its count and a bar, in projector type; `marked` gets a ✔."""
    widest = max(tally.counts) or 1
    for option, count in zip(tally.options, tally.counts, strict=True):
        mark = " ✔" if option == marked else ""
        st.progress(count / widest, text=f"**{count}** · {option}{mark}")


@st.fragment(run_every=TALLY_EVERY_S)
def presenter_tally(key: tuple[str, int]) -> None:
    """The live tally on the presenter's screen (and the projector): how many, never who."""
    tally = room_votes().tally(key)
    if tally is None:
        return
    st.markdown(f"**The room's vote: {votes_text(tally.total)}**")
    if tally.total:
        tally_bars(tally)
    else:
        st.caption("Viewers vote on their laptops; the count shows here as they do.")


def tally_after_run(vote: StepVote, step: Step, results: dict) -> None:
    """The locked tally against what the run showed, under the verdict."""
    tally = vote.tally()
    shown = step.outcome(results)
    st.markdown(tally.against(shown.text if shown else None))
    if tally.total:
        tally_bars(tally, marked=shown.text if shown else None)


@st.fragment(run_every=VIEWER_POLL_S)
def _watch_stage(version: int) -> None:
    """Draws the viewer's whole page again when the presenter moves on (a step, a lock, a
    run); a vote alone does not change what the page shows."""
    if room_votes().current()[0] != version:
        st.rerun(scope="app")


def _cast(key: tuple[str, int], widget: str) -> None:
    try:
        room_votes().cast(key, session_id(), st.session_state[widget])
    except VoteError as exc:
        st.session_state["vote_refused"] = str(exc)


def viewer_lesson() -> None:
    """A viewer's Lesson page: the question and a vote; after the lock, the run and its
    explanation; never the outcome before the lock."""
    version, vote = room_votes().current()
    _watch_stage(version)
    if vote is None:
        st.title("Lesson")
        st.info("The presenter has not opened a lesson step yet; its question shows here.")
        return
    ballot = vote.ballot
    try:
        lesson = lesson_named(ballot.lesson)
        step = lesson.steps[ballot.step]
        scenario = load_scenario(list_scenarios()[step.scenario])
    except (LabError, ScenarioError, IndexError, KeyError) as exc:
        show_error(exc if isinstance(exc, LabError) else LabError(f"The step is gone ({exc})."))
        return
    st.title(lesson.title)
    st.caption(f"Step {ballot.step + 1} of {len(lesson.steps)}")
    st.header(scenario.title)
    st.subheader("1 · Predict")
    st.markdown(ballot.question)
    widget = f"viewer-vote-{ballot.lesson}-{ballot.step}"
    mine = vote.vote_of(session_id())
    if not vote.locked:
        st.radio(
            "Your vote",
            ballot.options,
            index=ballot.options.index(mine) if mine in ballot.options else None,
            key=widget,
            on_change=_cast,
            args=(ballot.key, widget),
            horizontal=True,
        )
        if refused := st.session_state.pop("vote_refused", None):
            st.warning(refused)
        st.caption(
            "Your vote counts in the tally on the presenter's screen (how many, never who); "
            "you can change it until the presenter locks the vote."
        )
        return
    tally = vote.tally()
    st.markdown(
        f"The vote is locked: {votes_text(tally.total)}. "
        + (f"Yours: “{mine}”." if mine else "You did not vote.")
        + (f" The room's prediction: “{vote.prediction}”." if vote.prediction else "")
    )
    st.subheader("2 · Run it, for real")
    if not vote.runs:
        st.info("The presenter runs the step next; it shows here as it happens.")
        return
    latest = vote.runs[-1]
    if not _drawable(latest):  # the latest run is going on: its lanes, live
        if latest in vote.what_ifs:
            st.markdown(f"#### What if {vote.what_ifs[latest]}? Running now")
        _follow_live(latest)
        if latest not in vote.what_ifs or not vote.plain_runs:
            return
    main = vote.plain_runs[-1] if vote.plain_runs else None
    if main is None or not _drawable(main):
        return
    try:
        run = ended_run(main)
    except LabError as exc:
        show_error(exc)
        return
    st.subheader("3 · Explain")
    explain(step, vote.prediction, run.results, vote)
    drawable = [r for r in vote.runs if _drawable(r)]
    runs_side_by_side(step, drawable, vote.what_ifs)
    what_if_block(step, drawable, vote.what_ifs)
    with st.expander("The scenario's story"):
        st.markdown(scenario.story)
        render_sources(scenario.sources)
    render_run(run, presenter=True)


def _drawable(run_id: str) -> bool:
    """Whether a viewer draws the run's result now: it has ended and, while the room's feed
    holds it, the feed says the result is ready (after the presenter's page has drawn it)."""
    if not ended(run_id):
        return False
    _, broadcast = room_feed().snapshot()
    if broadcast is not None and broadcast.run_id == run_id:
        return room_feed().result_ready(broadcast)
    return True


def _follow_live(run_id: str) -> None:
    feed_version, broadcast = room_feed().snapshot()
    if broadcast is not None and broadcast.run_id == run_id:
        watch_run(feed_version, broadcast)
    else:
        st.info("The run is starting.")


def explain(step: Step, prediction: str | None, results: dict, vote: StepVote | None) -> None:
    """The verdict, the room's tally against it, the counts it rests on and the explanation:
    the same on the presenter's screen and on every viewer's."""
    verdict = judge_prediction(step, prediction, results)
    st.markdown(f"**{verdict.headline()}**")
    if vote is not None:
        tally_after_run(vote, step, results)
    # The counts the verdict rests on, on the same screen as the explanation that cites them.
    shown = (verdict.shown or verdict.expected).when
    for column, condition in zip(st.columns(len(shown)), shown, strict=True):
        value = count_of(results.get(condition.level, {}), condition.field)
        column.metric(
            condition.label(),
            "n/a" if value is None else value,
            help=f"“{(verdict.shown or verdict.expected).text}” holds when "
            f"{(verdict.shown or verdict.expected).describe()}.",
        )
    broken = step.contradicted(results)
    if not broken:
        st.markdown(step.explanation(results))
    else:
        st.warning(
            f"This run did not show what the explanation describes ({broken_words(broken, results)}"
            "). The counts below are what Kafka really holds; run the step again to compare."
        )
        with st.expander("What this step usually shows (not this run)"):
            st.markdown(step.explanation(results))
    render_sources(step.sources)


def broken_words(broken: list[Condition], results: dict) -> str:
    """Each broken condition with the run's count: "lost at at-least-once is 1, the
    explanation needs 0"."""
    return "; ".join(
        f"{c.label().lower()} is {count_of(results.get(c.level, {}), c.field)}, "
        f"the explanation needs {c.describe()}"
        for c in broken
    )


def deciding_counts(step: Step) -> list[Condition]:
    """The counts the step's options are decided on, each once, in the file's order."""
    seen: dict[tuple[str, str], Condition] = {}
    for option in step.options:
        for condition in option.when:
            seen.setdefault((condition.level, condition.field), condition)
    return list(seen.values())


@st.cache_resource(max_entries=32)
def _ended_result(run_id: str) -> dict:
    return load_result(run_id)


def runs_side_by_side(step: Step, runs: list[str], what_ifs: dict[str, str]) -> None:
    """Every run of the step, first to last, each with the option it showed and the counts
    that decide it: "run this step again" and a what-if put the new run beside the others."""
    done = [r for r in runs if ended(r)]
    if len(done) < 2:
        return
    st.subheader("The step's runs side by side")
    counts = deciding_counts(step)
    for number, (column, run_id) in enumerate(zip(st.columns(len(done)), done, strict=True), 1):
        with column:
            title = f"Run {number}" + (" (the latest)" if number == len(done) else "")
            if run_id in what_ifs:
                title += f": what if {what_ifs[run_id]}"
            st.markdown(f"**{title}**")
            st.caption(f"Run `{run_id}`")
            try:
                results = _ended_result(run_id)["results"]
            except LabError as exc:
                show_error(exc)
                continue
            shown = step.outcome(results)
            st.markdown(f"Shows “{shown.text}”" if shown else "Matches none of the options")
            for condition in counts:
                value = count_of(results.get(condition.level, {}), condition.field)
                st.metric(condition.label(), "n/a" if value is None else value)


def what_if_block(step: Step, runs: list[str], what_ifs: dict[str, str]) -> None:
    """The latest what-if run's own explanation, its claims checked on that run."""
    done = [r for r in runs if r in what_ifs and ended(r)]
    if step.what_if is None or not done:
        return
    run_id = done[-1]
    try:
        results = _ended_result(run_id)["results"]
    except LabError as exc:
        show_error(exc)
        return
    shown = step.outcome(results)
    st.subheader(f"What if {step.what_if.label}?")
    st.markdown(
        f"**Run `{run_id}` shows “{shown.text}”.**"
        if shown
        else f"**Run `{run_id}` matches none of the options.**"
    )
    broken = step.what_if.contradicted(results)
    if broken:
        st.warning(
            "This run did not show what the what-if's explanation describes "
            f"({broken_words(broken, results)}); the counts above are what Kafka really holds."
        )
        with st.expander("What this what-if usually shows (not this run)"):
            st.markdown(step.what_if_explanation(results))
    else:
        st.markdown(step.what_if_explanation(results))
    render_sources(step.what_if_sources())
