"""The room draws a run's result after the presenter's page has drawn it (pages/_follow.py)."""

from __future__ import annotations

import json

import pytest

from pages import _follow
from pages._follow import Broadcast, RoomFeed

RUN_ID = "20261125-153000-ack-loss-ab12"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    (tmp_path / RUN_ID).mkdir()
    return tmp_path


def set_status(runs, status: str) -> None:
    (runs / RUN_ID / "run.json").write_text(json.dumps({"run_id": RUN_ID, "status": status}))


def broadcast(*, presenter_draws_result: bool) -> Broadcast:
    return Broadcast(
        run_id=RUN_ID,
        title="ack-loss",
        levels=("at-most-once",),
        pipeline="producer",
        schedule="side-by-side",
        presenter_draws_result=presenter_draws_result,
    )


def test_viewers_wait_for_the_presenters_page_then_draw(runs, monkeypatch):
    feed, current = RoomFeed(), broadcast(presenter_draws_result=True)
    clock = [100.0]
    monkeypatch.setattr(_follow.time, "monotonic", lambda: clock[0])
    set_status(runs, "running")
    assert not feed.result_ready(current)
    set_status(runs, "complete")
    assert not feed.result_ready(current)  # ended, but the presenter's page is drawing it
    feed.presenter_drew(RUN_ID)
    clock[0] += _follow.AFTER_PRESENTER_S - 0.01
    assert not feed.result_ready(current)  # the presenter's browser is laying it out
    clock[0] += 0.01
    assert feed.result_ready(current)


def test_a_result_the_presenter_never_draws_shows_after_the_grace(runs, monkeypatch):
    feed, current = RoomFeed(), broadcast(presenter_draws_result=True)
    set_status(runs, "failed")
    clock = [100.0]
    monkeypatch.setattr(_follow.time, "monotonic", lambda: clock[0])
    assert not feed.result_ready(current)
    clock[0] += _follow.RESULT_GRACE_S
    assert feed.result_ready(current)


def test_free_play_results_show_as_soon_as_they_end(runs):
    feed, current = RoomFeed(), broadcast(presenter_draws_result=False)
    set_status(runs, "complete")
    assert feed.result_ready(current)
