"""Helpers the broker faults share: finding the partition's leader, its followers and the
active controller, asked again while a broker has not yet applied the topic's metadata."""

from __future__ import annotations

import time

from engine.base.errors import LabError, QuorumUnknown
from engine.faults.base import NemesisState

# How long a broker fault waits for the cluster to name its partition's leader.
LEADER_WAIT_S = 10.0


def leader(nemesis: NemesisState) -> int:
    """The partition's leader. A broker that has not yet applied the topic's metadata
    names none (-1; seen right after a cluster restart): ask again, within reason."""
    ctx = nemesis.ctx
    deadline = time.monotonic() + LEADER_WAIT_S
    while (node := ctx.cluster.leader_of(ctx.topic)) < 0:
        if time.monotonic() > deadline:
            raise LabError(
                f"No broker named a leader for {ctx.topic} within {LEADER_WAIT_S:g} s, "
                "so the fault could not find its node; check the cluster with `python -m "
                "engine cluster status`."
            )
        time.sleep(0.1)
    return node


def controller(nemesis: NemesisState) -> int | None:
    """The active controller (the metadata quorum's leader); None if none is known."""
    try:
        return nemesis.ctx.cluster.active_controller(timeout=3.0)
    except QuorumUnknown:
        return None


def replicas(nemesis: NemesisState) -> list[int]:
    """The partition's replicas, asked again while the broker answering does not know
    the topic yet (the same lag as in `leader`)."""
    deadline = time.monotonic() + LEADER_WAIT_S
    while not (found := nemesis.ctx.cluster.partition_replicas(nemesis.ctx.topic)):
        if time.monotonic() > deadline:
            return []
        time.sleep(0.1)
    return found


def calm_follower(nemesis: NemesisState, kind: str) -> tuple[int, int | None, int] | None:
    """(the leader, the active controller, the follower to hurt) of partition 0, or None
    (recorded as `{kind}-skipped`) if it has no follower. The follower is not the active
    controller where the placement allows: hurting it would also move the metadata
    quorum's leadership, another lesson (the quorum survives: 2 of 3)."""
    led_by = leader(nemesis)
    active = controller(nemesis)
    followers = [n for n in replicas(nemesis) if n != led_by]
    if not followers:
        nemesis.record(f"{kind}-skipped", reason="the partition has no follower")
        return None
    calm = [n for n in followers if n != active]
    return led_by, active, (calm or followers)[0]
