"""One guarantee level's run of a scenario: drive it, read it back, hand it to the judge.

One level's run:
1. create the run's own topics (names carry the run id and the level);
2. start the sink, a consumer at the level's isolation, on the judged topic;
3. start the clients as OS processes: the producer (and, for a processor pipeline, the
   processor after the input is written);
4. let the nemesis fire the faults as their triggers are met, and start replacements;
5. when the clients are done (or idle and caught up), read the judged topic back through the
   direct listener at both isolation levels, wait for the sink to see it all, stop everyone;
6. hand the history, what was read back and how the level ran to the judge (engine.judging.judge),
   and keep all three with the verdicts in the run folder (engine.run.record).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from engine.base import settings
from engine.base.errors import LabError
from engine.cluster.base import Cluster
from engine.faults import kind_of
from engine.judging.judge import EffectRows, LevelResult, LevelSettings, ReadBack, judge
from engine.kafka import admin
from engine.kafka.elr import describe_partition, replication_log_lines
from engine.kafka.reader import StableOffsetWatch, open_transactions, read_topic
from engine.model.events import Event, NemesisRecord, ProxyRecord
from engine.model.history import HistoryFanOut, HistoryWriter, Tail, merge
from engine.model.java_client import ClientSettings, settings_for
from engine.model.java_client import describe as describe_settings
from engine.model.levels import PROCESSOR_CONSUMER, Level
from engine.model.words import nodes_words
from engine.proc.failpoints import FailPoint
from engine.proc.processes import RoleProcess
from engine.proxy.control import read_events
from engine.roles.registry import Part, Role, Start, role_for, roles
from engine.run import record
from engine.run.nemesis import (
    Nemesis,
    NemesisContext,
    armed_point,
    fault_target,
    reaches_beyond_level,
)
from engine.run.progress import CREATING_TOPICS, Step
from engine.run.replica_watches import ReplicaWatches, WatchedTopic
from engine.scenarios.scenario import Fault, Scenario

# The coordinator looks for timed-out transactions every
# transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default); 5 s more for
# the abort's markers to be written.
TXN_ABORT_SCAN_S = 15.0
# How often a scenario with watch_offsets asks the leader for the LSO and high watermark.
OFFSETS_EVERY_S = 0.1
OFFSETS_SETTLE_S = 3.0  # after the clients end, how long the LSO may take to catch up

PROCESSOR_MODES = {
    "at-most-once": "commit-before",
    "at-least-once": "commit-after",
    "idempotent-only": "commit-after",
    "exactly-once": "transactional",
    "idempotency-key": "commit-after",
    "client-defaults": "commit-after",
}


class RunFailed(LabError):
    """A run that could not finish; it is recorded as failed with the reason."""


def sink_isolation(level: Level, chosen: str | None = None) -> str:
    """The isolation level the level's sink reads at (its consumer's isolation.level), or
    the one the scenario chose for every sink (Scenario.sink_isolation)."""
    return str(level.sink_config(chosen).get("isolation.level", "read_uncommitted"))


# The step a level reports while it makes its topics; its next step means they exist.


def judged_topic_name(run_id: str, level: str, pipeline: str) -> str:
    """The topic a level's run is judged on: the processor's output, else the producer's."""
    return f"lab.{run_id}.{level}.{'out' if pipeline == 'processor' else 'in'}"


def producer_config(scenario: Scenario, level: Level) -> dict[str, Any]:
    return {**level.producer, **scenario.producer_overrides.get(level.name, {})}


def producer_client_settings(scenario: Scenario, level: Level) -> ClientSettings:
    """The level's producer settings as the scenario's client gets them (engine/java_client)."""
    return settings_for(scenario.client, producer_config(scenario, level))


def client_note(settings: ClientSettings) -> str:
    """The evidence's line on which client produced, with what it was handed."""
    if settings.client == "librdkafka":
        return ""
    given = ", ".join(f"{k}={v}" for k, v in settings.config.items()) or "nothing but its names"
    words = "; ".join(describe_settings(settings))
    return f"The producer ran on the Java client (kafka-clients), given {given}. {words}".strip()


class LevelRun:
    """One guarantee level's run of a scenario on a cluster."""

    def __init__(
        self, scenario: Scenario, level: Level, cluster: Cluster, run_id: str, folder: Path
    ) -> None:
        self.scenario, self.level, self.cluster = scenario, level, cluster
        self.run_id = run_id
        self.folder = record.level_folder(folder, level.name)
        self.folder.mkdir(parents=True, exist_ok=True)
        prefix = f"lab.{run_id}.{level.name}"
        self.input_topic = f"{prefix}.in"
        self.output_topic = f"{prefix}.out"
        self.judged_topic = judged_topic_name(run_id, level.name, scenario.pipeline)
        self.sink_config = level.sink_config(scenario.sink_isolation)
        self.isolation = sink_isolation(level, scenario.sink_isolation)
        self.ledger = list(range(scenario.workload.messages))
        self.processes: list[RoleProcess] = []
        self.nemesis_history = HistoryWriter(self.folder / record.NEMESIS_HISTORY, "nemesis")
        # The producing application's own record of sends and acks (engine.roles.producer).
        self.outbox = self.folder / record.OUTBOX
        self.client_ids = {
            "producer": f"{run_id}-{level.name}-producer",
            "processor": f"{run_id}-{level.name}-processor",
        }
        self.started_at = time.time()
        # What the run's evidence must also say about how this level was run.
        self.producer_settings = producer_client_settings(scenario, level)
        note = client_note(self.producer_settings)
        self.notes: list[str] = [note] if note else []
        # Fault points armed in the first instance of a role (a replacement runs unarmed).
        self.failpoints: dict[str, FailPoint] = {
            fault_target(f): point for f in scenario.faults if (point := armed_point(f))
        }

    # ---- processes ---------------------------------------------------------------------
    def live(self, base: str) -> RoleProcess | None:
        """The newest live instance of a role that is not paused."""
        for process in reversed(self.processes):
            if process.base == base and process.alive() and not process.paused:
                return process
        return None

    def instance_name(self, base: str) -> str:
        n = sum(1 for p in self.processes if p.base == base)
        return base if n == 0 else f"{base}#{n + 1}"

    def start_part(
        self, part: Part, part_spec: dict[str, Any], *, beside_a_frozen_one: bool = False
    ) -> RoleProcess:
        """Start the role that plays `part` at this level (engine.roles.registry: the Java
        producer for a java scenario, Kafka Streams for its levels, else the Python role),
        given the part's spec as that role takes it."""
        role = role_for(part, self.scenario, self.level)
        start = Start(self, part_spec, beside_a_frozen_one=beside_a_frozen_one)
        return self.start_role(part, role, role.spec(start))

    def start_role(self, base: str, role: Role, spec: dict[str, Any]) -> RoleProcess:
        """Start `role` as a new instance of `base` ("producer", then "producer#2"...)."""
        name = self.instance_name(base)
        history = record.process_history(self.folder, name)
        spec = {
            **spec,
            "name": name,
            "history": str(history),
            "run_id": self.run_id,
            "level": self.level.name,
        }
        if name == base and base in self.failpoints:
            spec["failpoint"] = self.failpoints[base].to_spec()
        spec = role.checked_spec(spec)  # a wrong field stops here, before a process starts
        process = RoleProcess(
            name=name, role=role.entry, history=history, spec=spec, java=role.java
        )
        process.start(self.folder)
        self.processes.append(process)
        return process

    def producer_spec(self, ids: list[int], *, clean: bool = False) -> dict[str, Any]:
        workload = self.scenario.workload
        if clean:  # the processor pipeline's input: written exactly once, no faults
            config: dict[str, Any] = {"acks": "all", "enable.idempotence": True}
            txn = None
        else:
            config = self.producer_settings.config
            txn = None
            # A scenario about transactions themselves (aborted-transaction) makes every
            # level's producer transactional; the levels then differ in how they read.
            if self.level.transactional or self.scenario.transactions.get("all_levels"):
                txn = {
                    "id": f"{self.run_id}-{self.level.name}-producer-txn",
                    "size": workload.commit_every,
                    # The application's choice: a fenced instance that still owns the id
                    # (nobody replaced it: its own transaction timed out) starts a new
                    # producer and finishes the workload (engine.roles.producer).
                    "owner_file": str(self.folder / record.PRODUCER_OWNER),
                    "restart_when_fenced": True,
                    **self.scenario.transactions,
                }
        return {
            "bootstrap": self.cluster.proxied_bootstrap or self.cluster.direct_bootstrap,
            "client_id": self.client_ids["producer"] + ("-source" if clean else ""),
            "topic": self.input_topic,
            "ids": ids,
            "partitions": workload.partitions,
            "outbox": None if clean else str(self.outbox),
            "rate": workload.rate,
            "batch": workload.batch,
            "config": config,
            "transactional": txn,
        }

    def processor_spec(self) -> dict[str, Any]:
        workload = self.scenario.workload
        auto = self.scenario.auto_commit
        consumer_config = PROCESSOR_CONSUMER
        if auto is not None:  # the consumer's timer commits, not the level's rule
            consumer_config = {
                **PROCESSOR_CONSUMER,
                "enable.auto.commit": True,
                "auto.commit.interval.ms": auto.interval_ms,
            }
        return {
            "bootstrap": self.cluster.proxied_bootstrap or self.cluster.direct_bootstrap,
            "client_id": self.client_ids["processor"],
            "group": f"{self.run_id}-{self.level.name}-processor",
            # Static membership: a replacement is the same member of the group, restarted.
            "instance_id": f"{self.run_id}-{self.level.name}-processor-1",
            "input": self.input_topic,
            "output": self.output_topic,
            "partitions": workload.partitions,
            "mode": PROCESSOR_MODES.get(self.level.name) if auto is None else "auto-commit",
            "await_auto_commit": auto is not None and auto.await_before_output,
            "commit_every": workload.commit_every,
            "processing_ms": workload.processing_ms,
            "config": producer_config(self.scenario, self.level),
            "consumer_config": consumer_config,
            "transactional_id": f"{self.run_id}-{self.level.name}-processor-txn",
            # The application's choice, as for the producer: a fenced instance that still
            # owns the id restarts its producer (engine.roles.processor.restart_producer).
            "owner_file": str(self.folder / record.PROCESSOR_OWNER),
            "restart_when_fenced": self.scenario.transactions.get("restart_when_fenced", True),
        }

    def replace(self, base: str, fault: Fault) -> None:
        """Start a new instance of a crashed or paused role, as an operator's restart would."""
        if base == "producer":
            spec = self.producer_spec(self.ledger)
            spec["resume"] = {"policy": self.resend_policy(fault), "outbox": str(self.outbox)}
            self.start_part("producer", spec)
        elif base == "processor":
            # A lasting fault (a pause, until its resume) leaves the first instance alive.
            self.start_processor(beside_a_frozen_one=kind_of(fault.kind).ended_by is not None)

    def start_processor(self, *, beside_a_frozen_one: bool = False) -> RoleProcess:
        """The level's processor: the Python one, or the Kafka Streams one (a JVM)."""
        return self.start_part(
            "processor", self.processor_spec(), beside_a_frozen_one=beside_a_frozen_one
        )

    def resend_policy(self, fault: Fault) -> str:
        """How a replacement producer decides what to send: the application's choice.

        It knows only what an application could: its own outbox (what it marked sent or
        acknowledged) or, for a transactional producer, what the topic holds at
        read_committed. The page labels the policy as the application's.
        """
        if self.level.name == "at-most-once" or not fault.resend_unacked:
            return "never-resend"
        if self.level.transactional or self.scenario.transactions.get("all_levels"):
            return "read-committed"
        return "resend-unacked"

    # ---- the run -----------------------------------------------------------------------
    def prepare(
        self,
        progress: Callable[[Step], None],
        *,
        leader: int | None = None,
        spare: int | None = None,
    ) -> None:
        """Create the level's topics and start its sink: how every run of a level begins.

        `leader` puts that node first in every partition's replica list, so it leads them all
        (free play kills "the leader" of every level's topics at once); `spare` is the node
        placed last among the followers, so that with fewer replicas than nodes it holds none
        (shared faults spare the active controller).
        """
        sc, workload = self.scenario, self.scenario.workload
        direct = self.cluster.direct_bootstrap
        progress(Step(CREATING_TOPICS, self.level.name))
        assignment = None
        if leader is None and sc.shared_faults:  # the same placement, one level at a time too
            leader, spare = calm_leader(self.cluster)
        if leader is not None:
            others = sorted(
                (n for n in self.cluster.node_ids if n != leader), key=lambda n: n == spare
            )
            others = others[: sc.replication - 1]
            assignment = [[leader, *others]] * workload.partitions
            if sc.shared_faults:
                self.notes.append(placement_note([leader, *others], spare))
        elif sc.replicas_avoid_controller:
            controller = self.cluster.active_controller()
            assignment = [[n for n in self.cluster.node_ids if n != controller]] * (
                workload.partitions
            )
        for topic in {self.input_topic, self.judged_topic}:
            admin.create_topic(
                direct,
                topic,
                partitions=workload.partitions,
                replication=sc.replication,
                config=sc.topic_config,
                replica_assignment=assignment,
            )
        self.start_part("sink", self.sink_spec())

    def sink_spec(self) -> dict[str, Any]:
        return {
            "bootstrap": self.cluster.proxied_bootstrap or self.cluster.direct_bootstrap,
            "client_id": f"{self.run_id}-{self.level.name}-sink",
            "group": f"{self.run_id}-{self.level.name}-sink",
            "topic": self.judged_topic,
            "partitions": self.scenario.workload.partitions,
            "config": self.sink_config,
            # The idempotency-key level's sink applies each id once, keyed in a database.
            "dedup_store": self.dedup_store(),
        }

    def new_nemesis(self, faults: list[Fault]) -> Nemesis:
        """A nemesis for this level: its topic, its clients' ids, its processes, its history."""
        sc = self.scenario
        return Nemesis(
            faults,
            NemesisContext(
                cluster=self.cluster,
                topic=self.judged_topic if sc.pipeline == "producer" else self.input_topic,
                client_ids=self.client_ids,
                processes=self.live,
                replace=self.replace,
                history=self.nemesis_history,
                started_at=self.started_at,
            ),
        )

    def run(self, progress: Callable[[Step], None]) -> LevelResult:
        sc = self.scenario
        self.prepare(progress)
        if sc.pipeline == "processor":
            progress(Step(f"writing {len(self.ledger)} input messages", self.level.name))
            # Always librdkafka's producer, idempotent: the input is not what is judged.
            source = self.start_role(
                "source", roles()["producer"], self.producer_spec(self.ledger, clean=True)
            )
            if not source.wait(sc.timeout_s):
                raise RunFailed(f"the input producer did not finish within {sc.timeout_s:.0f}s")

        self.started_at = time.time()
        nemesis = self.new_nemesis(list(sc.faults))
        nemesis.tick()  # faults at 0 s are in place before the first message
        nemesis.wait_settled()
        if sc.pipeline == "producer":
            self.start_part("producer", self.producer_spec(self.ledger))
        else:
            self.start_processor()
        progress(Step("running", self.level.name))
        try:
            self._drive(nemesis)
        finally:
            nemesis.heal()
        return self.finish(progress)

    def _drive(self, nemesis: Nemesis) -> None:
        tails: dict[Path, Tail] = {}
        proxy_tail = Tail(self.cluster.proxy.events_path) if self.cluster.proxy else None
        deadline = self.started_at + self.scenario.timeout_s
        watches = replica_watches(nemesis, [self])
        offsets = None
        try:
            if self.scenario.watch_offsets:
                offsets = StableOffsetWatch(self.cluster.direct_bootstrap, self.judged_topic)
            self._drive_loop(nemesis, tails, proxy_tail, deadline, watches, offsets)
            if offsets is not None:
                self._last_offsets(nemesis, offsets)
        finally:
            watches.close()
            if offsets is not None:
                offsets.close()

    def _last_offsets(self, nemesis: Nemesis, offsets: StableOffsetWatch) -> None:
        """The LSO's last moves after the clients ended, until it reaches the high watermark
        (at most OFFSETS_SETTLE_S): the loop's last reading can come before the last
        transaction's markers move it (the LSO stops at a transaction's first offset until
        the transaction ends, KIP-98). A run of transaction-timeout ended with its last
        reading at LSO 18, high watermark 20 (tests/ui/test_app_pages.py)."""
        deadline = time.time() + OFFSETS_SETTLE_S
        while True:
            if (moved := offsets.changed()) is not None:
                nemesis.record(NemesisRecord.OFFSETS, lso=moved[0], high_watermark=moved[1])
            state = offsets.last
            if (state is not None and state[0] >= state[1]) or time.time() >= deadline:
                return
            time.sleep(OFFSETS_EVERY_S)

    def _drive_loop(
        self,
        nemesis: Nemesis,
        tails: dict[Path, Tail],
        proxy_tail: Tail | None,
        deadline: float,
        watches: ReplicaWatches,
        offsets: StableOffsetWatch | None = None,
    ) -> None:
        next_offsets = 0.0
        while True:
            if offsets is not None and time.time() >= next_offsets:
                next_offsets = time.time() + OFFSETS_EVERY_S
                if (moved := offsets.changed()) is not None:
                    nemesis.record(NemesisRecord.OFFSETS, lso=moved[0], high_watermark=moved[1])
            watches.poll()
            for process in self.processes:
                tail = tails.setdefault(process.history, Tail(process.history))
                nemesis.observe(tail.read_new())
            if proxy_tail is not None:
                nemesis.observe(self._our_proxy_events(proxy_tail.read_new()))
            nemesis.tick()
            self.fail_on_outside_death()
            if nemesis.pending and self.clients_finished():
                nemesis.drop_unreachable()
            if nemesis.done and self.clients_finished():
                return
            if time.time() > deadline:
                raise RunFailed(
                    f"{self.level.name} did not finish within {self.scenario.timeout_s:.0f}s "
                    "(raise timeout_s in the scenario, or look at the clients' logs in the run "
                    "folder)"
                )
            time.sleep(0.05)

    def fail_on_outside_death(self) -> None:
        """End this level at once when one of its roles was killed from outside the lab: its
        work will never be done, and waiting for timeout_s would only hide why."""
        for process in self.processes:
            if (how := process.died_outside_the_lab()) is not None:
                raise RunFailed(
                    f"{self.level.name}: {how}, so this level cannot finish; the other levels "
                    "go on and are recorded (its log is in the run folder)"
                )

    def _our_proxy_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The proxy's events caused by this level's clients, as history-shaped events."""
        ours = tuple(self.client_ids.values())
        return [
            {"t": e["ts"], "proc": "proxy", "ev": e["kind"]}
            for e in events
            if e.get("ts", 0) >= self.started_at - 0.5
            and (e.get("client_id") or "").startswith(ours)
        ]

    def clients_finished(self) -> bool:
        if self.scenario.pipeline == "producer":
            return not any(p.alive() for p in self.processes if p.base == "producer")
        processors = [p for p in self.processes if p.base == "processor" and p.alive()]
        if not processors:
            # Every processor has exited (crashed without a replacement, or fenced): nothing
            # more will be processed, and what it left undone is "not processed yet".
            return True
        if any(p.paused for p in processors):
            return False
        if not all(last_event(p.history) in ("idle", "done") for p in processors):
            return False
        return self._input_fully_committed()

    def _input_fully_committed(self) -> bool:
        return self._group_offsets(with_ends=True) is None

    def _group_offsets(self, with_ends: bool = False) -> dict[int, int] | None:
        """The processor group's committed offset of each input partition (0 where it never
        committed). With `with_ends`: None once every partition is committed to its end."""
        group = f"{self.run_id}-{self.level.name}-processor"
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.direct_bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "logger": admin.log,
            }
        )
        try:
            partitions = [
                TopicPartition(self.input_topic, p)
                for p in range(self.scenario.workload.partitions)
            ]
            committed = consumer.committed(partitions, timeout=5)
            offsets = {tp.partition: max(0, tp.offset) for tp in committed}
            if not with_ends:
                return offsets
            for tp in committed:
                _, high = consumer.get_watermark_offsets(tp, timeout=5)
                if tp.offset < high:
                    return offsets
            return None
        finally:
            consumer.close()

    def _group_committed_events(self) -> list[dict[str, Any]]:
        """Where the processor's group stood at the end, as history events: an input at or
        past it was not processed yet (engine.judging.checker), which is not a loss."""
        if self.scenario.pipeline != "processor":
            return []
        try:
            offsets = self._group_offsets() or {}
        except KafkaException:
            return []  # not known: the checker then judges without it, as before
        now = time.time()
        return [
            {"t": now, "proc": "runner", "ev": "group_committed", "partition": p, "offset": o}
            for p, o in sorted(offsets.items())
        ]

    def finish(self, progress: Callable[[Step], None]) -> LevelResult:
        """Read the judged topic back, stop everyone, judge (engine.judging.judge), keep the
        files."""
        read = self.read_back(progress)
        for process in self.processes:
            process.stop()
        self.nemesis_history.close()
        own = [p.history for p in self.processes]
        history = merge([*own, self.folder / record.NEMESIS_HISTORY])
        history += self._group_committed_events()
        read = replace(read, proxy_faults=self._proxy_faults(), effect_rows=self._effect_rows())
        ran = self.how_it_ran()
        record.write_judge_inputs(self.folder, history, read, ran)  # first: judged again offline
        judged = judge(history, read, ran)
        record.write_verdicts(self.folder, judged.verdicts)
        return judged.result

    def read_back(self, progress: Callable[[Step], None]) -> ReadBack:
        """The judged topic at both isolations, once every transaction on it has ended."""
        direct = self.cluster.direct_bootstrap
        partitions = self.scenario.workload.partitions
        # Judge only once every transaction on the topic has ended (LSO = high watermark):
        # an open one is neither committed nor aborted yet. A transaction nobody ends is
        # aborted by its coordinator within transaction.timeout.ms plus its abort scan.
        in_sync = True
        if reaches_beyond_level(self.scenario.faults):
            # Brokers were hurt: read once every replica is back in sync, or the high
            # watermark may not have caught up with what the leader holds.
            progress(Step("waiting until every replica is back in sync", self.level.name))
            in_sync = admin.wait_for_full_isr(direct, self.judged_topic, timeout=60.0)
        if self.scenario.watch_elr:
            self._record_replication_evidence()
        progress(Step("waiting until no transaction is open on the topic", self.level.name))
        txn_timeout_s = (
            int(producer_config(self.scenario, self.level).get("transaction.timeout.ms", 60000))
            / 1000.0
        )
        waited_s = txn_timeout_s + TXN_ABORT_SCAN_S
        still_open = open_transactions(direct, self.judged_topic, partitions, waited_s)
        progress(Step("reading the topic back", self.level.name))
        at_level = read_topic(direct, self.judged_topic, self.isolation, partitions)
        committed = (
            at_level
            if self.isolation == "read_committed"
            else read_topic(direct, self.judged_topic, "read_committed", partitions)
        )
        uncommitted = (
            read_topic(direct, self.judged_topic, "read_uncommitted", partitions)
            if self.isolation == "read_committed"
            else None
        )
        self._wait_for_sink(len(at_level))
        return ReadBack(
            isolation=self.isolation,
            at_level=at_level,
            committed=committed,
            uncommitted=uncommitted,
            still_open=still_open,
            waited_s=waited_s,
            in_sync=in_sync,
        )

    def how_it_ran(self) -> LevelSettings:
        """How this level ran, for the judge and the run folder."""
        return LevelSettings(
            level=self.level.name,
            pipeline=self.scenario.pipeline,
            ledger=list(self.ledger),
            sink_topic=self.judged_topic,
            label=self.label(),
            started_at=self.started_at,
            duration_s=round(time.time() - self.started_at, 2),
            producer_config=self.producer_settings.config,
            consumer_config=self.sink_config,
            notes=list(self.notes),
        )

    def _record_replication_evidence(self) -> None:
        """The partition's replica sets as the run ends, and what the brokers logged of its
        unclean elections and truncations since the level started (their own lines)."""
        state = describe_partition(self.cluster.direct_bootstrap, self.judged_topic)
        if state is not None:
            self.nemesis_history.write(
                Event.NEMESIS,
                kind=NemesisRecord.ELR,
                read_at=time.time(),
                final=True,
                **state.to_json(),
            )
        logs = {n: self.cluster.node_log_since(n, self.started_at) for n in self.cluster.node_ids}
        for node, line in replication_log_lines(logs, self.judged_topic):
            self.nemesis_history.write(
                Event.NEMESIS, kind=NemesisRecord.BROKER_LOG, node=node, line=line
            )

    def dedup_store(self) -> dict[str, Any] | None:
        """SQLite in the run folder, or the PostgreSQL that LAB_DEDUP_DSN names."""
        if self.level.name != "idempotency-key":
            return None
        if dsn := settings.DEDUP_DSN.get():
            return {"kind": "postgres", "dsn": dsn}
        return {"kind": "sqlite", "path": str(self.folder / "effects.sqlite")}

    def _effect_rows(self) -> EffectRows | None:
        """For the idempotency-key level: what reached the database, read from the database."""
        store = self.dedup_store()
        if store is None:
            return None
        query = "SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}"
        if store["kind"] == "postgres":
            import psycopg

            with psycopg.connect(store["dsn"]) as conn:
                rows = conn.execute(
                    query.format(table="lab_effects") + " WHERE run_id = %s AND level = %s",
                    (self.run_id, self.level.name),
                ).fetchone()
        else:
            import sqlite3

            if not Path(store["path"]).exists():
                return None
            with sqlite3.connect(store["path"]) as conn:
                rows = conn.execute(query.format(table="effects")).fetchone()
        return EffectRows(effects=rows[0], effect_ids=rows[1], store=store["kind"])

    def _wait_for_sink(self, expected: int, timeout: float = 15.0) -> None:
        sink = next(p for p in self.processes if p.base == "sink")
        tail, seen = Tail(sink.history), 0  # read only what the sink appended since last time
        deadline = time.time() + timeout
        while time.time() < deadline:
            seen += sum(1 for e in tail.read_new() if e.ev == Event.CONSUMED)
            if seen >= expected:
                return
            time.sleep(0.1)

    def _proxy_faults(self) -> list[dict[str, Any]]:
        """The fault proxy's events caused by this level's clients since it started."""
        proxy = self.cluster.proxy
        if proxy is None:
            return []
        ours = tuple(self.client_ids.values())
        faults = []
        for event in read_events(proxy.events_path, since_ts=self.started_at - 1):
            client = event.get("client_id") or ""
            if event["kind"] == ProxyRecord.PROXY_STARTED:
                continue
            if client and not client.startswith(ours):
                continue  # another run's fault
            faults.append(
                {"t": event["ts"], "source": "proxy"}
                | {k: v for k, v in event.items() if k != "ts"}
            )
        return faults

    def label(self) -> str | None:
        """What the level really runs as, where the scenario changed it; None where it didn't.

        A scenario about transactions themselves makes every level's producer transactional:
        its levels then differ only in how their sink reads.
        """
        if self.scenario.transactions.get("all_levels") and not self.level.transactional:
            return f"a {self.isolation} reader of a transactional producer"
        if (auto := self.scenario.auto_commit) is not None:
            return f"its processor auto-commits every {auto.interval_ms} ms"
        if self.isolation != sink_isolation(self.level):
            return f"its downstream consumer reads at {self.isolation} (the application's choice)"
        return None


def last_event(path: Path) -> str | None:
    events = merge([path])
    return events[-1].ev if events else None


def every_level_nemesis(
    cluster: Cluster,
    runs: list[LevelRun],
    faults: list[Fault],
    *,
    topic: str,
    started_at: float,
) -> Nemesis:
    """One nemesis for several levels at once, for the faults that strike brokers: each of its
    lines is written once, with one time, into every one of the levels' histories
    (HistoryFanOut). `topic` is the one whose leader it finds; the levels' partitions share
    their leader (a scenario's shared faults, free play's broker strikes). It has no clients
    of its own to crash or replace.
    """
    return Nemesis(
        faults,
        NemesisContext(
            cluster=cluster,
            topic=topic,
            client_ids={},
            processes=lambda _base: None,
            replace=lambda _base, _fault: None,
            history=HistoryFanOut([level_run.nemesis_history for level_run in runs]),
            started_at=started_at,
        ),
    )


def replica_watches(nemesis: Nemesis, runs: list[LevelRun]) -> ReplicaWatches:
    """The scenario's ISR and ELR watches over the levels' judged topics (none if it asks for
    neither), each level's readings in its own history."""
    sc, cluster = runs[0].scenario, runs[0].cluster
    return ReplicaWatches(
        nemesis,
        [WatchedTopic(r.judged_topic, r.nemesis_history) for r in runs],
        bootstrap=cluster.direct_bootstrap,
        running_bootstrap=cluster.running_bootstrap,
        isr=sc.watch_isr or sc.watch_elr,
        elr=sc.watch_elr,
    )


def placement_note(replicas: list[int], controller: int | None) -> str:
    """What the run's evidence says of the lab's placement of a shared-faults partition."""
    spared = (
        "which holds no replica of it, so that no fault on the partition's nodes stops it"
        if controller not in replicas
        else "one of its followers"
    )
    return (
        f"The lab placed the partition on {nodes_words(list(replicas))}, led by node "
        f"{replicas[0]}, so that the scenario's faults find the same leader and followers at "
        f"every level; the active controller is node {controller}, {spared}."
    )


def calm_leader(cluster: Cluster) -> tuple[int, int]:
    """(a node that is not the active controller, the active controller): where a scenario
    with shared faults places its partitions' leader, and the node it places last."""
    controller = cluster.active_controller()
    return next(n for n in cluster.node_ids if n != controller), controller
