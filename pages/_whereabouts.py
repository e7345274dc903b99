"""Viewers follow the presenter from page to page, unless they chose to look elsewhere.

The presenter's page is kept for the room (the last page a presenter's session drew in full).
A viewer who opened the room's link (the default page) follows: when the presenter moves, the
viewer's page moves too, within FOLLOW_POLL_S. A viewer who opens a page by its own address, or
picks another page in the sidebar, has chosen to look there and stops following; the sidebar's
"Follow the presenter's page" takes them back.
"""

from __future__ import annotations

import threading

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from pages._keep import kept

FOLLOW_POLL_S = 2.0
FOLLOWING = "follow_pages"  # session state: whether this viewer follows the presenter's page
PUT_ON = "followed_to"  # session state: the page following last put this viewer on


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


@st.fragment(run_every=FOLLOW_POLL_S)
def _watch_presenter(seen: str | None) -> None:
    """Draws the whole page again when the presenter has moved to another page."""
    if whereabouts().page() != seen:
        st.rerun(scope="app")


def follow_presenter(current: StreamlitPage, pages: dict[str, StreamlitPage]) -> None:
    """A viewer's page: go where the presenter is, while following (app.py, before the page)."""
    state = st.session_state
    if FOLLOWING not in state:  # the first page: the room's link follows, a page's own does not
        state[FOLLOWING] = current.url_path == ""
    elif state.get(PUT_ON) not in (None, current.url_path):
        state[FOLLOWING] = False  # the viewer went elsewhere by itself
    where = whereabouts().page()
    if not state[FOLLOWING]:
        state.pop(PUT_ON, None)
        if where is not None and where in pages and where != current.url_path:
            st.sidebar.button(
                "👣 Follow the presenter's page",
                on_click=_follow_again,
                help=f"The presenter is on {pages[where].title}; this page will move with theirs.",
                width="stretch",
            )
        return
    if where is not None and where in pages and where != current.url_path:
        state[PUT_ON] = where
        st.switch_page(pages[where])
    state[PUT_ON] = current.url_path
    with st.sidebar:
        st.caption("👣 Following the presenter's page")
        _watch_presenter(where)
