"""kill-leader: SIGKILL of the broker that leads the level's partition (its JVM, or its
container): no clean shutdown, no hand-over; the controller elects a new leader from the ISR."""

from __future__ import annotations

from typing import Any

from engine.faults import nodes
from engine.faults.base import (
    KILLED,
    OWN_BROKERS,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
)
from engine.faults.params import FaultParams


class KillLeader(FaultKind):
    name = "kill-leader"
    takes: frozenset[str] = frozenset()
    available = Availability(OWN_BROKERS, why="the lab must own the broker processes")
    reach = "brokers"
    words = "partition leader killed"
    colour = KILLED
    takes_leader_away = True
    kills_node = "leader"
    # Free play fires it on the first level and records it in the others (engine.run.freeplay).
    free_play = FreePlayControl(
        strike="kill-leader",
        label="🔌 Kill the partition leader",
        help="SIGKILL of the broker JVM that leads every level's partitions.",
        order=5,
        needs_broker_faults=True,
        broker_step="down",
    )

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        leader = nodes.leader(nemesis)
        nemesis.ctx.cluster.kill_node(leader)
        nemesis.killed_nodes.add(leader)
        nemesis.node_roles["leader"] = leader
        nemesis.record(fault.kind, node=leader)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"broker node {event.get('node')} killed (the leader)"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"The leader, node {event.get('node')}, was killed (SIGKILL)."


KIND = KillLeader()
