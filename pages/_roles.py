"""Each browser session's role, kept on the server, and the check every action makes.

The role lives in a server-side table keyed by Streamlit's session id, not in
`st.session_state`: a browser can send widget values, and a crafted one must not be able to
name itself the presenter. Streamlit lets a browser resume a session whose id it knows (to
reconnect), so the id must stay private: the server makes it and sends it only to that
browser, and nothing here prints it whole. Several sessions may hold the presenter role.
A session becomes the presenter only by loading a page with the
presenter key in the address; the key is taken out of the address bar at once, and the
session stays the presenter while it lives (page changes included) and while its browser
connects from the address that gave the key. A reload starts a new session, which needs the
link again.

On plain HTTP the session id crosses the wire, and a browser that copies it resumes the session
(Streamlit hands a reconnecting id its session, disconnecting the tab that held it). The role
is therefore bound to the TCP peer's address that gave the key too: a copied id, resumed from
another laptop, is a viewer's session there. Streamlit's own log lines that name a session id
are shortened (hide_session_ids).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time

import streamlit as st
from streamlit import runtime
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner import get_script_run_ctx

from engine.face import (
    KEY_ENV,
    KEY_PARAM,
    PRESENTER,
    PUBLISHED_ADDRESS,
    VIEWER,
    PresenterKeyError,
    UnsafeRoomError,
    configured_key,
    key_matches,
    refuse,
    serves_a_room,
)
from pages._keep import kept


class RoleTable:
    """session id -> role, for the sessions that presented the key (all others: viewers).

    A presenter's session is kept with the address its browser gave the key from, and
    presents only while it connects from there (a copied session id resumed elsewhere does not).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._presenters: dict[str, str | None] = {}  # session id -> the peer that gave the key
        self._wrong_key: set[str] = set()
        self._rehearsing: set[str] = set()  # loopback tabs opened to see what the room sees

    def make_rehearsal_viewer(self, session: str) -> None:
        with self._lock:
            self._rehearsing.add(session)

    def is_rehearsal_viewer(self, session: str) -> bool:
        with self._lock:
            return session in self._rehearsing

    def anyone_rehearsing(self) -> bool:
        with self._lock:
            return bool(self._rehearsing)

    def make_presenter(self, session: str, peer: str | None = None) -> None:
        with self._lock:
            self._presenters[session] = peer
            self._wrong_key.discard(session)

    def mark_wrong_key(self, session: str) -> None:
        with self._lock:
            self._wrong_key.add(session)

    def is_presenter(self, session: str, peer: str | None = None) -> bool:
        with self._lock:
            return session in self._presenters and self._presenters[session] == peer

    def gave_wrong_key(self, session: str) -> bool:
        with self._lock:
            return session in self._wrong_key


@kept
def role_table() -> RoleTable:
    return RoleTable()


PUBLISHED_ENV = PUBLISHED_ADDRESS.name


def bind_address() -> str:
    """The address the dashboard is reached at: where the server listens (Streamlit's own
    setting, not the client's), or, in a container, where Docker publishes its port.

    A container must listen on every interface for a published port to reach it, so there
    the listening address says nothing; docker-compose.yml publishes the dashboard on
    127.0.0.1 only and says so in LAB_PUBLISHED_ADDRESS.
    """
    return PUBLISHED_ADDRESS.get() or str(st.get_option("server.address") or "")


def obeys_debug_messages() -> bool:
    """Whether Streamlit obeys a browser's debug_shutdown_runtime (stopping the server) and
    debug_disconnect_websocket: only in its development and e2e test modes
    (streamlit/web/server/starlette/starlette_websocket.py), both off for `./lab dashboard`."""
    return bool(st.get_option("global.developmentMode") or st.get_option("global.e2eTest"))


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def session_peer(session: str) -> str | None:
    """The address a session's browser connects from now: the TCP peer of its websocket
    (Streamlit's ClientContext.remote_ip, read from the connection, not from a header)."""
    if not runtime.exists():
        return None
    client = runtime.get_instance().get_client(session)
    context = getattr(client, "client_context", None) if client is not None else None
    peer = getattr(context, "remote_ip", None)
    return peer if isinstance(peer, str) else None  # Streamlit's AppTest has a mock runtime


def room_key() -> str | None:
    """The presenter key when the dashboard serves a room; None on loopback.

    Raises PresenterKeyError for a room without a usable key (`./lab dashboard` makes one),
    and UnsafeRoomError for a room in a Streamlit mode that obeys a browser's debug messages.
    """
    address = bind_address()
    if not serves_a_room(address):
        return None
    if obeys_debug_messages():
        raise UnsafeRoomError(
            f"This dashboard listens on {address or 'every interface'} in Streamlit's "
            "development or e2e test mode (global.developmentMode, global.e2eTest), where any "
            "browser may stop it with one message: serve a room without those options."
        )
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
            table.make_presenter(session, session_peer(session))
        else:
            table.mark_wrong_key(session)
            wrong_key_given()
    return PRESENTER if table.is_presenter(session, session_peer(session)) else VIEWER


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


def room_watches() -> bool:
    """Whether anyone but the presenter may be watching: a room is served, or a rehearsal
    tab is open on loopback (the Lesson page shows the room's vote then)."""
    try:
        return room_key() is not None or role_table().anyone_rehearsing()
    except PresenterKeyError:
        return False


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
    if key is None:
        return not table.is_rehearsal_viewer(session)
    return table.is_presenter(session, session_peer(session))


_LOG = logging.getLogger("lab.room")

# What a viewer's browser may send: the BackMsg types of Streamlit 1.67.0 that a viewer's own
# page sends in ordinary use, and that reach nothing but its own session (docs/serving-a-room.md,
# "What a viewer's browser may send", says what each type does). Every other type, one this
# table has not heard of included (a later Streamlit's), is refused for a viewer.
VIEWER_MAY_SEND = frozenset(
    {
        "rerun_script",
        "stop_script",
        "app_heartbeat",
        "set_run_on_save",
        # backend_operation_request carries one payload: only reading its own lazy dataframe.
        "backend_operation_request (dataframe_chunk)",
    }
)
_refused: set[tuple[str, str]] = set()  # (session id, message kind) already logged
_refused_lock = threading.Lock()


def message_kind(msg: BackMsg) -> str:
    """A browser message's type as the log names it, with a backend operation's payload."""
    kind = msg.WhichOneof("type") or "empty"
    if kind == "backend_operation_request":
        payload = msg.backend_operation_request.WhichOneof("payload") or "no payload"
        return f"{kind} ({payload})"
    return kind


def viewer_may_send(msg: BackMsg) -> bool:
    return message_kind(msg) in VIEWER_MAY_SEND


REFUSALS_KEPT = 512  # past this, refusals of sessions that have ended are forgotten


def refused_message(session: str, kind: str) -> None:
    """Log a viewer's refused message once per session and kind, without the session's id
    (a copied id would let a browser resume the session)."""
    with _refused_lock:
        first = (session, kind) not in _refused
        _refused.add((session, kind))
        if len(_refused) > REFUSALS_KEPT and runtime.exists():
            live = runtime.get_instance().is_active_session
            _refused.intersection_update({(s, k) for s, k in _refused if live(s)})
    if first:
        _LOG.warning(
            "A viewer's %s message was refused (logged once a session for each kind).", kind
        )


def guard_browser_messages() -> None:
    """Refuse for viewers every browser message but those their pages send in ordinary use.

    Streamlit's `clear_cache` empties every session's caches, from any browser; the room's
    state no longer lives in a cache (pages._keep), but the caches' recomputation would cost
    the room, and the presenter's "Clear cache" keeps working. The other refused types reach
    the server's files or other sessions' objects, or are never sent by a viewer's page (it
    draws no uploader, download or deploy button). Streamlit has no hook for its browser
    messages, so the session's handler of them is wrapped here. The two debug messages never
    reach it (Streamlit's websocket handles them first): a room refuses to serve in the modes
    that obey them (room_key).
    """
    original = AppSession.handle_backmsg
    if getattr(original, "lab_guard", False):
        return

    def guarded(session: AppSession, msg: BackMsg) -> None:
        if viewer_may_send(msg) or presents(session.id):
            original(session, msg)
        else:
            refused_message(session.id, message_kind(msg))

    guarded.lab_guard = True  # type: ignore[attr-defined]
    AppSession.handle_backmsg = guarded  # type: ignore[method-assign]
    hide_session_ids()


# Streamlit's session ids are uuid4 strings (AppSession.__init__).
_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def shorten_ids(text: str) -> str:
    """A session id's first eight characters, as the lab's own log lines name a session."""
    return _UUID.sub(r"\1…", text)


def hide_session_ids() -> None:
    """Shorten every session id in Streamlit's log lines (a reconnect, a new session, a
    discarded message name it whole; with it, a reader of the log could resume the session).

    Streamlit's loggers each have their own handler and do not propagate, so no one filter sees
    them all; the record factory makes every record, so the ids are shortened there.
    """
    make_record = logging.getLogRecordFactory()
    if getattr(make_record, "lab_hides_ids", False):
        return

    def record(name, level, fn, lno, msg, args, *rest, **kwargs):
        if name.startswith("streamlit") and args:
            args = tuple(shorten_ids(a) if isinstance(a, str) else a for a in args)
        return make_record(name, level, fn, lno, msg, args, *rest, **kwargs)

    record.lab_hides_ids = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(record)
