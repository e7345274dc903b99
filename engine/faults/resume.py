"""resume: SIGCONT of what this level's nemesis froze of `target` (the processor unless it
says): a frozen instance wakes, a zombie if a replacement took its place meanwhile."""

from __future__ import annotations

from typing import Any

from engine.faults.base import (
    EVERY_BACKEND,
    HURT,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
)
from engine.faults.params import FaultParams


class Resume(FaultKind):
    name = "resume"
    takes = frozenset({"target"})
    available = Availability(EVERY_BACKEND, why="a signal to the lab's own client process")
    reach = "level"
    on_process = True
    words = "woken"
    colour = HURT  # a resume after its pause closes the pause's band instead
    default_target = "processor"
    free_play = FreePlayControl(
        strike="wake-processor",
        label="☀️ Wake it",
        help="SIGCONT of the processors frozen before.",
        order=4,
        params=lambda settings: {"target": "processor"},
        note=lambda settings: "Frozen processors woken (SIGCONT).",
    )

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        target = fault.target or self.default_target
        frozen = [p for p in nemesis.frozen if p.base == target]
        if not frozen:
            nemesis.record("resume-skipped", target=target, reason="nothing of it is frozen")
        for process in frozen:
            nemesis.wake(process)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"{event.get('target')} woke (SIGCONT)"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"{event.get('target')} woke up (SIGCONT)."


KIND = Resume()
