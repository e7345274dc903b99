"""The nemesis: injects a scenario's faults on schedule, for real.

A fault fires when its trigger is met: a time after the level started, or a count of events
in the run's history (for example the proxy's first dropped response). What it does is its
kind's (engine/faults/NAME.py): proxy rules that drop Produce responses, SIGKILL and SIGSTOP
of client processes, kills and pauses of broker nodes. The nemesis keeps what the kinds set,
froze and killed, so that a later fault and `heal` can undo it; every action is written to
the run's history as a `nemesis` event.

A crash or pause triggered by the target's own events is exact (engine.proc.failpoints): the
runner arms a fault point in the target's spec, the target stops itself right there, and the
nemesis acts once it has seen the process stopped. Reading history files to learn of events
is always a little late, so counting them here would let the signal land further on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from engine.base.errors import UnsupportedFaultError
from engine.faults import (
    BROKER_FAULTS,
    PROXY_WIDE_FAULTS,
    Fault,
    armed_point,
    fault_target,
    kind_of,
    reaches_beyond_level,
)
from engine.faults.base import NemesisContext
from engine.model.events import Event, NemesisRecord
from engine.model.history import HistoryWriter
from engine.proc.failpoints import wait_stopped
from engine.proc.processes import RoleProcess

# Kept here for the modules that ask the nemesis (engine.run.runner, pages/_run_control.py).
__all__ = [
    "BROKER_FAULTS",
    "PROXY_WIDE_FAULTS",
    "Nemesis",
    "NemesisContext",
    "armed_point",
    "fault_target",
    "reaches_beyond_level",
]


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
        # What a kind left in force and registered its own undo for (on_heal): a new kind's
        # residue needs no line here.
        self.undos: list[tuple[str, Callable[[], None]]] = []
        self._record_lock = threading.Lock()  # restarts record from their own threads
        self.settled_at = 0.0  # when every fault fired so far is wholly in force

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
            if event.get("ev") == Event.FAILPOINT_REACHED:
                self.stopped_at.setdefault(base, event)

    def drop_unreachable(self) -> None:
        """The clients are done: faults waiting for their events will never fire; say so."""
        for index, fault in list(self.pending):
            if fault.when.event is not None and index not in self.armed_at:
                self.pending.remove((index, fault))
                self.record(
                    NemesisRecord.FAULT_NOT_REACHED,
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
            self.ctx.history.write(Event.NEMESIS, kind=kind, **attrs)

    def record_in(self, history: HistoryWriter, kind: str, **attrs: Any) -> None:
        """Record a line in one history only, under the same lock as `record`: one level's
        own reading (its partition's ISR) while a nemesis shared by several levels also
        writes to that history."""
        with self._record_lock:
            history.write(Event.NEMESIS, kind=kind, **attrs)

    def fire(self, fault: Fault) -> None:
        """Carry out one fault now, as its kind says (engine/faults/NAME.py)."""
        kind = kind_of(fault.kind)
        cluster = self.ctx.cluster
        if (why := kind.available.refused_on(cluster.backend)) is not None:
            raise UnsupportedFaultError(f"The fault '{fault.kind}' cannot fire: {why}.")
        kind.fire(fault, self)
        self.settled_at = max(self.settled_at, time.time() + kind.settle_s(fault))
        if kind.reach == "brokers":
            self.ctx.node_changed()

    def wait_settled(self) -> None:
        """Wait until the faults fired so far are wholly in force (FaultKind.settle_s): the
        runner calls it after firing the faults at 0 s, before any client sends."""
        if (left := self.settled_at - time.time()) > 0:
            time.sleep(left)

    def wake(self, process: RoleProcess) -> None:
        """SIGCONT a process this nemesis froze, and record it."""
        self.frozen.remove(process)
        process.resume()
        self.record("resume", target=process.name, pid=process.pid, signal="SIGCONT")

    def on_heal(self, what: str, undo: Callable[[], None]) -> None:
        self.undos.append((what, undo))

    def heal(self) -> None:
        """Undo what is still in force, so the next level starts on a healthy cluster."""
        while self.undos:  # the kinds' own residues, the last first
            _, undo = self.undos.pop()
            undo()
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
            self.wake(process)
        for node in sorted(self.paused_nodes):
            self.ctx.cluster.resume_node(node)
        for node in sorted(self.killed_nodes):
            self.ctx.cluster.restart_node(node)
        self.paused_nodes.clear()
        self.killed_nodes.clear()
