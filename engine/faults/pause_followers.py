"""pause-followers: SIGSTOP of every node but the partition's leader: an acks=all write
waits for followers that cannot answer."""

from __future__ import annotations

from typing import Any

from engine.faults import nodes
from engine.faults.base import HURT, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams


class PauseFollowers(FaultKind):
    name = "pause-followers"
    takes: frozenset[str] = frozenset()
    available = Availability(
        OWN_BROKERS, min_nodes=2, why="followers, on broker processes the lab owns"
    )
    reach = "brokers"
    words = "followers frozen"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        leader = nodes.leader(nemesis)
        cluster = nemesis.ctx.cluster
        followers = [n for n in cluster.node_ids if n != leader]
        for node in followers:
            cluster.pause_node(node)
            nemesis.paused_nodes.add(node)
        nemesis.record(fault.kind, nodes=followers, leader=leader)

    def live(self, event: dict[str, Any], point: str) -> str:
        frozen = ", ".join(str(n) for n in event.get("nodes") or []) or "none"
        return f"follower node(s) {frozen} frozen"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return None  # the leader's answers (REQUEST_TIMED_OUT) are the evidence


KIND = PauseFollowers()
