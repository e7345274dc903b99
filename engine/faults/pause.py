"""pause: SIGSTOP of one of the level's clients (the processor unless `target` says); with
`replace` a replacement starts while it is frozen (the application's choice: an orchestrator
that gives up on a stalled instance), and with `duration_s` it is woken (SIGCONT) after that
long, a zombie beside its replacement."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from engine.faults.base import (
    EVERY_BACKEND,
    FROZEN,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
)
from engine.faults.clients import where_stopped
from engine.faults.params import FaultParams

if TYPE_CHECKING:  # named in annotations only: no run-time dependency
    from engine.proc.processes import RoleProcess


def _frozen_note(settings: Any) -> str:
    then = "a replacement started for each" if settings.replace_frozen else "no replacement"
    return f"Processors frozen (SIGSTOP); {then}."


class Pause(FaultKind):
    name = "pause"
    takes = frozenset({"target", "replace", "resend_unacked", "duration_s"})
    available = Availability(EVERY_BACKEND, why="a signal to the lab's own client process")
    reach = "level"
    on_process = True
    words = "frozen"
    colour = FROZEN
    default_target = "processor"
    stops_at_point = True
    ended_by = "resume"  # a band on the timeline until the resume that wakes it
    free_play = FreePlayControl(
        strike="freeze-processor",
        label="🧊 Freeze the processor",
        help="SIGSTOP of each level's processor.",
        order=3,
        params=lambda settings: {"target": "processor", "replace": settings.replace_frozen},
        note=_frozen_note,
    )

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        target = fault.target or self.default_target
        process = nemesis.ctx.processes(target)
        if process is None:
            nemesis.record("pause-skipped", target=target, reason="no live instance")
            return
        process.pause()  # stopped already at an armed point: this only marks it paused
        nemesis.frozen.append(process)
        nemesis.record(
            "pause",
            target=process.name,
            pid=process.pid,
            signal="SIGSTOP",
            **where_stopped(nemesis, fault, target),
        )
        if fault.replace:
            nemesis.ctx.replace(target, fault)
        if fault.duration_s:

            def wake(p: RoleProcess = process) -> None:
                if p in nemesis.frozen:  # not woken already by a `resume` fault
                    nemesis.wake(p)

            nemesis.timed_resumes.append((time.time() + fault.duration_s, wake))

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"{event.get('target')} frozen (SIGSTOP){point}"

    def lasting(self, event: dict[str, Any]) -> tuple[str, str]:
        return f"{event.get('target')} frozen", str(event.get("signal") or "SIGSTOP")

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"{event.get('target')} was frozen (SIGSTOP){' ' + where if where else ''}."


KIND = Pause()
