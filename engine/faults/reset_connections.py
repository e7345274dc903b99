"""reset-connections: the fault proxy resets every open connection (TCP RST) at once."""

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


class ResetConnections(FaultKind):
    name = "reset-connections"
    takes: frozenset[str] = frozenset()
    available = Availability(EVERY_BACKEND, why="the fault proxy resets them")
    reach = "proxy"
    words = "connections reset"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        proxy = require_proxy(nemesis, fault.kind)
        nemesis.record(fault.kind, connections=proxy.reset_connections())

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"{event.get('connections')} connection(s) reset"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return None  # the clients' reconnections are the evidence


KIND = ResetConnections()
