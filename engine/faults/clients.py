"""Helpers the client faults share (crash, pause): where an armed fault point stops a role."""

from __future__ import annotations

from typing import Any

from engine.faults.base import NemesisState
from engine.faults.params import FaultParams
from engine.proc.failpoints import FailPoint

# Where a fault point can sit: events a role writes one at a time through
# HistoryWriter.write (None: every event). The producer writes its send and ack lines in
# bulk, for speed, so only its transaction steps can carry a point.
ARMABLE_EVENTS: dict[str, frozenset[str] | None] = {
    "processor": None,
    "producer": frozenset({"txn_init", "txn_begin", "txn_flushed", "txn_commit", "txn_abort"}),
}


def point_for(fault: FaultParams, target: str) -> FailPoint | None:
    """The fault point `target` needs armed, if the fault's trigger is the target's own event."""
    when = fault.when
    if when.event is None or when.process != target or target not in ARMABLE_EVENTS:
        return None
    events = ARMABLE_EVENTS[target]
    if events is not None and when.event not in events:
        return None
    return FailPoint(when.event, when.count)


def where_stopped(nemesis: NemesisState, fault: FaultParams, target: str) -> dict[str, Any]:
    """Where the target stood when the signal hit it, for the record and the page."""
    point = point_for(fault, target)
    if point is None:
        return {}
    reached = nemesis.stopped_at.get(target, {})
    return {"point": point.name, "at": reached.get("at")}
