"""Viewers follow the presenter from page to page, unless they chose to look elsewhere.

The presenter's page is kept for the room (the last page a presenter's session drew in full).
A viewer who opened the room's link (the default page) follows: when the presenter moves, the
viewer's page moves too, within FOLLOW_POLL_S. A viewer who opens a page by its own address, or
picks another page in the sidebar, has chosen to look there and stops following; the sidebar's
"Follow the presenter's page" takes them back.

A followed move is made in the viewer's browser, as a click on the page's link would be, and
not with `st.switch_page` (which only the session's first page uses, when nothing of it ticks
in the browser yet). A page switched from the server keeps the old page's `run_every`
fragments ticking in the browser until the new page arrives; a tick that lands after the
switch brings deltas for the old page's layout, and Streamlit 1.67's frontend throws "Bad
delta path index", unmounts the app and drops its connection: a white page for good. Seen in
a CI run, and here in 4 of 5 scripted sessions of Lesson -> Failure lab -> a run (in rounds
1, 2, 3 and 14); in a minimal app with four following tabs, 3 or 4 tabs crashed within 60
moves in each of 7 tries. A move the browser starts itself goes through the frontend's `popstate`
handler (`onHistoryChange` -> `onPageChange`), which stops the page's fragment timers before
asking for the new page: 0 crashes in 60 and 80 moves of the same minimal app, and none in
18 rounds of the dashboard's scripted session (36 moves, 18 runs). The decision is
`follow_step` (tests/unit/test_follow_step.py); the room's browser test fails on any page
error.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from pages._keep import kept

FOLLOW_POLL_S = 2.0
FOLLOWING = "follow_pages"  # session state: whether this viewer follows the presenter's page
PUT_ON = "followed_to"  # session state: the page following last put this viewer on
HEADING_TO = "following_to"  # session state: the page following asked the browser to open


class Whereabouts:
    """The presenter's current page (its URL path; "" is the default page)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._page: str | None = None

    def moved_to(self, page: str) -> None:
        with self._lock:
            self._page = page

    def page(self) -> str | None:
        with self._lock:
            return self._page


@kept
def whereabouts() -> Whereabouts:
    return Whereabouts()


def presenter_is_on(page: StreamlitPage) -> None:
    whereabouts().moved_to(page.url_path)


def _follow_again() -> None:
    st.session_state[FOLLOWING] = True


def _go_to(url_path: str) -> None:
    """Move this viewer's browser to the page at `url_path` ("" is the default page), as a
    click on its link would: a new history entry, then the `popstate` Streamlit's frontend
    answers by stopping the page's fragment timers and asking for the new page."""
    st.session_state[HEADING_TO] = url_path
    # The pages' paths are one segment under the app's root, so the new path is the current
    # one's folder plus the page's; a base URL path (server.baseUrlPath) stays in the folder.
    # The tick makes the script new every 10 s, so a move the browser missed is made again.
    script = (
        "(() => {"
        f"const target = location.pathname.replace(/[^/]*$/, '') + {json.dumps(url_path)};"
        "if (location.pathname === target) return;"
        "history.pushState(null, '', target);"
        "window.dispatchEvent(new PopStateEvent('popstate', {state: null}));"
        f"}})(); // {int(time.monotonic() // 10)}"
    )
    st.html(f"<script>{script}</script>", unsafe_allow_javascript=True)


@st.fragment(run_every=FOLLOW_POLL_S)
def _watch_presenter(seen: str | None, paths: frozenset[str]) -> None:
    """Moves the viewer when the presenter has moved to another page."""
    where = whereabouts().page()
    if where != seen and where in paths:
        _go_to(where)


@dataclass(frozen=True)
class FollowStep:
    """What a viewer's page does about the presenter's page, on one draw."""

    following: bool
    switch_to: str | None = None  # switch on the server: only the session's first page
    move_to: str | None = None  # the browser moves there (_go_to)
    offer: str | None = None  # not following: the button back to the presenter's page


def follow_step(
    *,
    first_page: bool,
    following: bool,
    here: str,
    put_on: str | None,
    heading: str | None,
    where: str | None,
    pages: Collection[str],
) -> FollowStep:
    """The decision, apart from Streamlit. `here`: this draw's page; `put_on`: the page this
    session last drew while following; `heading`: the page a move asked the browser to open;
    `where`: the presenter's page (None before it drew one)."""
    if first_page:  # the first page: the room's link follows, a page's own does not
        following = here == ""
    elif here == heading or (heading is not None and here == put_on):
        pass  # arrived where following sent it, or drawn again before the browser moved
    elif put_on not in (None, here):
        following = False  # the viewer went elsewhere by itself
    elsewhere = where if where is not None and where in pages and where != here else None
    if not following:
        return FollowStep(following=False, offer=elsewhere)
    if elsewhere is None:
        return FollowStep(following=True)
    if first_page:  # nothing of this session ticks in the browser yet
        return FollowStep(following=True, switch_to=elsewhere)
    return FollowStep(following=True, move_to=elsewhere)


def follow_presenter(current: StreamlitPage, pages: dict[str, StreamlitPage]) -> None:
    """A viewer's page: go where the presenter is, while following (app.py, before the page)."""
    state = st.session_state
    here, where = current.url_path, whereabouts().page()
    step = follow_step(
        first_page=FOLLOWING not in state,
        following=bool(state.get(FOLLOWING)),
        here=here,
        put_on=state.get(PUT_ON),
        heading=state.get(HEADING_TO),
        where=where,
        pages=pages,
    )
    state[FOLLOWING] = step.following
    if not step.following:
        state.pop(PUT_ON, None)
        state.pop(HEADING_TO, None)
        if step.offer is not None:
            st.sidebar.button(
                "👣 Follow the presenter's page",
                on_click=_follow_again,
                help=f"The presenter is on {pages[step.offer].title}; this page will move with "
                "theirs.",
                width="stretch",
            )
        return
    if step.switch_to is not None:
        state[PUT_ON] = step.switch_to
        st.switch_page(pages[step.switch_to])
    state[PUT_ON] = here
    if step.move_to is not None:
        with st.sidebar:
            _go_to(step.move_to)
        return
    state.pop(HEADING_TO, None)
    with st.sidebar:
        st.caption("👣 Following the presenter's page")
        _watch_presenter(where, frozenset(pages))
