"""The processor's watchdog over transactional calls that librdkafka may not time out."""

from __future__ import annotations

import threading

import pytest

from engine.roles import processor
from engine.roles.processor import HungCallError, bounded


def test_a_call_that_returns_in_time_is_made_once():
    calls = []
    bounded("commit_transaction", lambda: calls.append(1), 1)
    assert calls == [1]


def test_a_call_that_raises_hands_its_error_to_the_caller():
    def fails() -> None:
        raise ValueError("abortable")

    with pytest.raises(ValueError, match="abortable"):
        bounded("commit_transaction", fails, 1)


def test_a_call_blocked_past_its_timeout_is_given_up_with_the_reason(monkeypatch):
    monkeypatch.setattr(processor, "HANG_MARGIN_S", 0.1)
    release = threading.Event()
    try:
        with pytest.raises(HungCallError, match=r"send_offsets_to_transaction\(\) had not"):
            bounded("send_offsets_to_transaction", lambda: release.wait(30), 0.1)
    finally:
        release.set()  # the blocked worker thread ends
