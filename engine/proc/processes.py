"""Starting, signalling and stopping the role processes of a run.

Each client is an OS process so that the nemesis can SIGKILL it (a crash), SIGSTOP it (a
zombie that stalls) and SIGCONT it (the zombie wakes up), exactly as it would a real service.
Each is started on a leash (engine/proc/leash.py): it dies with the process that started it, even
one killed by SIGKILL, and even while it is stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base import paths
from engine.proc import java_roles, leash


@dataclass
class RoleProcess:
    name: str  # "producer", "producer#2", "processor", "sink", ...
    role: str  # module under engine.roles, or a Java role's main class (java_main)
    history: Path
    spec: dict[str, Any]
    popen: subprocess.Popen | None = None
    paused: bool = False
    killed: bool = False
    started_at: float = field(default_factory=time.time)
    java: bool = False  # `role` is a main class in java/ (engine/proc/java_roles.py)
    log_path: Path | None = None
    exit_code: int | None = None  # once it has exited and been reaped
    ended_at: float | None = None  # when the lab saw it gone

    @property
    def base(self) -> str:
        return self.name.split("#")[0]

    def start(self, folder: Path) -> RoleProcess:
        spec_path = folder / f"{self.name.replace('#', '-')}.spec.json"
        spec_path.write_text(json.dumps(self.spec, indent=1, default=str))
        self.log_path = folder / f"{self.name.replace('#', '-')}.log"
        log = self.log_path.open("ab")
        env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)}
        io: dict[str, Any] = {
            "env": env,
            "stdout": log,
            "stderr": subprocess.STDOUT,
            "stdin": subprocess.DEVNULL,
            "start_new_session": True,  # a Ctrl+C in the terminal is the runner's to handle
        }
        name = f"{self.name} of {folder}"
        if self.java:
            command = java_roles.java_command(self.role, str(spec_path))
            self.popen = leash.spawn_command(command, name=name, **io)
        else:
            self.popen = leash.spawn(f"engine.roles.{self.role}", [str(spec_path)], name=name, **io)
        log.close()
        self.started_at = time.time()
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        if self.popen is None:
            return False
        code = self.popen.poll()
        if code is None:
            return True
        if self.exit_code is None:
            self.exit_code = code
            self.ended_at = time.time()
            leash.forget(self.popen.pid)  # exited and reaped: no later dashboard need end it
            self._note_exit(code)
        return False

    def _note_exit(self, code: int) -> None:
        """The exit code at the end of the role's log: a role that dies without a word (a
        silent SIGKILL, its leash's halt) still says how it ended."""
        if self.log_path is None:
            return
        with contextlib.suppress(OSError), self.log_path.open("a") as log:
            log.write(f"[lab] {self.name} {exit_words(code, killed=self.killed)}\n")

    def died_outside_the_lab(self) -> str | None:
        """How it died, when a signal the lab did not send ended it (a person's kill, the OOM
        killer); None while it lives or when it ended on its own or by the lab's hand."""
        if self.alive() or self.exit_code is None or self.exit_code >= 0 or self.killed:
            return None
        when = time.strftime("%H:%M:%S", time.localtime(self.ended_at or time.time()))
        return f"{self.name} {exit_words(self.exit_code)} at {when}"

    def kill(self) -> None:
        """SIGKILL: no clean-up, no flush, no commit."""
        if self.alive():
            self.killed = True
            os.kill(self.popen.pid, signal.SIGKILL)  # type: ignore[union-attr]
            self.popen.wait(10)  # type: ignore[union-attr]
            self.alive()  # reaped: its exit noted
        self.killed = True

    def pause(self) -> None:
        if self.alive():
            os.kill(self.popen.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            self.paused = True

    def resume(self) -> None:
        if self.alive() and self.paused:
            os.kill(self.popen.pid, signal.SIGCONT)  # type: ignore[union-attr]
        self.paused = False

    def stop(self, timeout: float = 10.0) -> None:
        """Ask it to finish (SIGTERM), then make sure (SIGKILL)."""
        if not self.alive():
            return
        self.resume()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)  # type: ignore[union-attr]
        try:
            self.popen.wait(timeout)  # type: ignore[union-attr]
            self.alive()  # reaped: its exit noted
        except subprocess.TimeoutExpired:
            self.kill()

    def wait(self, timeout: float) -> bool:
        try:
            self.popen.wait(timeout)  # type: ignore[union-attr]
            self.alive()  # reaped: its exit noted
            return True
        except subprocess.TimeoutExpired:
            return False


# Exit codes the lab's roles give themselves (engine/roles, java/.../roles).
ROLE_EXIT_CODES = {
    0: "finished",
    3: "stopped on an error it wrote to its history",
    4: "gave up on a client call that hung",
    70: "halted by its leash: the process that started it was gone",
}


def exit_words(code: int, *, killed: bool = False) -> str:
    """How a role's process ended, from its exit code: "exited 70 (halted by its leash...)"."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        by = (
            "from the lab (the scenario's crash, or the run's end)"
            if killed
            else "not from the lab (the kernel's parent-death signal, the OOM killer, a person)"
        )
        return f"was ended by {name}, {by}"
    return f"exited {code} ({ROLE_EXIT_CODES.get(code, 'a code the lab does not give')})"
