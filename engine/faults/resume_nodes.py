"""resume-nodes: SIGCONT of every broker node this level's nemesis froze."""

from __future__ import annotations

from typing import Any

from engine.faults.base import HURT, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams
from engine.model.words import nodes_words


class ResumeNodes(FaultKind):
    name = "resume-nodes"
    takes: frozenset[str] = frozenset()
    available = Availability(OWN_BROKERS, why="the lab must own the broker processes")
    reach = "brokers"
    words = "brokers woken"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        for node in sorted(nemesis.paused_nodes):
            nemesis.ctx.cluster.resume_node(node)
        nemesis.record(fault.kind, nodes=sorted(nemesis.paused_nodes))
        nemesis.paused_nodes.clear()

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"{nodes_words(event.get('nodes'))} resumed"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"{nodes_words(event.get('nodes') or [])} resumed (SIGCONT)."


KIND = ResumeNodes()
