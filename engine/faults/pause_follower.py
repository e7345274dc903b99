"""pause-follower: SIGSTOP of one follower of partition 0 (not the active controller), woken
after `duration_s` if given.

Frozen for less than broker.session.timeout.ms (6 s on the lab's clusters) it is not fenced
and stays in the ISR: an acks=all write waits for it, and the leader answers
REQUEST_TIMED_OUT once the request's timeout passes, the write in its log all the same
(retry-reorder). Frozen for longer, the controller fences it, and a fenced broker leaves
every ISR (isr-shrink).
"""

from __future__ import annotations

import time
from typing import Any

from engine.faults import nodes
from engine.faults.base import HURT, OWN_BROKERS, Availability, FaultKind, NemesisState
from engine.faults.params import FaultParams
from engine.model.words import controller_words

# replica.fetch.wait.max.ms (kafka-server 4.1.2, ReplicationConfigs: 500 ms by default, and a
# fetch answered at replica.fetch.min.bytes, 1), which the lab keeps.
REPLICA_FETCH_WAIT_S = 0.5


class PauseFollower(FaultKind):
    name = "pause-follower"
    takes = frozenset({"duration_s"})
    available = Availability(
        OWN_BROKERS, min_nodes=2, why="a follower, on a broker process the lab owns"
    )
    reach = "brokers"
    words = "a follower frozen"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        cluster = nemesis.ctx.cluster
        if (picked := nodes.calm_follower(nemesis, fault.kind)) is None:
            return
        leader, controller, node = picked
        cluster.pause_node(node)
        nemesis.paused_nodes.add(node)
        nemesis.record(fault.kind, node=node, leader=leader, controller=controller)
        if fault.duration_s:

            def resume(n: int = node) -> None:
                if n in nemesis.paused_nodes:
                    cluster.resume_node(n)
                    nemesis.paused_nodes.discard(n)
                    nemesis.record("resume-nodes", nodes=[n])

            nemesis.timed_resumes.append((time.time() + fault.duration_s, resume))

    def settle_s(self, fault: FaultParams) -> float:
        # A follower always has one fetch request waiting at the leader, answered as soon as
        # a write arrives or after replica.fetch.wait.max.ms (Kafka's default, 500 ms, which
        # the lab keeps): a write in that window travels in the answer to the frozen
        # follower's socket, and the follower appends it when it wakes (seen in a
        # broker-failover run whose first message was sent 3 ms after the freeze: 9 lost,
        # not 10). After it, the follower has asked for nothing and gets nothing.
        return REPLICA_FETCH_WAIT_S + 0.2

    def live(self, event: dict[str, Any], point: str) -> str:
        return (
            f"follower node {event.get('node')} frozen (the leader is node "
            f"{event.get('leader')}; {controller_words(event)})"
        )

    def short(self, event: dict[str, Any]) -> str | None:
        return f"follower node {event.get('node')} frozen"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return (
            f"Follower node {event.get('node')} was frozen (SIGSTOP); node "
            f"{event.get('leader')} led the partition; {controller_words(event)}."
        )


KIND = PauseFollower()
