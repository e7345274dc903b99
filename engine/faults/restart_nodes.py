"""restart-nodes: start killed broker nodes again on their old disks: every node this level's
nemesis killed, or, with `target`, the one kill-leader or kill-follower took down, in a thread
(the run goes on watching the partition meanwhile: what the controller does while the node
registers, an election or none, is part of the lesson)."""

from __future__ import annotations

import threading
from typing import Any

from engine.base.errors import LabError
from engine.faults.base import (
    HURT,
    OWN_BROKERS,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
)
from engine.faults.params import FaultParams
from engine.faults.wipe_partition import check_node_target
from engine.model.events import NemesisRecord


class RestartNodes(FaultKind):
    name = "restart-nodes"
    takes = frozenset({"target"})
    available = Availability(OWN_BROKERS, why="the lab must own the broker processes")
    reach = "brokers"
    words = "brokers restarted"
    colour = HURT
    # Free play restarts the node its kill-leader took down (engine.run.freeplay).
    free_play = FreePlayControl(
        strike="restart",
        label="🔁 Restart the broker now",
        help="Start the killed broker again, without waiting.",
        order=6,
        broker_step="back",
    )

    def check(self, fault: FaultParams) -> None:
        check_node_target(self.name, fault.target)

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        if fault.target is not None:
            self._restart_in_background(fault.target, nemesis)
            return
        for node in sorted(nemesis.killed_nodes):
            nemesis.ctx.cluster.restart_node(node)
        nemesis.record(fault.kind, nodes=sorted(nemesis.killed_nodes))
        nemesis.killed_nodes.clear()

    def _restart_in_background(self, role: str, nemesis: NemesisState) -> None:
        node = nemesis.node_roles.get(role)
        if node is None or node not in nemesis.killed_nodes:
            nemesis.record("restart-skipped", target=role, reason=f"no {role} node is down")
            return
        nemesis.killed_nodes.discard(node)
        nemesis.record(self.name, nodes=[node], target=role)

        def restart() -> None:
            try:
                nemesis.ctx.cluster.restart_node(node)
            except LabError as exc:
                nemesis.record(NemesisRecord.RESTART_FAILED, node=node, error=str(exc))
                return
            nemesis.record(NemesisRecord.NODE_READY, node=node)
            nemesis.ctx.node_changed()

        thread = threading.Thread(target=restart, name=f"restart-node-{node}", daemon=True)
        thread.start()
        nemesis.restarting.append(thread)

    def live(self, event: dict[str, Any], point: str) -> str:
        restarted = ", ".join(str(n) for n in event.get("nodes") or []) or "none"
        return f"node(s) {restarted} restarted"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        if not event.get("target"):
            return None  # every killed node back: the ISR's growth is the evidence
        restarted = ", ".join(str(n) for n in event.get("nodes") or [])
        return (
            f"Node {restarted} (the {event.get('target')} killed before) was started again on "
            "its disk."
        )


KIND = RestartNodes()
