"""The rules of serving a room: who is the presenter, and how keys are made and checked."""

from __future__ import annotations

import logging

import pytest

from engine.teach.room import (
    KEY_ENV,
    NotPresenterError,
    PresenterKeyError,
    configured_key,
    key_matches,
    make_key,
    presenter_links,
    refuse,
    serves_a_room,
)


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1", "LOCALHOST "])
def test_loopback_serves_one_person(address):
    assert not serves_a_room(address)


@pytest.mark.parametrize("address", ["0.0.0.0", "", None, "192.168.1.20", "::"])
def test_anything_else_serves_a_room(address):
    assert serves_a_room(address)


def test_a_room_takes_the_configured_key_and_refuses_an_empty_one():
    assert configured_key("0.0.0.0", {KEY_ENV: "s3cret-of-16-chars"}) == "s3cret-of-16-chars"
    assert configured_key("0.0.0.0", {}) is None  # ./lab dashboard then makes one
    assert configured_key("127.0.0.1", {KEY_ENV: ""}) is None  # loopback needs none
    with pytest.raises(PresenterKeyError, match="LAB_PRESENTER_KEY is empty"):
        configured_key("0.0.0.0", {KEY_ENV: "  "})


@pytest.mark.parametrize("key", ["1", "s3cret", "fifteen-chars-x"])
def test_a_room_refuses_a_short_key_in_one_line(key):
    with pytest.raises(PresenterKeyError, match=rf"has {len(key)} characters; .* at least 16"):
        configured_key("0.0.0.0", {KEY_ENV: key})


def test_made_keys_are_long_and_different_and_compared_exactly():
    a, b = make_key(), make_key()
    assert a != b and len(a) >= 24
    assert key_matches(a, a)
    assert not key_matches(a[:-1], a)
    assert not key_matches("", a)


def test_presenter_links_name_the_host_and_loopback():
    links = presenter_links("0.0.0.0", 8501, "k", "classroom")
    assert links == ["http://classroom:8501/?key=k", "http://127.0.0.1:8501/?key=k"]


def test_a_refusal_is_logged_without_the_session_id_in_full(caplog):
    with caplog.at_level(logging.WARNING, logger="lab.room"):
        error = refuse("start a run", "0123456789abcdef")
    assert isinstance(error, NotPresenterError)
    assert "Only the presenter can start a run" in str(error)
    assert "refused" in caplog.text and "01234567" in caplog.text
    assert "0123456789abcdef" not in caplog.text
