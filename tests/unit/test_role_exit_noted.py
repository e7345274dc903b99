"""A role that dies without a word still says how it ended, at the end of its log."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine.proc.processes import RoleProcess, exit_words


def ended(tmp_path: Path, script: str, *, lab_kills: bool = False) -> str:
    log = tmp_path / "producer.log"
    log.write_text("started\n")
    process = RoleProcess("producer", "producer", tmp_path / "h.jsonl", {}, log_path=log)
    process.popen = subprocess.Popen(["sh", "-c", script])
    if lab_kills:
        process.kill()
    else:
        process.popen.wait(10)
        assert not process.alive()
    assert not process.alive()  # noted once, however often it is asked
    return log.read_text()


def test_a_silent_sigkill_not_from_the_lab_is_said(tmp_path):
    text = ended(tmp_path, "kill -9 $$")
    assert text.count("[lab]") == 1
    assert "ended by SIGKILL, not from the lab" in text


def test_the_labs_own_kill_is_said_as_the_labs(tmp_path):
    """The contrast: the same signal, sent by the scenario's crash."""
    text = ended(tmp_path, "sleep 30", lab_kills=True)
    assert "ended by SIGKILL, from the lab" in text


@pytest.mark.parametrize(
    ("code", "words"),
    [(0, "finished"), (70, "leash"), (3, "error"), (9, "does not give")],
)
def test_exit_codes_in_words(code, words):
    assert words in exit_words(code)


def test_a_role_killed_from_outside_the_lab_is_named_with_when_and_how(tmp_path):
    process = RoleProcess("producer#2", "producer", tmp_path / "h.jsonl", {})
    process.popen = subprocess.Popen(["sh", "-c", "kill -9 $$"])
    process.popen.wait(10)
    how = process.died_outside_the_lab()
    assert how is not None and how.startswith("producer#2 was ended by SIGKILL, not from the lab")
    assert " at " in how


@pytest.mark.parametrize("script", ["exit 0", "exit 3", "sleep 30"])
def test_a_role_that_ends_on_its_own_or_by_the_lab_or_lives_is_not_outside_death(tmp_path, script):
    process = RoleProcess("producer", "producer", tmp_path / "h.jsonl", {})
    process.popen = subprocess.Popen(["sh", "-c", script])
    if script.startswith("sleep"):
        assert process.died_outside_the_lab() is None  # alive
        process.kill()  # the scenario's crash
    else:
        process.popen.wait(10)
    assert process.died_outside_the_lab() is None
