"""Starting, signalling and stopping the role processes of a run.

Each client is an OS process so that the nemesis can SIGKILL it (a crash), SIGSTOP it (a
zombie that stalls) and SIGCONT it (the zombie wakes up), exactly as it would a real service.
Each is started on a leash (engine/leash.py): it dies with the process that started it, even
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

from engine import java_roles, leash, paths


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
    java: bool = False  # `role` is a main class in java/ (engine/java_roles.py)

    @property
    def base(self) -> str:
        return self.name.split("#")[0]

    def start(self, folder: Path) -> RoleProcess:
        spec_path = folder / f"{self.name.replace('#', '-')}.spec.json"
        spec_path.write_text(json.dumps(self.spec, indent=1, default=str))
        log = (folder / f"{self.name.replace('#', '-')}.log").open("ab")
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
        if self.popen.poll() is None:
            return True
        leash.forget(self.popen.pid)  # exited and reaped: no later dashboard need end it
        return False

    def kill(self) -> None:
        """SIGKILL: no clean-up, no flush, no commit."""
        if self.alive():
            os.kill(self.popen.pid, signal.SIGKILL)  # type: ignore[union-attr]
            self.popen.wait(10)  # type: ignore[union-attr]
            leash.forget(self.pid)
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
            leash.forget(self.pid)
        except subprocess.TimeoutExpired:
            self.kill()

    def wait(self, timeout: float) -> bool:
        try:
            self.popen.wait(timeout)  # type: ignore[union-attr]
            leash.forget(self.pid)
            return True
        except subprocess.TimeoutExpired:
            return False
