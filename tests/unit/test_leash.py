"""Leashed processes die with their owner, even a SIGKILLed one, even while stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.base import paths
from engine.proc import leash

# The owner starts each child from a short-lived thread, as a run's level threads and
# Streamlit's script threads do: the kernel's parent-death signal must not fire when that
# thread ends, only when the owner process dies.
OWNER = """
import subprocess, sys, threading, time
from engine.proc import leash
pids = []
def start():
    child = leash.spawn("tests.leash_sleeper", [], stdin=subprocess.DEVNULL,
                        start_new_session=True)
    pids.append(child.pid)
threads = [threading.Thread(target=start) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join(map(str, pids)), flush=True)
time.sleep(600)
"""


def start_owner(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    env = {**os.environ, "LAB_STATE_DIR": str(tmp_path), "PYTHONPATH": str(paths.REPO_ROOT)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        cwd=paths.REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert owner.stdout is not None
    return owner, [int(p) for p in owner.stdout.readline().split()]


def wait_all_gone(pids: list[int], timeout: float) -> float | None:
    """Seconds until no pid is alive (a zombie counts as gone), or None after `timeout`."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if not any(leash.pid_alive(p) for p in pids):
            return time.monotonic() - began
        time.sleep(0.05)
    return None


def test_children_outlive_the_thread_that_started_them_and_die_with_the_owner(tmp_path):
    owner, pids = start_owner(tmp_path)
    try:
        assert len(pids) == 3
        time.sleep(1.5)  # the starting threads ended long ago, each child's check ran once
        assert all(leash.pid_alive(p) for p in pids)
        assert sorted(int(p.stem) for p in (tmp_path / "roles").glob("*.json")) == sorted(pids)
        os.kill(pids[0], signal.SIGSTOP)  # as a pause fault leaves a client
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        took = wait_all_gone(pids, 20)
        assert took is not None, [p for p in pids if leash.pid_alive(p)]
        assert took < 3, f"the children took {took:.1f} s to die"
    finally:
        owner.kill()
        for pid in pids:
            if leash.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_child_whose_owner_is_already_gone_does_not_start(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    env = {**os.environ, leash.OWNER_ENV: f"{dead.pid}:1", "PYTHONPATH": str(paths.REPO_ROOT)}
    child = subprocess.run(
        [sys.executable, "-m", "engine.proc.leash", "tests.leash_sleeper"],
        cwd=paths.REPO_ROOT,
        env=env,
        timeout=20,
    )
    assert child.returncode == 70


def listed(tmp_path: Path, pid: int, owner: str, ticks: int | None = None) -> Path:
    folder = tmp_path / "roles"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {
        "pid": pid,
        "start_ticks": leash.process_start_ticks(pid) if ticks is None else ticks,
        "owner": owner,
        "name": "sleeper",
    }
    path = folder / f"{pid}.json"
    path.write_text(json.dumps(entry))
    return path


def sleeper() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.leash_sleeper"], cwd=paths.REPO_ROOT, start_new_session=True
    )


def test_a_starting_owner_ends_what_a_dead_one_left_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan, kept, reused = sleeper(), sleeper(), sleeper()
    try:
        os.kill(orphan.pid, signal.SIGSTOP)  # stopped: it can run no code of its own
        orphan_entry = listed(tmp_path, orphan.pid, f"{dead.pid}:1")
        kept_entry = listed(tmp_path, kept.pid, leash.owner_token())  # its owner is alive
        # The same pid with another start time is another process: never killed.
        reused_entry = listed(tmp_path, reused.pid, f"{dead.pid}:1", ticks=1)
        assert leash.sweep() == [orphan.pid]
        assert orphan.wait(5) == -signal.SIGKILL
        assert kept.poll() is None and reused.poll() is None
        assert not orphan_entry.exists() and not reused_entry.exists()
        assert kept_entry.exists()
    finally:
        for proc in (orphan, kept, reused):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("text", ["", "{", '{"pid": "x"}'])
def test_a_damaged_listing_is_dropped(tmp_path, monkeypatch, text):
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path))
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "1.json").write_text(text)
    assert leash.sweep() == []
    assert not (tmp_path / "roles" / "1.json").exists()
