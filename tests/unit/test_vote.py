"""The room's vote on a lesson step (engine.teach.vote): pure logic, no Kafka."""

from __future__ import annotations

import pytest

from engine.run import record
from engine.teach.vote import Ballot, RoomVotes, Tally, VoteError, load_vote, save_vote

BALLOT = Ballot("delivery-guarantees", 0, "How many copies?", ("none", "one", "two"))


def test_one_vote_per_voter_changeable_until_the_lock():
    room = RoomVotes()
    room.show(BALLOT)
    room.cast(BALLOT.key, "a", "two")
    room.cast(BALLOT.key, "b", "two")
    room.cast(BALLOT.key, "a", "one")  # changed its mind
    room.cast(BALLOT.key, "c", "none")
    room.cast(BALLOT.key, "c", None)  # took it back
    assert room.tally(BALLOT.key) == Tally(BALLOT.options, (0, 1, 1))
    assert room.lock(BALLOT.key, "two").counts == (0, 1, 1)
    with pytest.raises(VoteError, match="locked"):
        room.cast(BALLOT.key, "d", "one")
    assert room.tally(BALLOT.key).total == 2


def test_an_option_the_ballot_lacks_is_refused():
    room = RoomVotes()
    room.show(BALLOT)
    with pytest.raises(VoteError, match="not one of"):
        room.cast(BALLOT.key, "a", "three")
    with pytest.raises(VoteError, match="no vote"):
        room.cast(("other", 1), "a", "one")
    assert room.tally(BALLOT.key).total == 0


def test_the_version_moves_with_what_a_viewer_draws_not_with_votes():
    room = RoomVotes()
    room.show(BALLOT)
    first = room.current()[0]
    room.show(BALLOT)  # the presenter's page drawn again
    room.cast(BALLOT.key, "a", "one")
    assert room.current()[0] == first
    room.lock(BALLOT.key, "one")
    room.ran(BALLOT.key, "run-1")
    assert room.current()[0] == first + 2
    later = Ballot("delivery-guarantees", 1, "And now?", ("yes", "no"))
    room.show(later)
    assert room.current()[1].ballot == later
    room.show(BALLOT)  # back to the first step: its votes and runs are still there
    _, vote = room.current()
    assert vote.locked and vote.runs == ["run-1"] and vote.tally().counts == (0, 1, 0)


def test_a_changed_question_opens_a_new_ballot():
    room = RoomVotes()
    room.show(BALLOT)
    room.cast(BALLOT.key, "a", "one")
    rewritten = Ballot(BALLOT.lesson, BALLOT.step, "How many copies now?", BALLOT.options)
    room.show(rewritten)
    assert room.tally(BALLOT.key).total == 0


@pytest.mark.parametrize(
    ("counts", "shown", "says"),
    [
        ((0, 0, 0), "two", "Nobody in the room voted on this step."),
        ((1, 0, 2), "two", "2 of 3 votes said “two”, what the run shows"),
        ((0, 1, 0), "two", "0 of 1 vote said “two”, what the run shows"),
        ((1, 1, 0), None, "The room cast 2 votes (“none”: 1 · “one”: 1 · “two”: 0); the run"),
    ],
)
def test_the_tally_against_the_run(counts, shown, says):
    assert Tally(BALLOT.options, counts).against(shown).startswith(says)


@pytest.mark.parametrize(
    ("counts", "leader"), [((0, 0, 0), None), ((1, 3, 2), "one"), ((2, 2, 1), None)]
)
def test_the_leader_is_the_single_most_voted_option(counts, leader):
    assert Tally(BALLOT.options, counts).leader() == leader


def test_the_tally_is_saved_with_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    run_id = "20261202-050000-ack-loss-abcd"
    record.run_folder(run_id).mkdir(parents=True)
    room = RoomVotes()
    room.show(BALLOT)
    for voter, option in (("a", "two"), ("b", "two"), ("c", "one")):
        room.cast(BALLOT.key, voter, option)
    room.lock(BALLOT.key, "two")
    saved = save_vote(run_id, room.step(BALLOT.key))
    assert load_vote(run_id) == saved
    assert (saved.counts, saved.prediction, saved.question) == ((0, 1, 2), "two", BALLOT.question)
    assert load_vote("20261202-050000-ack-loss-ffff") is None  # no vote, no folder
