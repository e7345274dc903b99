"""crash: SIGKILL of one of the level's clients (the producer unless `target` says), and,
with `replace`, a replacement started at once (the application's choice: a supervisor)."""

from __future__ import annotations

from typing import Any

from engine.faults.base import (
    EVERY_BACKEND,
    KILLED,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
)
from engine.faults.clients import where_stopped
from engine.faults.params import FaultParams


class Crash(FaultKind):
    name = "crash"
    takes = frozenset({"target", "replace", "resend_unacked"})
    available = Availability(EVERY_BACKEND, why="a signal to the lab's own client process")
    reach = "level"
    on_process = True
    words = "killed"
    colour = KILLED
    default_target = "producer"
    stops_at_point = True
    free_play = FreePlayControl(
        strike="kill-processor",
        label="💀 Kill the processor",
        help="SIGKILL of each level's processor; a replacement starts at once.",
        order=2,
        params=lambda settings: {"target": "processor", "replace": True},
        note=lambda settings: "Processors killed (SIGKILL); a replacement started for each.",
    )

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        target = fault.target or self.default_target
        process = nemesis.ctx.processes(target)
        if process is None:
            nemesis.record("crash-skipped", target=target, reason="no live instance")
            return
        process.kill()
        nemesis.record(
            "crash",
            target=process.name,
            pid=process.pid,
            signal="SIGKILL",
            **where_stopped(nemesis, fault, target),
        )
        if fault.replace:
            nemesis.ctx.replace(target, fault)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"{event.get('target')} killed (SIGKILL){point}"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"{event.get('target')} was killed (SIGKILL){' ' + where if where else ''}."


KIND = Crash()
