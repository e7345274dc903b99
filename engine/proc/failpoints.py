"""Fault points: a role stops itself at a named program point, so the real signal lands there.

Named after etcd's robustness failpoints (`BeforeCommitPanic`): the point is a place in the
client's code, armed from outside, and the test waits until the process has really stopped.
Here a point is "right after the role writes its `count`-th `event` to its history" (for
example the processor's second `commit_gap`). The runner arms it in the role's spec; when the
role reaches it, the role makes its history durable, writes `failpoint_reached`, and sends
itself SIGSTOP. Every thread stops with it, librdkafka's included, so nothing moves on.
The nemesis sees the process stopped and acts on it for real: SIGKILL for a crash; for a
pause it leaves it stopped, and wakes it with SIGCONT later.

Without this, the nemesis learns of events by reading history files a moment late, and a
crash meant for "after output 6, before the commit" can land after the commit.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.model.events import Event


@dataclass(frozen=True)
class FailPoint:
    """Stop right after the `count`-th `event` that the role writes."""

    event: str
    count: int

    @property
    def name(self) -> str:
        return f"after {self.event} #{self.count}"

    def to_spec(self) -> dict[str, Any]:
        return {"event": self.event, "count": self.count}

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> FailPoint | None:
        return cls(str(spec["event"]), int(spec["count"])) if spec else None


class _Writer(Protocol):
    def write(self, ev: str, **attrs: Any) -> None: ...
    def flush(self) -> None: ...


class ArmedFailPoint:
    """A role's side of a fault point: counts the role's own events and stops it on cue."""

    def __init__(self, point: FailPoint) -> None:
        self.point = point
        self.seen = 0
        self.reached = False

    def after(self, ev: str, attrs: dict[str, Any], history: _Writer) -> None:
        """Called by the history writer once an event's line is written."""
        if self.reached or ev != self.point.event:
            return
        self.seen += 1
        if self.seen < self.point.count:
            return
        self.reached = True
        # Where the role stands, from the event itself (the processor's commit_gap carries
        # the batch's offsets and what is committed), so the page can name the point.
        history.write(Event.FAILPOINT_REACHED, point=self.point.name, at={"ev": ev, **attrs})
        history.flush()
        os.kill(os.getpid(), signal.SIGSTOP)
        # Execution resumes here after SIGCONT (a paused zombie), exactly where it stopped.


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (R, S, T for stopped, Z...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: the state follows the last ")".
    return stat.rsplit(")", 1)[1].split()[0]


def wait_stopped(pid: int, timeout: float = 10.0) -> bool:
    """Wait until the process is stopped by a signal (state T); False if it exited or timed out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = process_state(pid)
        if state in ("T", "t"):
            return True
        if state is None or state in ("Z", "X"):
            return False
        time.sleep(0.005)
    return False
