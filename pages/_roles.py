"""Each browser session's role, kept on the server, and the check every action makes.

The role lives in a server-side table keyed by Streamlit's session id, not in
`st.session_state`: a browser can send widget values, and a crafted one must not be able to
name itself the presenter. Streamlit lets a browser resume a session whose id it knows (to
reconnect), so the id must stay private: the server makes it and sends it only to that
browser, and nothing here prints it whole. Several sessions may hold the presenter role.
A session becomes the presenter only by loading a page with the
presenter key in the address; the key is taken out of the address bar at once, and the
session stays the presenter while it lives (page changes included). A reload starts a new
session, which needs the link again.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import streamlit as st
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner import get_script_run_ctx

from engine import settings
from engine.room import (
    KEY_ENV,
    KEY_PARAM,
    PRESENTER,
    VIEWER,
    PresenterKeyError,
    configured_key,
    key_matches,
    refuse,
    serves_a_room,
)
from pages._keep import kept


class RoleTable:
    """session id -> role, for the sessions that presented the key (all others: viewers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._presenters: set[str] = set()
        self._wrong_key: set[str] = set()
        self._rehearsing: set[str] = set()  # loopback tabs opened to see what the room sees

    def make_rehearsal_viewer(self, session: str) -> None:
        with self._lock:
            self._rehearsing.add(session)

    def is_rehearsal_viewer(self, session: str) -> bool:
        with self._lock:
            return session in self._rehearsing

    def make_presenter(self, session: str) -> None:
        with self._lock:
            self._presenters.add(session)
            self._wrong_key.discard(session)

    def mark_wrong_key(self, session: str) -> None:
        with self._lock:
            self._wrong_key.add(session)

    def is_presenter(self, session: str) -> bool:
        with self._lock:
            return session in self._presenters

    def gave_wrong_key(self, session: str) -> bool:
        with self._lock:
            return session in self._wrong_key


@kept
def role_table() -> RoleTable:
    return RoleTable()


PUBLISHED_ENV = settings.PUBLISHED_ADDRESS.name


def bind_address() -> str:
    """The address the dashboard is reached at: where the server listens (Streamlit's own
    setting, not the client's), or, in a container, where Docker publishes its port.

    A container must listen on every interface for a published port to reach it, so there
    the listening address says nothing; docker-compose.yml publishes the dashboard on
    127.0.0.1 only and says so in LAB_PUBLISHED_ADDRESS.
    """
    return settings.PUBLISHED_ADDRESS.get() or str(st.get_option("server.address") or "")


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def room_key() -> str | None:
    """The presenter key when the dashboard serves a room; None on loopback.

    Raises PresenterKeyError for a room without a usable key (`./lab dashboard` makes one).
    """
    address = bind_address()
    if not serves_a_room(address):
        return None
    key = configured_key(address, os.environ)
    if key is None:
        raise PresenterKeyError(
            f"This dashboard listens on {address or 'every interface'} without a presenter "
            f"key: start it with `./lab dashboard` (which makes one), or set {KEY_ENV}."
        )
    return key


REHEARSE_PARAM = "rehearse"


def session_role() -> str:
    """This session's role; a presenter key in the address is checked, then removed from it.

    On loopback every session presents, except a tab opened from "Rehearse the room"
    (?rehearse=viewer): it is a viewer for as long as it lives, so the presenter can see what
    the class will see. Turning oneself into a viewer gives nobody a right.
    """
    key = room_key()
    if key is None:
        table, session = role_table(), session_id()
        if st.query_params.get(REHEARSE_PARAM) == VIEWER:
            table.make_rehearsal_viewer(session)
        return VIEWER if table.is_rehearsal_viewer(session) else PRESENTER
    table, session = role_table(), session_id()
    given = st.query_params.get(KEY_PARAM)
    if given is not None:
        del st.query_params[KEY_PARAM]  # out of the address bar, the history and screenshots
        if key_matches(given, key):
            table.make_presenter(session)
        else:
            table.mark_wrong_key(session)
            wrong_key_given()
    return PRESENTER if table.is_presenter(session) else VIEWER


WRONG_KEY_DELAY_S = 1.0
_wrong_keys = threading.Lock()


def wrong_key_given() -> None:
    """Log a wrong presenter key (never the key, nor the session's id) and slow the guesser:
    every wrong key waits its turn and a second, so guesses from any number of tabs come one
    a second at most."""
    _LOG.warning("A wrong presenter key was given; it is refused, and the next guess waits.")
    with _wrong_keys:
        time.sleep(WRONG_KEY_DELAY_S)


def is_presenter() -> bool:
    try:
        return session_role() == PRESENTER
    except PresenterKeyError:
        return False


def require_presenter(action: str) -> None:
    """The check each action makes on the server, before it touches anything."""
    if not is_presenter():
        raise refuse(action, session_id())


def rehearsal_link() -> None:
    """On loopback, the presenter's way to open a viewer's tab beside its own."""
    if room_key() is not None or not is_presenter():
        return
    st.link_button(
        "👀 Rehearse the room",
        f"?{REHEARSE_PARAM}={VIEWER}",
        help="Opens this dashboard as a viewer in a new tab: it follows this tab's runs as "
        "the class will, and cannot act. Only for rehearsing on this machine.",
        width="stretch",
    )


def viewer_line() -> str:
    """The one line a viewer reads at the top of each page."""
    if role_table().is_rehearsal_viewer(session_id()):
        return (
            "Rehearsal: this tab is a viewer, as the class will see the dashboard. Close it to "
            "stop rehearsing; the other tab presents."
        )
    if role_table().gave_wrong_key(session_id()):
        return (
            "That presenter key is not this dashboard's: you are watching. The presenter link "
            "is printed in the terminal where the dashboard started."
        )
    return (
        "You are watching the presenter. To present, open the presenter link printed in the "
        "terminal where the dashboard started."
    )


def presents(session: str) -> bool:
    """Whether a session holds the presenter role, asked outside its script run (for a
    message its browser sent): the same rule as session_role, without reading an address."""
    try:
        key = room_key()
    except PresenterKeyError:
        return False
    table = role_table()
    return (
        table.is_presenter(session) if key is not None else not table.is_rehearsal_viewer(session)
    )


_LOG = logging.getLogger("lab.room")
_refused_clears: set[str] = set()


def guard_clear_cache() -> None:
    """Refuse a viewer's `clear_cache` message, and log it once per session.

    Streamlit clears every session's caches on that message, from any browser. The room's
    state no longer lives in a cache (pages._keep), so what a viewer could still cost the room
    is the caches' recomputation: the presenter's "Clear cache" keeps working, a viewer's is
    dropped. Streamlit has no hook for its browser messages, so its handler is wrapped here.
    """
    original = AppSession._handle_clear_cache_request
    if getattr(original, "lab_guard", False):
        return

    def guarded(session: AppSession) -> None:
        if presents(session.id):
            original(session)
            return
        with role_table()._lock:
            first = session.id not in _refused_clears
            _refused_clears.add(session.id)
        if first:  # the id stays private: a copied id would let a browser resume the session
            _LOG.warning("A viewer's clear_cache message was refused (logged once a session).")

    guarded.lab_guard = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = guarded  # type: ignore[method-assign]
