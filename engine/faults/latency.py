"""latency: the fault proxy delays every connection's traffic by `ms`."""

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


class Latency(FaultKind):
    name = "latency"
    takes = frozenset({"ms"})
    available = Availability(EVERY_BACKEND, why="the fault proxy delays it")
    reach = "proxy"
    words = "network slowed"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        proxy = require_proxy(nemesis, fault.kind)
        nemesis.proxy_wide = True
        proxy.set_latency(fault.ms or 0.0)
        nemesis.record(fault.kind, ms=fault.ms or 0.0)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"network latency set to {event.get('ms')} ms"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return None  # the latencies measured are the evidence


KIND = Latency()
