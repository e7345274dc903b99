"""Free play: a steady stream through every chosen level at once, and faults struck by hand.

Each level runs the processor pipeline of the scenarios (engine.run.runner.LevelRun): a producer
with the level's own settings writes a steady stream into the level's input topic, the
processor reads it in the level's commit mode and writes the output topic, and the sink
reads that at the level's isolation. All levels run at the same time, each with its own
topics, clients and client ids, so one button strikes every level at the same moment.

A strike is the real fault, fired through each level's Nemesis and recorded in its
nemesis.jsonl, where engine.teach.live reads it as it does for a scenario:

- drop the next ack: the fault proxy forwards the producer's next Produce request and drops
  the broker's answer, then resets the connection;
- kill the processor: SIGKILL; a replacement starts at once (the application's choice: a
  supervisor that restarts a crashed service);
- freeze the processor: SIGSTOP; optionally a replacement starts while it is frozen (the
  application's choice: an orchestrator that gives up on a stalled instance), and the
  frozen one becomes a zombie when it is woken (SIGCONT);
- kill the partition leader (3 nodes): SIGKILL of the broker JVM that leads every level's
  partitions; it is restarted after a stated delay, or at once with a button.

A processor that exits on its own (a fatal error: for example its consumer fenced by the
group coordinator while a broker fails over) is started again when its level has no other
instance running: the application's choice, a supervisor's, said in the notices.

The session stops by itself at its time limit (or when asked), stops the stream, lets the
processors catch up, and judges and records every level like a scenario run
(record.finish_run), so the Replay and Metrics pages show it.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.base.errors import LabError
from engine.cluster.base import Cluster
from engine.faults import free_play_controls
from engine.faults.base import FreePlayControl
from engine.judging.judge import LevelResult
from engine.model.events import Event, NemesisRecord
from engine.model.history import read_jsonl
from engine.model.levels import CORE_LEVELS, LEVELS
from engine.run import record
from engine.run.level_run import every_level_nemesis
from engine.run.nemesis import Nemesis
from engine.run.progress import Step
from engine.run.runner import LevelRun, new_run_id
from engine.scenarios.scenario import Fault, Scenario, Workload

# The buttons: every fault kind with a Free play control (engine/faults/NAME.py), in order.
CONTROLS: dict[str, tuple[str, FreePlayControl]] = {
    control.strike: (kind, control) for kind, control in free_play_controls()
}
# The kind that brings a downed broker back (its control's broker_step "back"): a click, or
# the automatic restart.
BROKER_BACK = next(kind for kind, c in CONTROLS.values() if c.broker_step == "back")
StrikeKind = str  # a strike's name: a key of CONTROLS
STRIKES: tuple[StrikeKind, ...] = tuple(CONTROLS)
# (button label, the strike, what it does for real), for the page.
BUTTONS: list[tuple[str, StrikeKind, str]] = [
    (control.label, strike, control.help) for strike, (_, control) in CONTROLS.items()
]
Phase = Literal["waiting", "starting", "running", "finishing", "done", "failed"]

RATE_BOUNDS = (1.0, 50.0)  # messages per second, per level
TIME_LIMIT_BOUNDS = (10.0, 300.0)  # seconds of stream
RESTART_BOUNDS = (7.0, 60.0)  # a killed broker's automatic restart, seconds after the kill
# How long the processors get, after the stream stops, to read and commit what is left.
DRAIN_S = 30.0
# One click: the same button again within this is the same click delivered twice (a double
# click, or Streamlit handing a fragment's button trigger to two script runs), not a second
# strike. Seen in CI: one click killed the processor and then its fresh replacement.
SAME_CLICK_S = 1.0
MAX_SUPERVISED_RESTARTS = 5
TICK_S = 0.05


class FreePlayError(LabError):
    """Free play cannot start, or cannot do what was asked right now."""


@dataclass(frozen=True)
class FreePlaySettings:
    """What a free play session runs: levels, stream rate, time limit, what the lab decides."""

    levels: tuple[str, ...] = CORE_LEVELS
    rate: float = 10.0  # messages per second, per level
    time_limit_s: float = 60.0
    partitions: int = 1
    commit_every: int = 5
    processing_ms: float = 10.0  # the processor's work per message: a freeze lands in it
    # The application's choice: start a replacement while the processor is frozen (a zombie).
    replace_frozen: bool = True
    # Broker faults: replicate every topic on 3 nodes and take the cluster alone.
    broker_faults: bool = False
    restart_after_s: float = 12.0  # a killed broker is restarted this long after the kill

    def problems(self, cluster: Cluster | None) -> list[str]:
        """Why these settings cannot run on this cluster, one sentence each; [] if they can."""
        out = []
        if cluster is None:
            out.append("The cluster is not ready yet; its progress shows in the sidebar.")
        if not self.levels:
            out.append("Choose at least one level.")
        unknown = [name for name in self.levels if name not in LEVELS]
        if unknown:
            out.append(f"Unknown level(s) {', '.join(unknown)}; known: {', '.join(LEVELS)}.")
        for what, value, (low, high) in (
            ("The rate", self.rate, RATE_BOUNDS),
            ("The time limit", self.time_limit_s, TIME_LIMIT_BOUNDS),
            ("The broker restart delay", self.restart_after_s, RESTART_BOUNDS),
        ):
            if not low <= value <= high:
                out.append(f"{what} must be between {low:g} and {high:g}; it is {value:g}.")
        if self.broker_faults and cluster is not None and (why := broker_faults_refused(cluster)):
            out.append(why)
        return out

    def scenario(self) -> Scenario:
        """The scenario the session records: the processor pipeline, no scheduled faults."""
        replicated = self.broker_faults
        return Scenario(
            name="free-play",
            title="Free play",
            story=(
                "A steady stream through every level at once; the faults were struck by hand "
                "(each is in the levels' nemesis history)."
            ),
            nodes=3 if replicated else 1,
            replication=3 if replicated else 1,
            # acks=all then needs a follower's copy, as in broker-failover.
            topic_config={"min.insync.replicas": "2"} if replicated else {},
            pipeline="processor",
            levels=list(self.levels),
            workload=Workload(
                messages=self.messages,
                partitions=self.partitions,
                rate=self.rate,
                commit_every=self.commit_every,
                processing_ms=self.processing_ms,
            ),
            timeout_s=min(600.0, self.time_limit_s + DRAIN_S + 60.0),
        )

    @property
    def messages(self) -> int:
        """Ids the producer may send: more than the stream can reach within the time limit."""
        return int(self.rate * self.time_limit_s) + 1


def broker_faults_refused(cluster: Cluster) -> str | None:
    """Why this cluster cannot have a partition leader killed under free play; None if it can."""
    nodes = len(cluster.node_ids)
    if nodes < 3:
        return (
            f"Killing the partition leader needs a 3-node cluster (the running one has {nodes}): "
            "with one node there is no follower to take over."
        )
    if cluster.backend == "external":
        return "The external backend's brokers are not the lab's to kill."
    return None


@dataclass(frozen=True)
class Notice:
    """A line for the page: what a strike did, or why it did nothing."""

    t: float
    text: str


@dataclass
class FreeLevel:
    """One level of the session: its run (topics, processes, files) and its nemesis."""

    run: LevelRun
    nemesis: Nemesis
    restarts: int = 0  # processors the application's supervisor started (see _supervise)
    gave_up_noted: bool = False


@dataclass
class FreePlay:
    """A free play session, driven by its own thread so it outlives any page's script run."""

    cluster: Cluster
    settings: FreePlaySettings
    # Held for the whole session: the cluster shared, or alone for broker faults.
    hold: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    run_id: str = field(default_factory=lambda: new_run_id("free-play"))
    phase: Phase = "waiting"
    stage: str = "Waiting for the cluster"
    started_at: float | None = None  # when the stream began
    deadline: float | None = None
    notices: list[Notice] = field(default_factory=list)
    output: dict[str, Any] | None = None
    error: BaseException | None = None
    killed_node: int | None = None
    # The last broker kill: its nemesis (its lines in every struck level's history) and the
    # levels whose partition it led.
    broker_strike: Nemesis | None = None
    struck: list[FreeLevel] = field(default_factory=list)
    restart_due: float | None = None
    levels: list[FreeLevel] = field(default_factory=list)

    def __post_init__(self) -> None:
        problems = self.settings.problems(self.cluster)
        if problems:
            raise FreePlayError(" ".join(problems))
        self._strikes: queue.Queue[StrikeKind] = queue.Queue()
        self._last_strike: tuple[StrikeKind, float] | None = None
        self._strike_lock = threading.Lock()  # two sessions' script runs may click at once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.folder: Path = record.run_folder(self.run_id)

    # ---- what the page calls -------------------------------------------------------------
    def start(self) -> FreePlay:
        # A daemon: a dashboard being shut down does not wait (the clients have watchdogs).
        self._thread = threading.Thread(target=self._work, name=self.run_id, daemon=True)
        self._thread.start()
        return self

    @property
    def active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """End the stream now instead of at the time limit; the session then judges and records."""
        self._stop.set()

    def wait(self, timeout: float) -> bool:
        """Wait for the session to end; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.active

    def remaining_s(self, now: float | None = None) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - (now or time.time()))

    def refused(self, kind: StrikeKind) -> str | None:
        """Why a strike cannot be made now, in one sentence; None if it can."""
        if self.phase != "running" or self._stop.is_set():
            return "Free play is not running."
        _, control = CONTROLS.get(kind, ("", None))
        if control is not None and control.needs_broker_faults:
            if not self.settings.broker_faults:
                return broker_faults_refused(self.cluster) or (
                    "Start free play with broker faults on to kill the partition leader."
                )
            if self.killed_node is not None:
                return f"Node {self.killed_node} is down already; restart it first."
        if control is not None and control.broker_step == "back" and self.killed_node is None:
            return "No broker is down."
        return None

    def strike(self, kind: StrikeKind) -> bool:
        """Strike every level now (the session's thread fires it within a tick).

        False if the same strike came less than SAME_CLICK_S ago: one click, not two.
        """
        if kind not in STRIKES:
            raise FreePlayError(f"Unknown action '{kind}'; known: {', '.join(STRIKES)}.")
        if why := self.refused(kind):
            raise FreePlayError(why)
        now = time.monotonic()
        with self._strike_lock:
            last = self._last_strike
            if last is not None and last[0] == kind and now - last[1] < SAME_CLICK_S:
                return False
            self._last_strike = (kind, now)
        self._strikes.put(kind)
        return True

    def note(self, text: str) -> None:
        self.notices.append(Notice(time.time(), text))

    # ---- the session's thread ------------------------------------------------------------
    def _work(self) -> None:
        try:
            with self.hold():
                self.output = self._session(self.settings.scenario())
            self.phase, self.stage = "done", f"Done: run {self.run_id}"
        except BaseException as exc:  # handed to the page, which shows it in one line
            self.error = exc
            self.phase, self.stage = "failed", f"Free play did not finish: {exc}"

    def _session(self, scenario: Scenario) -> dict[str, Any]:
        """Set up, stream until the limit or Stop, judge; recorded like a scenario run."""
        self.phase, self.stage = "starting", "Creating the topics and the clients"
        levels = list(self.settings.levels)
        folder = record.create_run_folder(self.run_id, scenario, None, self.cluster, levels)
        try:
            self._set_up(scenario, folder)
            self.phase = "running"
            self._drive()
            self.phase = "finishing"
            results = self._finish()
        except BaseException as exc:
            reason = str(exc) if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
            record.finish_run(folder, status="failed", reason=reason, results={})
            raise
        finally:
            self._clean_up()
        record.finish_run(folder, status="complete", results=results)
        record.prune_runs()
        return record.run_output(self.run_id, scenario.name, results)

    def _set_up(self, scenario: Scenario, folder: Path) -> None:
        leader = self._chosen_leader() if self.settings.broker_faults else None
        for name in self.settings.levels:
            level_run = LevelRun(scenario, LEVELS[name], self.cluster, self.run_id, folder)
            self.levels.append(FreeLevel(level_run, level_run.new_nemesis([])))
            level_run.prepare(self._progress, leader=leader)
        # Processors first, so every level's stream is read from its first message.
        for level in self.levels:
            level.run.start_part("processor", level.run.processor_spec())
        now = time.time()
        self.started_at, self.deadline = now, now + self.settings.time_limit_s
        for level in self.levels:
            level.run.started_at = level.nemesis.ctx.started_at = now
            spec = level.run.producer_spec(list(range(self.settings.messages)))
            # The stream's producer has the level's settings, without transactions: at
            # exactly-once the transactions are the processor's (read-process-write), and a
            # transactional input would end in a commit marker that no consumer offset passes,
            # so the processors could never be seen to have caught up.
            spec["transactional"] = None
            level.run.start_part("producer", spec)
        self.stage = "Streaming"

    def _chosen_leader(self) -> int:
        """The node to lead every partition: not the controller, so a kill moves leadership
        alone and not the controller too (the lesson is the partition leader's)."""
        controller = self.cluster.active_controller()
        candidates = [n for n in self.cluster.node_ids if n != controller]
        return (candidates or self.cluster.node_ids)[0]

    def _progress(self, step: Step) -> None:
        self.stage = str(step)

    def _drive(self) -> None:
        while not self._stop.is_set() and time.time() < (self.deadline or 0.0):
            with contextlib.suppress(queue.Empty):
                while True:
                    self._fire(self._strikes.get_nowait())
            if self.restart_due is not None and time.time() >= self.restart_due:
                self._restart_broker("automatically")
            for level in self.levels:
                level.nemesis.tick()
                self._supervise(level)
            time.sleep(TICK_S)

    def _fire(self, kind: StrikeKind) -> None:
        """The real fault on every level at once; a refusal or an error becomes a notice."""
        fault_kind, control = CONTROLS[kind]
        try:
            if control.broker_step == "down":  # one node for every level: fired once
                self._take_broker_down(fault_kind)
            elif control.broker_step == "back":
                self._restart_broker("on request")
            else:
                self._each(Fault(kind=fault_kind, **control.params(self.settings)))
                self.note(control.note(self.settings))
        except Exception as exc:
            self.note(f"{kind} did not happen: {exc}")

    def _each(self, fault: Fault) -> None:
        for level in self.levels:
            level.nemesis.fire(fault)

    def _take_broker_down(self, fault_kind: str) -> None:
        """Take the broker leading the first level's input down (kill-leader: SIGKILL), once;
        every level records it.

        The kill is one line, with one time, in the history of every level whose partition it
        led (every_level_nemesis, as a scenario's shared faults); a level whose partition had
        another leader records the kill as it was for it.
        """
        first = self.levels[0]
        leaders = {
            lv.run.level.name: self.cluster.leader_of(lv.run.input_topic) for lv in self.levels
        }
        led = [
            lv for lv in self.levels if leaders[lv.run.level.name] == leaders[first.run.level.name]
        ]
        self.struck = led
        self.broker_strike = every_level_nemesis(
            self.cluster,
            [lv.run for lv in led],
            [],
            topic=first.run.input_topic,
            started_at=first.nemesis.ctx.started_at,
        )
        self.broker_strike.fire(Fault(kind=fault_kind))
        node = next(iter(self.broker_strike.killed_nodes))
        for level in self.levels:
            if level not in led:  # said as it is: this level's partition had another leader
                level.nemesis.record(
                    NemesisRecord.KILL_NODE, node=node, leader=leaders[level.run.level.name]
                )
        self.killed_node = node
        self.restart_due = time.time() + self.settings.restart_after_s
        self.note(
            f"Broker node {node} killed (SIGKILL), the partition leader; it restarts "
            f"{self.settings.restart_after_s:g} s after the kill."
        )

    def _restart_broker(self, how: str) -> None:
        node = self.killed_node
        if node is None:
            return
        self.stage = f"Restarting node {node}"
        if self.broker_strike is not None:  # one line in the levels it struck
            self.broker_strike.fire(Fault(kind=BROKER_BACK))
        for level in self.levels:
            if level not in self.struck:
                level.nemesis.record(BROKER_BACK, nodes=[node])
        self.killed_node = self.restart_due = None
        self.stage = "Streaming"
        self.note(f"Broker node {node} restarted {how}.")

    def _supervise(self, level: FreeLevel) -> None:
        """Start a new processor when a level has none running after one exited on its own.

        The application's choice, as a supervisor (systemd, Kubernetes) would make it: a
        processor that stops on a fatal error, for example fenced by its group coordinator
        while a broker fails over, is started again. Only when no instance of the level
        runs, so a zombie woken after its replacement is never restarted to fence that
        replacement in turn. At most MAX_SUPERVISED_RESTARTS times per level.
        """
        processors = [p for p in level.run.processes if p.base == "processor"]
        if not processors or any(p.alive() for p in processors):
            return
        if level.restarts >= MAX_SUPERVISED_RESTARTS:
            if not level.gave_up_noted:
                level.gave_up_noted = True
                self.note(
                    f"{level.run.level.name}: no processor is running any more; it exited "
                    f"{level.restarts + 1} times (its logs are in the run folder)."
                )
            return
        exited = processors[-1]
        level.restarts += 1
        why = exit_reason(exited.history)
        level.nemesis.record(NemesisRecord.SUPERVISOR_RESTART, target=exited.name, reason=why)
        level.run.start_part("processor", level.run.processor_spec())
        self.note(
            f"{level.run.level.name}: {exited.name} exited on its own ({why}); the "
            "application's supervisor started a new instance."
        )

    def _finish(self) -> dict[str, LevelResult]:
        """Stop the stream, heal, let the processors catch up, then judge every level."""
        self.stage = "Stopping the stream"
        self.deadline = min(self.deadline or time.time(), time.time())
        for level in self.levels:
            for process in level.run.processes:
                if process.base == "producer":
                    process.stop()  # SIGTERM: it finishes its message and flushes
        if self.killed_node is not None:
            self._restart_broker("at the end")
        for level in self.levels:
            level.nemesis.heal()  # proxy rules removed, frozen processors woken
        self.stage = "Letting the processors catch up"
        drain_until = time.time() + DRAIN_S
        pending = list(self.levels)
        while pending and time.time() < drain_until:
            pending = [lv for lv in pending if not self._caught_up(lv)]
            time.sleep(0.2)
        for level in pending:
            self.note(
                f"{level.run.level.name}: the processor had not caught up {DRAIN_S:g} s after "
                "the stream stopped; judged as it stood."
            )
        results: dict[str, LevelResult] = {}
        for level in self.levels:
            # The ledger is what the stream sent: the ids with a `send` line.
            level.run.ledger = sent_ids(level.run)
            results[level.run.level.name] = level.run.finish(self._progress)
        return results

    def _caught_up(self, level: FreeLevel) -> bool:
        try:
            return level.run.clients_finished()
        except Exception:  # a broker still electing leaders: ask again on the next poll
            return False

    def _clean_up(self) -> None:
        if self.broker_strike is not None:  # a killed broker restarted
            with contextlib.suppress(Exception):
                self.broker_strike.heal()
        for level in self.levels:
            with contextlib.suppress(Exception):
                level.nemesis.heal()
            for process in level.run.processes:
                process.stop(timeout=5)


def exit_reason(history: Path) -> str:
    """Why a processor stopped by itself, from the last `fenced` or `error` line it wrote."""
    for event in reversed(read_jsonl(history)):
        if event.get("ev") in (Event.FENCED, Event.ERROR):
            by = f" by the {event['by']}" if event.get("by") else ""
            what = "fenced" if event["ev"] == Event.FENCED else "stopped on an error"
            return f"{what}{by}: {event.get('reason') or event.get('error')}"
    return "no reason in its history"


def sent_ids(level_run: LevelRun) -> list[int]:
    """The ids the level's producer instances wrote a `send` line for, in order."""
    ids: set[int] = set()
    for process in level_run.processes:
        if process.base == "producer":
            ids.update(e["id"] for e in read_jsonl(process.history) if e.get("ev") == Event.SEND)
    return sorted(ids)
