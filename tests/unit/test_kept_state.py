"""The room's state is kept where no browser message can clear it, and a viewer's clear_cache
message is refused (issue 60: one viewer's message emptied the presenter's role table), as is
every other message a viewer's page does not send in ordinary use."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit import config
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.runtime.app_session import AppSession

from engine.teach.room import UnsafeRoomError
from pages import _roles
from pages._keep import kept


def test_a_kept_object_outlives_streamlits_clear_cache():
    made = []
    keep = kept(lambda: made.append(object()) or made[-1])
    first = keep()
    st.cache_resource.clear()
    st.cache_data.clear()
    assert keep() is first and len(made) == 1
    keep.clear()
    assert keep() is not first


def test_the_rooms_state_is_kept_not_cached():
    from pages._follow import room_feed
    from pages._room_results import room_results
    from pages._shared import cluster_service
    from pages._spark import spark_service

    for getter in (_roles.role_table, room_feed, room_results, cluster_service, spark_service):
        assert getter() is getter(), getter.__name__
        before = getter()
        st.cache_resource.clear()
        assert getter() is before, getter.__name__


def back_msg(kind: str, payload: str = "") -> BackMsg:
    """A BackMsg of one type, with plausible contents."""
    msg = BackMsg()
    field = msg.DESCRIPTOR.fields_by_name[kind]
    if field.message_type is None:
        setattr(msg, kind, True)
    elif kind == "backend_operation_request":
        request = msg.backend_operation_request
        request.request_id, request.session_id = "request-1", "viewer-session"
        getattr(request, payload).SetInParent()
    else:
        getattr(msg, kind).SetInParent()
    return msg


def every_message() -> list[BackMsg]:
    """One BackMsg of each type the installed Streamlit knows, each backend payload too."""
    messages = []
    for field in BackMsg.DESCRIPTOR.oneofs_by_name["type"].fields:
        if field.name == "backend_operation_request":
            payloads = field.message_type.oneofs_by_name["payload"].fields
            messages += [back_msg(field.name, p.name) for p in payloads]
        else:
            messages.append(back_msg(field.name))
    return messages


@pytest.fixture
def handled(monkeypatch):
    """AppSession.handle_backmsg guarded, in a room, over a handler that notes what reaches
    it; one presenter session."""
    reached: list[tuple[str, str]] = []
    monkeypatch.setattr(
        AppSession, "handle_backmsg", lambda s, m: reached.append((s.id, _roles.message_kind(m)))
    )
    monkeypatch.setattr(_roles, "_refused", set())
    _roles.guard_browser_messages()
    monkeypatch.setattr(_roles, "room_key", lambda: "a-key-of-sixteen-chars")
    _roles.role_table().make_presenter("presenter-session")
    return reached


def test_a_viewers_clear_cache_is_refused_and_logged_once(handled, caplog):
    viewer = SimpleNamespace(id="viewer-session")
    with caplog.at_level(logging.WARNING, logger="lab.room"):
        AppSession.handle_backmsg(viewer, back_msg("clear_cache"))
        AppSession.handle_backmsg(viewer, back_msg("clear_cache"))
    assert handled == []
    refusals = [r for r in caplog.records if "clear_cache message was refused" in r.message]
    assert len(refusals) == 1 and "viewer-session" not in refusals[0].message
    AppSession.handle_backmsg(SimpleNamespace(id="presenter-session"), back_msg("clear_cache"))
    assert handled == [("presenter-session", "clear_cache")]


def test_every_message_type_is_decided_for_viewers(handled, caplog):
    """Each BackMsg type of the installed Streamlit: what a viewer's page sends in ordinary use
    reaches its session, everything else is refused and logged once; the presenter's all pass.
    A Streamlit that adds a type fails here until the table in serving-a-room.md has it."""
    decided = {
        "rerun_script": True,
        "stop_script": True,
        "app_heartbeat": True,
        "set_run_on_save": True,
        "backend_operation_request (dataframe_chunk)": True,
        "clear_cache": False,
        "load_git_info": False,
        "file_urls_request": False,
        "debug_disconnect_websocket": False,  # never reaches a session: Streamlit's websocket
        "debug_shutdown_runtime": False,  # drops both outside its development modes
        "backend_operation_request (deferred_file)": False,
        "backend_operation_request (install_skills)": False,
        "backend_operation_request (dismiss_skills_nudge)": False,
    }
    messages = every_message()
    assert sorted(_roles.message_kind(m) for m in messages) == sorted(decided)
    viewer = SimpleNamespace(id="viewer-session")
    with caplog.at_level(logging.WARNING, logger="lab.room"):
        for msg in messages + messages:
            AppSession.handle_backmsg(viewer, msg)
    allowed = [kind for kind, ok in decided.items() if ok]
    assert sorted(handled) == sorted([("viewer-session", k) for k in allowed] * 2)
    refused = sorted(k for k, ok in decided.items() if not ok)
    logged = [r.getMessage() for r in caplog.records]
    assert sorted(logged) == sorted(
        f"A viewer's {k} message was refused (logged once a session for each kind)."
        for k in refused
    )
    assert not any("viewer-s" in line for line in logged)
    handled.clear()
    for msg in messages:
        AppSession.handle_backmsg(SimpleNamespace(id="presenter-session"), msg)
    assert len(handled) == len(messages)


def test_a_room_in_streamlits_development_mode_serves_nothing(monkeypatch):
    """There any browser could stop the server with a debug_shutdown_runtime message."""
    monkeypatch.setenv("LAB_PRESENTER_KEY", "a-key-of-sixteen-chars")
    monkeypatch.setattr(_roles, "bind_address", lambda: "0.0.0.0")
    assert _roles.room_key() == "a-key-of-sixteen-chars"
    for option in ("global.developmentMode", "global.e2eTest"):
        before = config.get_option(option)
        config.set_option(option, True)
        try:
            with pytest.raises(UnsafeRoomError, match="any browser may stop it"):
                _roles.room_key()
            assert not _roles.presents("any-session")
        finally:
            config.set_option(option, before)


def test_on_loopback_every_session_but_a_rehearsal_viewer_presents(monkeypatch):
    monkeypatch.setattr(_roles, "room_key", lambda: None)
    _roles.role_table().make_rehearsal_viewer("rehearsing")
    assert _roles.presents("any-session")
    assert not _roles.presents("rehearsing")


def test_wrong_keys_are_logged_without_the_key_and_wait_their_turn(monkeypatch, caplog):
    import threading
    import time

    monkeypatch.setattr(_roles, "WRONG_KEY_DELAY_S", 0.2)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="lab.room"):
        guesses = [threading.Thread(target=_roles.wrong_key_given) for _ in range(3)]
        for guess in guesses:
            guess.start()
        for guess in guesses:
            guess.join()
    assert time.monotonic() - began >= 0.6  # one at a time, from any number of tabs
    assert sum("wrong presenter key" in r.message for r in caplog.records) == 3


def test_refusals_of_ended_sessions_are_forgotten_past_a_bound(monkeypatch):
    """A refused message is logged once per session and kind; the memory of it does not grow
    with every session a long class has seen: past REFUSALS_KEPT, ended sessions' go."""
    live = {"still-here"}

    class Runtime:
        def is_active_session(self, session: str) -> bool:
            return session in live

    monkeypatch.setattr(_roles.runtime, "exists", lambda: True)
    monkeypatch.setattr(_roles.runtime, "get_instance", Runtime)
    monkeypatch.setattr(_roles, "_refused", set())
    _roles.refused_message("still-here", "clear_cache")
    for n in range(_roles.REFUSALS_KEPT):
        _roles.refused_message(f"gone-{n}", "clear_cache")
    assert _roles._refused == {("still-here", "clear_cache")}


def test_session_ids_in_streamlit_log_lines_are_shortened(caplog):
    _roles.hide_session_ids()
    session = "90828d49-5e78-41ed-b38f-089612e1c91c"
    with caplog.at_level(logging.WARNING):
        logging.getLogger("streamlit.lab_test").warning(  # one that propagates
            "Session with id %s is already connected!", session
        )
        logging.getLogger("lab.other").warning("not Streamlit's: %s", session)
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "Session with id 90828d49… is already connected!",
        f"not Streamlit's: {session}",
    ]
