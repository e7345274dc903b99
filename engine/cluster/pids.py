"""Processes the lab started, by pid: alive, paused, signalled with their group, gone.

The embedded nodes and the fault proxy run in sessions of their own; every backend stops,
pauses and resumes them through these functions.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from engine.proc.leash import pid_alive as leash_pid_alive
from engine.proc.leash import proc_stat


def _proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (R, S, T, Z, ...), or None if it is gone."""
    fields = proc_stat(pid)
    return fields[0] if fields else None


def pid_alive(pid: int | None) -> bool:
    return pid is not None and leash_pid_alive(pid)


def pid_paused(pid: int | None, recorded: bool) -> bool:
    if not pid:
        return False
    if Path("/proc").is_dir():
        return _proc_state(pid) in ("T", "t")
    return recorded


def _signal_group(pid: int, sig: int) -> None:
    """Signal a process and the group it leads (each node is started in its own session)."""
    for target in (lambda: os.killpg(pid, sig), lambda: os.kill(pid, sig)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()


def _wait_for_state(pid: int | None, *, paused: bool, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        if pid_paused(pid, paused) == paused:
            return
        time.sleep(0.02)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Reap it if it is our child, so it does not linger as a zombie.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False
