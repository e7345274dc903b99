"""The nemesis: injects a scenario's faults on schedule, for real.

A fault fires when its trigger is met: a time after the level started, or a count of events
in the run's history (for example the proxy's first dropped response). What it does is real:
proxy rules that drop Produce responses, SIGKILL and SIGSTOP of client processes, and kills
and pauses of broker nodes. Every action is written to the run's history as a `nemesis` event.

A crash or pause triggered by the target's own events is exact (engine.failpoints): the
runner arms a fault point in the target's spec, the target stops itself right there, and the
nemesis acts once it has seen the process stopped. Reading history files to learn of events
is always a little late, so counting them here would let the signal land further on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.cluster.base import Cluster
from engine.errors import LabError, UnsupportedFaultError
from engine.failpoints import FailPoint, wait_stopped
from engine.history import HistoryFanOut, HistoryWriter
from engine.kafka import admin, quorum
from engine.processes import RoleProcess
from engine.scenario import BROKER_FAULTS, Fault


@dataclass
class NemesisContext:
    """What the nemesis may touch during one level's run."""

    cluster: Cluster
    topic: str  # the topic whose leader broker faults aim at
    client_ids: dict[str, str]  # role base name -> client.id prefix, for proxy targeting
    processes: Callable[[str], RoleProcess | None]  # the live instance of a role
    replace: Callable[[str, Fault], None]  # start a replacement instance of a role
    history: HistoryWriter | HistoryFanOut
    started_at: float = field(default_factory=time.time)
    # Called after every fault on a node, so that a watcher reads the partition again.
    node_changed: Callable[[], None] = lambda: None


# How long a broker fault waits for the cluster to name its partition's leader.
LEADER_WAIT_S = 10.0

PROXY_FAULTS = (
    "drop-produce-response",
    "drop-response",
    "blackhole",
    "latency",
    "reset-connections",
)
# Faults that reach beyond one level's own clients: the brokers (BROKER_FAULTS, kept with
# the scenario's fault kinds), and the proxy as a whole. A run with any of them runs its
# levels one at a time and has the cluster alone, unless its scenario shares its faults
# (shared_faults: one strike for every level at once); the others (drops aimed at one
# level's client ids, crashes and pauses of its own processes) stay inside the level that
# suffers them.
PROXY_WIDE_FAULTS = frozenset({"blackhole", "latency", "reset-connections"})


def reaches_beyond_level(faults: list[Fault]) -> bool:
    """Whether a fault of this list can touch another level's (or run's) clients."""
    return any(f.kind in BROKER_FAULTS | PROXY_WIDE_FAULTS for f in faults)


# Where a fault point can sit: events a role writes one at a time through
# HistoryWriter.write (None: every event). The producer writes its send and ack lines in
# bulk, for speed, so only its transaction steps can carry a point.
ARMABLE_EVENTS: dict[str, frozenset[str] | None] = {
    "processor": None,
    "producer": frozenset({"txn_init", "txn_begin", "txn_flushed", "txn_commit", "txn_abort"}),
}
DEFAULT_TARGETS = {"crash": "producer", "pause": "processor"}


def fault_target(fault: Fault) -> str:
    return fault.target or DEFAULT_TARGETS.get(fault.kind, "producer")


def armed_point(fault: Fault) -> FailPoint | None:
    """The fault point a crash or pause needs in its target, if its trigger is the target's own."""
    when = fault.when
    if fault.kind not in ("crash", "pause") or when.event is None:
        return None
    target = fault_target(fault)
    if when.process != target or target not in ARMABLE_EVENTS:
        return None
    events = ARMABLE_EVENTS[target]
    if events is not None and when.event not in events:
        return None
    return FailPoint(when.event, when.count)


class Nemesis:
    def __init__(self, faults: list[Fault], ctx: NemesisContext) -> None:
        self.pending = list(enumerate(faults))
        self.ctx = ctx
        self.counts: Counter[tuple[str, str]] = Counter()
        self.timed_resumes: list[tuple[float, Callable[[], None]]] = []
        self.paused_nodes: set[int] = set()
        self.killed_nodes: set[int] = set()
        self.armed_at: dict[int, float] = {}  # fault index -> when its trigger was met
        # What this run set on the shared proxy, so heal() undoes only that: another run on
        # the same cluster (a second dashboard session) may have rules of its own in force.
        self.proxy_rules: list[int] = []
        self.proxy_wide = False
        self.stopped_at: dict[str, dict[str, Any]] = {}  # role -> its failpoint_reached event
        # Processes this nemesis froze and has not woken yet: a `resume` fault or heal() wakes
        # them (the live-instance look-up skips frozen processes, so it cannot find them).
        self.frozen: list[RoleProcess] = []
        # The node each of kill-leader and kill-follower took down, for a targeted restart.
        self.node_roles: dict[str, int] = {}
        self.restarting: list[threading.Thread] = []
        self._record_lock = threading.Lock()  # restarts record from their own threads

    @property
    def done(self) -> bool:
        return (
            not self.pending
            and not self.timed_resumes
            and not any(t.is_alive() for t in self.restarting)
        )

    def observe(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            base = str(event.get("proc", "")).split("#")[0]
            self.counts[(base, str(event.get("ev")))] += 1
            if event.get("ev") == "failpoint_reached":
                self.stopped_at.setdefault(base, event)

    def drop_unreachable(self) -> None:
        """The clients are done: faults waiting for their events will never fire; say so."""
        for index, fault in list(self.pending):
            if fault.when.event is not None and index not in self.armed_at:
                self.pending.remove((index, fault))
                self.record(
                    "fault-not-reached",
                    fault=fault.kind,
                    target=fault_target(fault),
                    point=f"after {fault.when.event} #{fault.when.count}",
                    reason="the clients finished before they reached the fault's trigger",
                )

    def tick(self) -> None:
        """Fire every fault whose trigger is met, and every timed resume that is due."""
        now = time.time()
        for due, action in list(self.timed_resumes):
            if now >= due:
                self.timed_resumes.remove((due, action))
                action()
        for item in list(self.pending):
            index, fault = item
            if index not in self.armed_at and self._triggered(fault, now):
                self.armed_at[index] = now
            if index in self.armed_at and now - self.armed_at[index] >= fault.delay_s:
                self.pending.remove(item)
                self.fire(fault)

    def _triggered(self, fault: Fault, now: float) -> bool:
        when = fault.when
        if when.at_s is not None:
            return now - self.ctx.started_at >= when.at_s
        if armed_point(fault) is not None:
            # The target stopped itself at the point; act once the stop has really landed.
            target = fault_target(fault)
            process = self.ctx.processes(target)
            return (
                target in self.stopped_at
                and process is not None
                and process.pid is not None
                and wait_stopped(process.pid)
            )
        return self.counts[(when.process or "", when.event or "")] >= when.count

    def record(self, kind: str, **attrs: Any) -> None:
        with self._record_lock:
            self.ctx.history.write("nemesis", kind=kind, **attrs)

    def fire(self, fault: Fault) -> None:
        proxy = self.ctx.cluster.proxy_control()
        kind = fault.kind
        if kind in PROXY_FAULTS and proxy is None:
            raise UnsupportedFaultError(
                f"The fault '{kind}' needs the fault proxy, which the "
                f"{self.ctx.cluster.backend} backend does not run."
            )
        if kind in ("drop-produce-response", "drop-response"):
            target = fault.target or "producer"
            prefix = self.ctx.client_ids[target]
            rule = proxy.drop_produce_responses(
                nth=fault.nth or 1,
                count=fault.count,
                after=fault.after,
                drop=fault.drop,
                api=fault.api,
                client_id_prefix=prefix,
            )
            self.proxy_rules.append(rule)
            self.record(
                kind,
                target=target,
                nth=fault.nth or 1,
                count=fault.count,
                after=fault.after,
                drop=fault.drop,
                api=fault.api,
                rule_id=rule,
            )
        elif kind == "blackhole":
            self.proxy_wide = True
            proxy.blackhole(fault.duration_s or 1.0, then=fault.then)
            self.record(kind, duration_s=fault.duration_s or 1.0, then=fault.then)
        elif kind == "latency":
            self.proxy_wide = True
            proxy.set_latency(fault.ms or 0.0)
            self.record(kind, ms=fault.ms or 0.0)
        elif kind == "reset-connections":
            self.record(kind, connections=proxy.reset_connections())
        elif kind == "crash":
            self._crash(fault)
        elif kind == "pause":
            self._pause(fault)
        elif kind == "resume":
            target = fault.target or "processor"
            frozen = [p for p in self.frozen if p.base == target]
            if not frozen:
                self.record("resume-skipped", target=target, reason="nothing of it is frozen")
            for process in frozen:
                self._wake(process)
        elif kind == "kill-leader":
            leader = self._leader()
            self.ctx.cluster.kill_node(leader)
            self.killed_nodes.add(leader)
            self.node_roles["leader"] = leader
            self.record(kind, node=leader)
        elif kind == "stop-leader":
            leader = self._leader()
            self.record(kind, node=leader, signal="SIGTERM")
            self.ctx.cluster.stop_node(leader)
            self.killed_nodes.add(leader)
            self.node_roles["leader"] = leader
            self.record("node-stopped", node=leader)
        elif kind == "kill-follower":
            self._kill_one_follower()
        elif kind == "wipe-partition":
            self._wipe_partition(fault)
        elif kind == "pause-followers":
            leader = self._leader()
            followers = [n for n in self.ctx.cluster.node_ids if n != leader]
            for node in followers:
                self.ctx.cluster.pause_node(node)
                self.paused_nodes.add(node)
            self.record(kind, nodes=followers, leader=leader)
        elif kind == "pause-follower":
            self._pause_one_follower(fault)
        elif kind == "resume-nodes":
            for node in sorted(self.paused_nodes):
                self.ctx.cluster.resume_node(node)
            self.record(kind, nodes=sorted(self.paused_nodes))
            self.paused_nodes.clear()
        elif kind == "restart-nodes" and fault.target is not None:
            self._restart_in_background(fault.target)
        elif kind == "restart-nodes":
            for node in sorted(self.killed_nodes):
                self.ctx.cluster.restart_node(node)
            self.record(kind, nodes=sorted(self.killed_nodes))
            self.killed_nodes.clear()
        if kind in BROKER_FAULTS:
            self.ctx.node_changed()

    def _leader(self) -> int:
        """The partition's leader. A broker that has not yet applied the topic's metadata
        names none (-1; seen right after a cluster restart): ask again, within reason."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while (leader := self.ctx.cluster.leader_of(self.ctx.topic)) < 0:
            if time.monotonic() > deadline:
                raise LabError(
                    f"No broker named a leader for {self.ctx.topic} within {LEADER_WAIT_S:g} s, "
                    "so the fault could not find its node; check the cluster with `python -m "
                    "engine cluster status`."
                )
            time.sleep(0.1)
        return leader

    def _controller(self) -> int | None:
        """The active controller (the metadata quorum's leader); None if none is known."""
        try:
            return self.ctx.cluster.active_controller(timeout=3.0)
        except quorum.QuorumUnknown:
            return None

    def _replicas(self) -> list[int]:
        """The partition's replicas, asked again while the broker answering does not know
        the topic yet (the same lag as in _leader)."""
        deadline = time.monotonic() + LEADER_WAIT_S
        bootstrap = self.ctx.cluster.direct_bootstrap
        while not (replicas := admin.partition_replicas(bootstrap, self.ctx.topic)):
            if time.monotonic() > deadline:
                return []
            time.sleep(0.1)
        return replicas

    def _calm_follower(self, kind: str) -> tuple[int, int | None, int] | None:
        """(the leader, the active controller, the follower to hurt) of partition 0, or None
        (recorded as `{kind}-skipped`) if it has no follower. The follower is not the active
        controller where the placement allows: hurting it would also move the metadata
        quorum's leadership, another lesson (the quorum survives: 2 of 3)."""
        leader = self._leader()
        controller = self._controller()
        followers = [n for n in self._replicas() if n != leader]
        if not followers:
            self.record(f"{kind}-skipped", reason="the partition has no follower")
            return None
        calm = [n for n in followers if n != controller]
        return leader, controller, (calm or followers)[0]

    def _kill_one_follower(self) -> None:
        """SIGKILL one follower of the topic's partition 0 (not the active controller)."""
        cluster = self.ctx.cluster
        if (picked := self._calm_follower("kill-follower")) is None:
            return
        leader, controller, node = picked
        cluster.kill_node(node)
        self.killed_nodes.add(node)
        self.node_roles["follower"] = node
        self.record("kill-follower", node=node, leader=leader, controller=controller)

    def _wipe_partition(self, fault: Fault) -> None:
        """Delete a killed node's copy of partition 0, as if its disk had been replaced."""
        role = fault.target or "leader"
        node = self.node_roles.get(role)
        if node is None or node not in self.killed_nodes:
            self.record("wipe-skipped", target=role, reason=f"no {role} node is down")
            return
        self.ctx.cluster.wipe_partition(node, self.ctx.topic, 0)
        self.record("wipe-partition", node=node, target=role, partition=f"{self.ctx.topic}-0")

    def _restart_in_background(self, role: str) -> None:
        """Start the node that kill-<role> took down again, on its old disk, in a thread.

        The run goes on watching the partition meanwhile: what the controller does while the
        node registers (an election, or none) is part of the lesson.
        """
        node = self.node_roles.get(role)
        if node is None or node not in self.killed_nodes:
            self.record("restart-skipped", target=role, reason=f"no {role} node is down")
            return
        self.killed_nodes.discard(node)
        self.record("restart-nodes", nodes=[node], target=role)

        def restart() -> None:
            try:
                self.ctx.cluster.restart_node(node)
            except LabError as exc:
                self.record("restart-failed", node=node, error=str(exc))
                return
            self.record("node-ready", node=node)
            self.ctx.node_changed()

        thread = threading.Thread(target=restart, name=f"restart-node-{node}", daemon=True)
        thread.start()
        self.restarting.append(thread)

    def _pause_one_follower(self, fault: Fault) -> None:
        """SIGSTOP one follower of the topic's partition 0: not the active controller.

        Frozen for less than broker.session.timeout.ms (6 s on the lab's clusters) it is not
        fenced and stays in the ISR: an acks=all write waits for it, and the leader answers
        REQUEST_TIMED_OUT once the request's timeout passes, the write in its log all the
        same (retry-reorder). Frozen for longer, the controller fences it, and a fenced broker
        leaves every ISR (isr-shrink).
        """
        cluster = self.ctx.cluster
        if (picked := self._calm_follower("pause-follower")) is None:
            return
        leader, controller, node = picked
        cluster.pause_node(node)
        self.paused_nodes.add(node)
        self.record("pause-follower", node=node, leader=leader, controller=controller)
        if fault.duration_s:

            def resume(n: int = node) -> None:
                if n in self.paused_nodes:
                    cluster.resume_node(n)
                    self.paused_nodes.discard(n)
                    self.record("resume-nodes", nodes=[n])

            self.timed_resumes.append((time.time() + fault.duration_s, resume))

    def _point(self, fault: Fault) -> dict[str, Any]:
        """Where the target stood when the signal hit it, for the record and the page."""
        point = armed_point(fault)
        if point is None:
            return {}
        reached = self.stopped_at.get(fault_target(fault), {})
        return {"point": point.name, "at": reached.get("at")}

    def _crash(self, fault: Fault) -> None:
        target = fault_target(fault)
        process = self.ctx.processes(target)
        if process is None:
            self.record("crash-skipped", target=target, reason="no live instance")
            return
        process.kill()
        self.record(
            "crash", target=process.name, pid=process.pid, signal="SIGKILL", **self._point(fault)
        )
        if fault.replace:
            self.ctx.replace(target, fault)

    def _pause(self, fault: Fault) -> None:
        target = fault_target(fault)
        process = self.ctx.processes(target)
        if process is None:
            self.record("pause-skipped", target=target, reason="no live instance")
            return
        process.pause()  # stopped already at an armed point: this only marks it paused
        self.frozen.append(process)
        self.record(
            "pause", target=process.name, pid=process.pid, signal="SIGSTOP", **self._point(fault)
        )
        if fault.replace:
            self.ctx.replace(target, fault)
        if fault.duration_s:

            def wake(p: RoleProcess = process) -> None:
                if p in self.frozen:  # not woken already by a `resume` fault
                    self._wake(p)

            self.timed_resumes.append((time.time() + fault.duration_s, wake))

    def _wake(self, process: RoleProcess) -> None:
        """SIGCONT a process this nemesis froze, and record it."""
        self.frozen.remove(process)
        process.resume()
        self.record("resume", target=process.name, pid=process.pid, signal="SIGCONT")

    def heal(self) -> None:
        """Undo what is still in force, so the next level starts on a healthy cluster."""
        proxy = self.ctx.cluster.proxy_control()
        if proxy is not None:
            for rule_id in self.proxy_rules:
                proxy.remove_rule(rule_id)
            self.proxy_rules.clear()
            if self.proxy_wide:  # latency and blackholes apply to every connection
                proxy.set_latency(0.0)
                proxy.heal()
                self.proxy_wide = False
        for thread in self.restarting:  # a node starting: let it finish before healing
            thread.join(timeout=90)
        for _, action in self.timed_resumes:
            action()
        self.timed_resumes.clear()
        for process in list(self.frozen):  # frozen with no timed wake: woken here
            self._wake(process)
        for node in sorted(self.paused_nodes):
            self.ctx.cluster.resume_node(node)
        for node in sorted(self.killed_nodes):
            self.ctx.cluster.restart_node(node)
        self.paused_nodes.clear()
        self.killed_nodes.clear()
