"""A viewer's follow decision (pages/_whereabouts.follow_step), apart from Streamlit.

Once a session has drawn a page, a followed move is made by the viewer's browser (`move_to`),
never switched on the server (`switch_to`): a page switched from the server left a viewer a
white page in a CI run, for the reason pages/_whereabouts.py gives.
"""

from __future__ import annotations

import pytest

from pages._whereabouts import FollowStep, follow_step

PAGES = ("", "failure_lab", "lesson", "log_views")


def step(**given) -> FollowStep:
    base = dict(first_page=False, following=True, here="failure_lab", put_on="failure_lab")
    return follow_step(**(base | {"heading": None, "where": "failure_lab"} | given), pages=PAGES)


def test_the_room_link_follows_and_its_first_page_is_switched_on_the_server():
    first = step(first_page=True, following=False, here="", put_on=None, where="failure_lab")
    assert first == FollowStep(following=True, switch_to="failure_lab")
    # A page's own address is a choice: no following, the way back offered.
    own = step(first_page=True, following=False, here="lesson", put_on=None, where="failure_lab")
    assert own == FollowStep(following=False, offer="failure_lab")


@pytest.mark.parametrize("where", ["lesson", "log_views", ""])
def test_after_the_first_page_every_move_is_the_browsers(where):
    assert step(where=where) == FollowStep(following=True, move_to=where)


def test_drawn_again_before_the_browser_moved_it_still_follows_and_asks_again():
    assert step(heading="lesson", where="lesson") == FollowStep(following=True, move_to="lesson")


def test_arrived_where_it_was_sent_it_stays():
    arrived = step(here="lesson", put_on="failure_lab", heading="lesson", where="lesson")
    assert arrived == FollowStep(following=True)


def test_a_page_of_its_own_choosing_stops_following():
    chose = step(here="log_views", put_on="failure_lab", heading="lesson", where="lesson")
    assert chose == FollowStep(following=False, offer="lesson")
    assert step(here="log_views", where="failure_lab") == FollowStep(
        following=False, offer="failure_lab"
    )


def test_an_unknown_or_unset_presenter_page_moves_nothing():
    assert step(where=None) == FollowStep(following=True)
    assert step(where="no_such_page") == FollowStep(following=True)
