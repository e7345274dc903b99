"""The room's state is kept where no browser message can clear it, and a viewer's clear_cache
message is refused (issue 60: one viewer's message emptied the presenter's role table)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import streamlit as st
from streamlit.runtime.app_session import AppSession

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


def test_a_viewers_clear_cache_is_refused_and_logged_once(monkeypatch, caplog):
    cleared = []
    monkeypatch.setattr(AppSession, "_handle_clear_cache_request", lambda s: cleared.append(s.id))
    _roles.guard_clear_cache()
    monkeypatch.setattr(_roles, "room_key", lambda: "a-key-of-sixteen-chars")
    table = _roles.role_table()
    table.make_presenter("presenter-session")
    viewer = SimpleNamespace(id="viewer-session")
    with caplog.at_level(logging.WARNING, logger="lab.room"):
        AppSession._handle_clear_cache_request(viewer)
        AppSession._handle_clear_cache_request(viewer)
    assert cleared == []
    refusals = [r for r in caplog.records if "clear_cache message was refused" in r.message]
    assert len(refusals) == 1 and "viewer-session" not in refusals[0].message
    AppSession._handle_clear_cache_request(SimpleNamespace(id="presenter-session"))
    assert cleared == ["presenter-session"]


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
