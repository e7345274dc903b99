"""The nemesis: injects a scenario's faults on schedule, for real.

A fault fires when its trigger is met: a time after the level started, or a count of events
in the run's history (for example the producer's fifth `ack`). What it does is real: proxy
rules that drop Produce responses, SIGKILL and SIGSTOP of client processes, and kills and
pauses of broker nodes. Every action is written to the run's history as a `nemesis` event.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.cluster.base import Cluster
from engine.errors import UnsupportedFaultError
from engine.history import HistoryWriter
from engine.processes import RoleProcess
from engine.scenario import Fault


@dataclass
class NemesisContext:
    """What the nemesis may touch during one level's run."""

    cluster: Cluster
    topic: str  # the topic whose leader broker faults aim at
    client_ids: dict[str, str]  # role base name -> client.id prefix, for proxy targeting
    processes: Callable[[str], RoleProcess | None]  # the live instance of a role
    replace: Callable[[str, Fault], None]  # start a replacement instance of a role
    history: HistoryWriter
    started_at: float = field(default_factory=time.time)


PROXY_FAULTS = ("drop-produce-response", "blackhole", "latency", "reset-connections")


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

    @property
    def done(self) -> bool:
        return not self.pending and not self.timed_resumes

    def observe(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.counts[(str(event.get("proc", "")).split("#")[0], str(event.get("ev")))] += 1

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
        return self.counts[(when.process or "", when.event or "")] >= when.count

    def record(self, kind: str, **attrs: Any) -> None:
        self.ctx.history.write("nemesis", kind=kind, **attrs)

    def fire(self, fault: Fault) -> None:
        proxy = self.ctx.cluster.proxy_control()
        kind = fault.kind
        if kind in PROXY_FAULTS and proxy is None:
            raise UnsupportedFaultError(
                f"The fault '{kind}' needs the fault proxy, which the "
                f"{self.ctx.cluster.backend} backend does not run."
            )
        if kind == "drop-produce-response":
            target = fault.target or "producer"
            prefix = self.ctx.client_ids[target]
            rule = proxy.drop_produce_responses(
                nth=fault.nth or 1,
                count=fault.count,
                after=fault.after,
                drop=fault.drop,
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
            process = self.ctx.processes(fault.target or "processor")
            if process is not None:
                process.resume()
                self.record("resume", target=process.name)
        elif kind == "kill-leader":
            leader = self.ctx.cluster.leader_of(self.ctx.topic)
            self.ctx.cluster.kill_node(leader)
            self.killed_nodes.add(leader)
            self.record(kind, node=leader)
        elif kind == "pause-followers":
            leader = self.ctx.cluster.leader_of(self.ctx.topic)
            followers = [n for n in self.ctx.cluster.node_ids if n != leader]
            for node in followers:
                self.ctx.cluster.pause_node(node)
                self.paused_nodes.add(node)
            self.record(kind, nodes=followers, leader=leader)
        elif kind == "resume-nodes":
            for node in sorted(self.paused_nodes):
                self.ctx.cluster.resume_node(node)
            self.record(kind, nodes=sorted(self.paused_nodes))
            self.paused_nodes.clear()
        elif kind == "restart-nodes":
            for node in sorted(self.killed_nodes):
                self.ctx.cluster.restart_node(node)
            self.record(kind, nodes=sorted(self.killed_nodes))
            self.killed_nodes.clear()

    def _crash(self, fault: Fault) -> None:
        target = fault.target or "producer"
        process = self.ctx.processes(target)
        if process is None:
            self.record("crash-skipped", target=target, reason="no live instance")
            return
        process.kill()
        self.record("crash", target=process.name, pid=process.pid, signal="SIGKILL")
        if fault.replace:
            self.ctx.replace(target, fault)

    def _pause(self, fault: Fault) -> None:
        target = fault.target or "processor"
        process = self.ctx.processes(target)
        if process is None:
            self.record("pause-skipped", target=target, reason="no live instance")
            return
        process.pause()
        self.record("pause", target=process.name, pid=process.pid, signal="SIGSTOP")
        if fault.replace:
            self.ctx.replace(target, fault)
        if fault.duration_s:

            def wake(p: RoleProcess = process) -> None:
                p.resume()
                self.record("resume", target=p.name, pid=p.pid, signal="SIGCONT")

            self.timed_resumes.append((time.time() + fault.duration_s, wake))

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
        for _, action in self.timed_resumes:
            action()
        self.timed_resumes.clear()
        for node in sorted(self.paused_nodes):
            self.ctx.cluster.resume_node(node)
        for node in sorted(self.killed_nodes):
            self.ctx.cluster.restart_node(node)
        self.paused_nodes.clear()
        self.killed_nodes.clear()
