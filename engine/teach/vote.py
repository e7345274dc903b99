"""The room's vote on a lesson step: one ballot per step, one vote per browser session.

A lesson step asks the room a question with a few options (lessons/*.yaml). In a room every
laptop votes; the presenter's screen shows the tally (how many for each option, never who),
locks the vote, and runs the step. The verdict then sets the tally against what Kafka did,
and the tally is saved beside the run (vote.json) for Replay.

Pure logic, no Streamlit: the pages keep one RoomVotes for the dashboard (pages._votes).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.base.errors import LabError
from engine.run import record

VOTE_FILE = "vote.json"


class VoteError(LabError):
    """A vote the room's ballot does not take (locked, or not one of its options)."""


@dataclass(frozen=True)
class Ballot:
    """What the room is asked at one step of a lesson."""

    lesson: str
    step: int  # the step's index in the lesson (0-based)
    question: str
    options: tuple[str, ...]

    @property
    def key(self) -> tuple[str, int]:
        return self.lesson, self.step


def votes_text(count: int) -> str:
    return f"{count} vote" if count == 1 else f"{count} votes"


@dataclass(frozen=True)
class Tally:
    """How many voted for each option, in the ballot's order."""

    options: tuple[str, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def count(self, option: str | None) -> int:
        return self.counts[self.options.index(option)] if option in self.options else 0

    def leader(self) -> str | None:
        """The option with the most votes; None with no votes or a tie at the top."""
        if not self.total:
            return None
        top = max(self.counts)
        leaders = [o for o, c in zip(self.options, self.counts, strict=True) if c == top]
        return leaders[0] if len(leaders) == 1 else None

    def split(self) -> str:
        """Each option with its count, in one line."""
        return " · ".join(f"“{o}”: {c}" for o, c in zip(self.options, self.counts, strict=True))

    def against(self, shown: str | None) -> str:
        """The tally set against the option the run showed (None: it matched none)."""
        if not self.total:
            return "Nobody in the room voted on this step."
        if shown is None:
            return (
                f"The room cast {votes_text(self.total)} ({self.split()}); the run matches "
                "none of the options."
            )
        right = self.count(shown)
        return (
            f"{right} of {votes_text(self.total)} said “{shown}”, what the run shows "
            f"({self.split()})."
        )


@dataclass
class StepVote:
    """One step's ballot, its votes by session, and what the presenter did with it."""

    ballot: Ballot
    locked: bool = False
    prediction: str | None = None  # the room's prediction as the presenter locked it
    runs: list[str] = field(default_factory=list)  # the step's runs, newest last
    what_ifs: dict[str, str] = field(default_factory=dict)  # run id -> its what-if's label
    _votes: dict[str, str] = field(default_factory=dict)  # voter (session id) -> option

    def cast(self, voter: str, option: str | None) -> None:
        """A voter's vote, changeable until the lock; None takes it back."""
        if self.locked:
            raise VoteError("The vote on this step is locked: the presenter has run it.")
        if option is None:
            self._votes.pop(voter, None)
            return
        if option not in self.ballot.options:
            raise VoteError(f"“{option}” is not one of this step's options.")
        self._votes[voter] = option

    @property
    def plain_runs(self) -> list[str]:
        return [r for r in self.runs if r not in self.what_ifs]

    def vote_of(self, voter: str) -> str | None:
        return self._votes.get(voter)

    def tally(self) -> Tally:
        counts = {o: 0 for o in self.ballot.options}
        for option in self._votes.values():
            counts[option] += 1
        return Tally(self.ballot.options, tuple(counts.values()))


class RoomVotes:
    """Every step's vote since the dashboard started, and the step the presenter shows.

    `version` changes whenever anything a viewer's page draws changes (another step, a lock,
    a run), so that viewers' pages know when to draw again; a vote does not change it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[tuple[str, int], StepVote] = {}
        self._current: tuple[str, int] | None = None
        self.version = 0

    def show(self, ballot: Ballot) -> None:
        """The presenter's page shows this step: its ballot opens (or is found again)."""
        with self._lock:
            known = self._steps.get(ballot.key)
            if known is None or known.ballot != ballot:  # new, or the file's question changed
                self._steps[ballot.key] = StepVote(ballot)
            if self._current != ballot.key or known is None or known.ballot != ballot:
                self._current = ballot.key
                self.version += 1

    def current(self) -> tuple[int, StepVote | None]:
        with self._lock:
            vote = self._steps.get(self._current) if self._current else None
            return self.version, vote

    def step(self, key: tuple[str, int]) -> StepVote | None:
        with self._lock:
            return self._steps.get(key)

    def cast(self, key: tuple[str, int], voter: str, option: str | None) -> None:
        with self._lock:
            vote = self._steps.get(key)
            if vote is None:
                raise VoteError("There is no vote on that step now.")
            vote.cast(voter, option)

    def tally(self, key: tuple[str, int]) -> Tally | None:
        with self._lock:
            vote = self._steps.get(key)
            return vote.tally() if vote is not None else None

    def lock(self, key: tuple[str, int], prediction: str | None) -> Tally:
        """Close the step's vote with the room's prediction; its tally from then on."""
        with self._lock:
            vote = self._steps[key]
            vote.locked, vote.prediction = True, prediction
            self.version += 1
            return vote.tally()

    def ran(self, key: tuple[str, int], run_id: str, what_if: str | None = None) -> None:
        """A run of the step began (`what_if`: the label of the what-if it runs)."""
        with self._lock:
            self._steps[key].runs.append(run_id)
            if what_if is not None:
                self._steps[key].what_ifs[run_id] = what_if
            self.version += 1


@dataclass(frozen=True)
class VoteRecord:
    """A step's vote as saved beside one of its runs."""

    lesson: str
    step: int
    question: str
    options: tuple[str, ...]
    counts: tuple[int, ...]
    prediction: str | None  # the room's prediction the run was judged against

    @property
    def tally(self) -> Tally:
        return Tally(self.options, self.counts)


def save_vote(run_id: str, vote: StepVote) -> VoteRecord:
    """Keep the step's locked tally beside its run (Replay shows it)."""
    tally = vote.tally()
    saved = VoteRecord(
        vote.ballot.lesson,
        vote.ballot.step,
        vote.ballot.question,
        tally.options,
        tally.counts,
        vote.prediction,
    )
    path = record.run_folder(run_id) / VOTE_FILE
    path.write_text(json.dumps(asdict(saved), indent=1))
    return saved


def load_vote(run_id: str) -> VoteRecord | None:
    """The vote saved with a run; None for a run no room voted on (or a damaged file)."""
    try:
        data: dict[str, Any] = json.loads((record.run_folder(run_id) / VOTE_FILE).read_text())
        return VoteRecord(
            str(data["lesson"]),
            int(data["step"]),
            str(data["question"]),
            tuple(str(o) for o in data["options"]),
            tuple(int(c) for c in data["counts"]),
            data.get("prediction"),
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
