"""kill-follower: SIGKILL of one follower of the partition (not the active controller where
the placement allows): the ISR shrinks once the leader stops hearing from it."""

from __future__ import annotations

from typing import Any

from engine.faults import nodes
from engine.faults.base import KILLED, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams


class KillFollower(FaultKind):
    name = "kill-follower"
    takes: frozenset[str] = frozenset()
    available = Availability(
        OWN_BROKERS, min_nodes=2, why="a follower, on a broker process the lab owns"
    )
    reach = "brokers"
    words = "follower killed"
    colour = KILLED
    kills_node = "follower"

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        if (picked := nodes.calm_follower(nemesis, fault.kind)) is None:
            return
        leader, controller, node = picked
        nemesis.ctx.cluster.kill_node(node)
        nemesis.killed_nodes.add(node)
        nemesis.node_roles["follower"] = node
        nemesis.record(fault.kind, node=node, leader=leader, controller=controller)

    def live(self, event: dict[str, Any], point: str) -> str:
        return (
            f"follower node {event.get('node')} killed (the leader is node {event.get('leader')})"
        )

    def short(self, event: dict[str, Any]) -> str | None:
        return f"follower node {event.get('node')} killed"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return (
            f"Follower node {event.get('node')} was killed (SIGKILL); node "
            f"{event.get('leader')} led the partition."
        )


KIND = KillFollower()
