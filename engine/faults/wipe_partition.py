"""wipe-partition: delete a killed node's copy of partition 0 (the partition's directory)
while it is down; its other data, meta.properties included, stays, so it is neither a lost
nor a replaced disk (KIP-858). `target`: the node kill-leader or kill-follower took down."""

from __future__ import annotations

from typing import Any

from engine.faults.base import HURT, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams

NODE_TARGETS = ("leader", "follower")


def check_node_target(kind: str, target: str | None) -> None:
    """A node fault's target names the node a kill took down: leader or follower."""
    if target not in (None, *NODE_TARGETS):
        raise ValueError(
            f"{kind} takes target: leader or target: follower (the node that "
            f"kill-leader or kill-follower took down), not '{target}'"
        )


class WipePartition(FaultKind):
    name = "wipe-partition"
    takes = frozenset({"target"})
    available = Availability(OWN_BROKERS, why="the lab must own the brokers' disks")
    reach = "brokers"
    words = "a replica's partition directory deleted"
    colour = HURT
    default_target = "leader"

    def check(self, fault: FaultParams) -> None:
        check_node_target(self.name, fault.target)

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        role = fault.target or self.default_target
        node = nemesis.node_roles.get(role)
        if node is None or node not in nemesis.killed_nodes:
            nemesis.record("wipe-skipped", target=role, reason=f"no {role} node is down")
            return
        topic = nemesis.ctx.topic
        nemesis.ctx.cluster.wipe_partition(node, topic, 0)
        nemesis.record(fault.kind, node=node, target=role, partition=f"{topic}-0")

    def live(self, event: dict[str, Any], point: str) -> str:
        return (
            f"node {event.get('node')}'s copy of {event.get('partition')} "
            "deleted while it is down (the partition's directory; its other data stays)"
        )

    def short(self, event: dict[str, Any]) -> str | None:
        return f"node {event.get('node')}'s copy of the partition deleted"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return (
            f"While node {event.get('node')} was down, its copy of {event.get('partition')} was "
            "deleted; its other data stayed, meta.properties included (a replaced disk would "
            "have to be formatted again, with a new directory id: KIP-858)."
        )


KIND = WipePartition()
