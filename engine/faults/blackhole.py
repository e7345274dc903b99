"""blackhole: the fault proxy cuts every connection for `duration_s`, then flushes what it
held or resets the connections (`then`)."""

from __future__ import annotations

from typing import Any

from engine.faults.base import (
    EVERY_BACKEND,
    HURT,
    Availability,
    FaultKind,
    NemesisState,
    require_proxy,
)
from engine.faults.params import FaultParams


class Blackhole(FaultKind):
    name = "blackhole"
    takes = frozenset({"duration_s", "then"})
    available = Availability(EVERY_BACKEND, why="the fault proxy cuts it")
    reach = "proxy"
    words = "network cut"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        proxy = require_proxy(nemesis, fault.kind)
        nemesis.proxy_wide = True
        proxy.blackhole(fault.duration_s or 1.0, then=fault.then)
        nemesis.record(fault.kind, duration_s=fault.duration_s or 1.0, then=fault.then)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"network cut for {event.get('duration_s')} s (blackhole)"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return None  # the timeline's band shows it; the clients' errors are the evidence


KIND = Blackhole()
