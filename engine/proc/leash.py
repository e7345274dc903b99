"""Processes that die with the process that started them, even when it is SIGKILLed.

A run's clients are OS processes. If the dashboard (their owner) dies by SIGKILL it runs no
clean-up code, and without more its clients are handed to init and go on for ever: retrying
a dead broker, or stopped (SIGSTOP) by a pause fault and never resumed. Three things end them:

1. The kernel. Between fork and exec (preexec_fn) each child asks for
   prctl(PR_SET_PDEATHSIG, SIGKILL): SIGKILL when its parent dies. SIGKILL ends even a
   stopped process, which can run no code of its own; set before exec, it holds from the
   child's first instruction, so a client stopped just after its start is covered too. The
   "parent" the kernel means is the *thread* that forked the child, not the process: a
   child forked by a run's worker thread (or a Streamlit script thread) would be killed when
   that thread ends. So every child is forked by one spawner thread here, which lives as
   long as the owner process.
2. The child itself. The kernel's signal is Linux only: the child checks its owner once at
   start and then once a second, and exits when the owner it was started by is gone.
3. The next owner. Each child is listed in the state folder (roles/PID.json, with the start
   times of it and of its owner, so a reused pid is never mistaken for it); a starting
   dashboard or run ends every listed process whose owner is gone (`sweep`).

    python -m engine.proc.leash MODULE ARGS...   (runs MODULE as __main__ in this same process)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from engine.base import paths, settings

OWNER_ENV = settings.LEASH_OWNER.name  # "PID:START_TICKS" of the process that started this one
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
CHECK_INTERVAL_S = 1.0


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if it cannot be read.

    Kept here, not in engine.cluster.pids (which uses it): the engine.cluster package imports
    the Kafka admin modules (0.18 s here), and every client starts through this module.
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie; without /proc (not Linux), whether a signal reaches it."""
    if pid <= 0:
        return False
    if Path("/proc/self/stat").exists():
        fields = proc_stat(pid)
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot: with the pid, names it uniquely."""
    fields = proc_stat(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 of stat; 3 is fields[0]
    except (IndexError, ValueError):
        return None


def registry_dir() -> Path:
    """Where each leashed process is listed while it may be running."""
    return paths.state_dir() / "roles"


class _Spawner:
    """One thread that forks every leashed child, and lives as long as this process.

    PR_SET_PDEATHSIG fires when the forking thread exits; a thread that never exits makes it
    fire exactly when the process dies.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def call(self, job: Callable[[], Any]) -> Any:
        with self._lock:
            # A forked copy of this process has no spawner thread: start one of its own.
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._serve, name="leash-spawner", daemon=True
                )
                self._thread.start()
        done: Future[Any] = Future()
        self._jobs.put((job, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                done.set_result(job())
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)


_SPAWNER = _Spawner()
_listed: set[int] = set()  # this process's children that are listed in the registry


def owner_token(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{pid}:{process_start_ticks(pid) or 0}"


def process_alive(token: str) -> bool:
    """Whether the process a "PID:START_TICKS" token names is still alive (not a reused pid)."""
    pid_text, _, ticks_text = token.partition(":")
    try:
        pid, ticks = int(pid_text), int(ticks_text or 0)
    except ValueError:
        return False
    if not pid_alive(pid):
        return False
    return not ticks or process_start_ticks(pid) in (None, ticks)


def spawn(
    module: str,
    args: Sequence[str],
    *,
    name: str = "",
    env: dict[str, str] | None = None,
    **popen: Any,
) -> subprocess.Popen:
    """`python -m MODULE ARGS` as a leashed child of this process (see the module's doc)."""
    command = [sys.executable, "-m", "engine.proc.leash", module, *args]
    return spawn_command(command, name=name or module, env=env, **popen)


def spawn_command(
    command: Sequence[str],
    *,
    name: str,
    env: dict[str, str] | None = None,
    **popen: Any,
) -> subprocess.Popen:
    """Any program as a leashed child. The kernel's signal (1) and the listing (3) hold for
    it; the owner check (2) is the program's own (a Java role: lab.common.Leash)."""
    token = owner_token()
    child_env = {**(env if env is not None else os.environ), OWNER_ENV: token}
    child: subprocess.Popen = _SPAWNER.call(
        lambda: subprocess.Popen(
            command, env=child_env, preexec_fn=_leash_in_child(os.getpid()), **popen
        )
    )
    _register(child.pid, token, name)
    return child


def _register(pid: int, owner: str, name: str) -> None:
    """List a child so that a later owner can end it if this one dies (best effort)."""
    entry = {
        "pid": pid,
        "start_ticks": process_start_ticks(pid) or 0,
        "owner": owner,
        "name": name,
        "listed_at": time.time(),
    }
    with contextlib.suppress(OSError):
        registry_dir().mkdir(parents=True, exist_ok=True)
        (registry_dir() / f"{pid}.json").write_text(json.dumps(entry))
        _listed.add(pid)


def forget(pid: int | None) -> None:
    """The child has exited and was reaped: it needs no listing any more."""
    if pid and pid in _listed:
        _listed.discard(pid)
        with contextlib.suppress(OSError):
            (registry_dir() / f"{pid}.json").unlink(missing_ok=True)


def sweep() -> list[int]:
    """End every listed process whose owner is gone; returns the pids it killed.

    A listed process is killed only if its own start time still matches (a reused pid is left
    alone); listings of processes that are gone are deleted.
    """
    killed = []
    folder = registry_dir()
    if not folder.is_dir():
        return killed
    for path in folder.glob("*.json"):
        try:
            entry = json.loads(path.read_text())
            pid, ticks, owner = int(entry["pid"]), int(entry["start_ticks"]), str(entry["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if process_alive(owner):
            continue  # its owner is alive and in charge of it
        if pid_alive(pid) and (not ticks or process_start_ticks(pid) == ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)  # ends a stopped process too
                killed.append(pid)
        with contextlib.suppress(OSError):
            path.unlink()
    return killed


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once here: the child between fork and exec must not load it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def _leash_in_child(owner_pid: int) -> Callable[[], None] | None:
    """What the child runs between fork and exec: SIGKILL when its parent thread exits.

    Set before exec, so there is no moment when the child runs without it: a client stopped
    by a pause fault just after its start (before any code of its own ran) is ended too.
    Only a pre-loaded C call and two system calls, as a forked copy of a threaded process
    must do no more. If the owner died already (between fork and prctl), exit at once.
    """
    prctl = _PRCTL
    if prctl is None:
        return None

    def leash_child() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != owner_pid:
            os._exit(70)

    return leash_child


def _watch_owner(owner: str, parent: int) -> None:
    """Exit at once when the owner is gone (where the kernel's signal is missing or late)."""
    while True:
        if os.getppid() != parent or not process_alive(owner):
            os._exit(70)  # no clean-up: the run it belonged to is over
        time.sleep(CHECK_INTERVAL_S)


def hold(owner: str | None = None) -> None:
    """Tie this process's life to its owner's (what `python -m engine.proc.leash` does first)."""
    owner = owner if owner is not None else settings.LEASH_OWNER.get() or ""
    if not owner:
        return
    parent = int(owner.partition(":")[0] or 0)
    if os.getppid() != parent or not process_alive(owner):
        os._exit(70)  # the owner died before this process got here
    threading.Thread(target=_watch_owner, args=(owner, parent), daemon=True).start()


def main(argv: Sequence[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m engine.proc.leash MODULE ARGS...")
    hold()
    module, *rest = argv
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
