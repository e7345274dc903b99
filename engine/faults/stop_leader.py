"""stop-leader: a clean shutdown (SIGTERM) of the partition's leader, which asks the
controller to move its partitions' leadership to an in-sync replica before it goes."""

from __future__ import annotations

from typing import Any

from engine.faults import nodes
from engine.faults.base import HURT, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams
from engine.model.events import NemesisRecord


class StopLeader(FaultKind):
    name = "stop-leader"
    takes: frozenset[str] = frozenset()
    available = Availability(OWN_BROKERS, why="the lab must own the broker processes")
    reach = "brokers"
    words = "partition leader shut down cleanly"
    colour = HURT
    takes_leader_away = True

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        leader = nodes.leader(nemesis)
        nemesis.record(fault.kind, node=leader, signal="SIGTERM")
        nemesis.ctx.cluster.stop_node(leader)
        nemesis.killed_nodes.add(leader)
        nemesis.node_roles["leader"] = leader
        nemesis.record(NemesisRecord.NODE_STOPPED, node=leader)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"broker node {event.get('node')} shut down cleanly (SIGTERM; the leader)"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return (
            f"The leader, node {event.get('node')}, was shut down cleanly (SIGTERM): a "
            "broker that stops cleanly asks the controller to move its partitions' leadership "
            "to an in-sync replica first."
        )


KIND = StopLeader()
