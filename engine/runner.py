"""Runs a scenario: for each level, workload -> clients -> nemesis -> checker, then records it.

The levels run side by side in time unless a fault reaches beyond one level; a scenario
whose broker faults are shared runs them at once under one nemesis (schedule_of).

One level's run:
1. create the run's own topics (names carry the run id and the level);
2. start the sink, a consumer at the level's isolation, on the judged topic;
3. start the clients as OS processes: the producer (and, for a processor pipeline, the
   processor after the input is written);
4. let the nemesis fire the faults as their triggers are met, and start replacements;
5. when the clients are done (or idle and caught up), read the judged topic back through the
   direct listener at both isolation levels, wait for the sink to see it all, stop everyone;
6. judge every message (engine.checker) and record everything under runs/RUN_ID/.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaException, TopicPartition

from engine import paths, record
from engine.checker import LevelCounts, Verdict, check, verdicts_to_rows
from engine.cluster.base import Cluster
from engine.errors import LabError
from engine.explain import broker_answers, explain, id_ranges, lost_coordinator_messages
from engine.failpoints import FailPoint
from engine.history import HistoryFanOut, HistoryWriter, Tail, merge
from engine.kafka import admin
from engine.kafka.elr import (
    ElrWatch,
    PartitionReplicas,
    describe_partition,
    replication_log_lines,
)
from engine.kafka.reader import PartitionWatch, StableOffsetWatch, open_transactions, read_topic
from engine.levels import LEVELS, PROCESSOR_CONSUMER, Level
from engine.nemesis import (
    Nemesis,
    NemesisContext,
    armed_point,
    fault_target,
    reaches_beyond_level,
)
from engine.processes import RoleProcess
from engine.proxy.control import read_events
from engine.scenario import Fault, Scenario

Progress = Callable[[str, float], None]  # (what is happening, fraction of the run done)

# How a run's levels share time (schedule_of).
Schedule = Literal["side-by-side", "shared-faults", "one-at-a-time"]

# The coordinator looks for timed-out transactions every
# transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default); 5 s more for
# the abort's markers to be written.
TXN_ABORT_SCAN_S = 15.0
# How often a scenario with watch_offsets asks the leader for the LSO and high watermark.
OFFSETS_EVERY_S = 0.1
# How often a scenario with watch_isr asks the cluster for its partition's leader and ISR.
WATCH_EVERY_S = 0.25

PROCESSOR_MODES = {
    "at-most-once": "commit-before",
    "at-least-once": "commit-after",
    "idempotent-only": "commit-after",
    "exactly-once": "transactional",
    "idempotency-key": "commit-after",
}


class RunFailed(LabError):
    """A run that could not finish; it is recorded as failed with the reason."""


class LevelUnavailableError(LabError):
    """A level cannot run here (its database does not answer); the other levels still run."""


def _mask_password(dsn: str) -> str:
    return re.sub(r"(://[^:@/]+):[^@/]*@", r"\1:***@", dsn)


def level_unavailable(name: str) -> str | None:
    """Why a level cannot run on this machine (one line that says what to do), or None.

    Only the idempotency-key level needs something beyond Kafka: the PostgreSQL that
    LAB_DEDUP_DSN names, asked before the run so that its absence costs no other level.
    """
    dsn = os.environ.get("LAB_DEDUP_DSN")
    if name != "idempotency-key" or not dsn:
        return None
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except (psycopg.Error, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why = first.removeprefix("connection failed: ")[:200]
        return (
            "The idempotency-key level keeps its keys in the PostgreSQL that LAB_DEDUP_DSN "
            f"names ({_mask_password(dsn)}), which does not answer ({why}). Start it "
            "(`docker compose up -d postgres`), or unset LAB_DEDUP_DSN to keep the keys in "
            "SQLite in the run folder."
        )
    return None


def new_run_id(scenario: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{scenario}-{secrets.token_hex(2)}"


def producer_config(scenario: Scenario, level: Level) -> dict[str, Any]:
    return {**level.producer, **scenario.producer_overrides.get(level.name, {})}


class LevelRun:
    """One guarantee level's run of a scenario on a cluster."""

    def __init__(
        self, scenario: Scenario, level: Level, cluster: Cluster, run_id: str, folder: Path
    ) -> None:
        self.scenario, self.level, self.cluster = scenario, level, cluster
        self.run_id = run_id
        self.folder = folder / "levels" / level.name
        self.folder.mkdir(parents=True, exist_ok=True)
        prefix = f"lab.{run_id}.{level.name}"
        self.input_topic = f"{prefix}.in"
        self.output_topic = f"{prefix}.out"
        self.judged_topic = (
            self.output_topic if scenario.pipeline == "processor" else self.input_topic
        )
        self.isolation = str(level.consumer.get("isolation.level", "read_uncommitted"))
        self.ledger = list(range(scenario.workload.messages))
        self.processes: list[RoleProcess] = []
        self.nemesis_history = HistoryWriter(self.folder / "nemesis.jsonl", "nemesis")
        # The producing application's own record of sends and acks (engine.roles.producer).
        self.outbox = self.folder / "outbox.jsonl"
        self.client_ids = {
            "producer": f"{run_id}-{level.name}-producer",
            "processor": f"{run_id}-{level.name}-processor",
        }
        self.started_at = time.time()
        # What the run's evidence must also say about how this level was run.
        self.notes: list[str] = []
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

    def start_role(self, base: str, role: str, spec: dict[str, Any]) -> RoleProcess:
        name = self.instance_name(base)
        history = self.folder / f"{name.replace('#', '-')}.jsonl"
        spec = {
            **spec,
            "name": name,
            "history": str(history),
            "run_id": self.run_id,
            "level": self.level.name,
        }
        if name == base and base in self.failpoints:
            spec["failpoint"] = self.failpoints[base].to_spec()
        process = RoleProcess(name=name, role=role, history=history, spec=spec).start(self.folder)
        self.processes.append(process)
        return process

    def producer_spec(self, ids: list[int], *, clean: bool = False) -> dict[str, Any]:
        workload = self.scenario.workload
        if clean:  # the processor pipeline's input: written exactly once, no faults
            config: dict[str, Any] = {"acks": "all", "enable.idempotence": True}
            txn = None
        else:
            config = producer_config(self.scenario, self.level)
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
                    "owner_file": str(self.folder / "producer-owner.txt"),
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
            "mode": PROCESSOR_MODES[self.level.name] if auto is None else "auto-commit",
            "await_auto_commit": auto is not None and auto.await_before_output,
            "commit_every": workload.commit_every,
            "processing_ms": workload.processing_ms,
            "config": producer_config(self.scenario, self.level),
            "consumer_config": consumer_config,
            "transactional_id": f"{self.run_id}-{self.level.name}-processor-txn",
            # The application's choice, as for the producer: a fenced instance that still
            # owns the id restarts its producer (engine.roles.processor.restart_producer).
            "owner_file": str(self.folder / "processor-owner.txt"),
            "restart_when_fenced": self.scenario.transactions.get("restart_when_fenced", True),
        }

    def replace(self, base: str, fault: Fault) -> None:
        """Start a new instance of a crashed or paused role, as an operator's restart would."""
        if base == "producer":
            spec = self.producer_spec(self.ledger)
            spec["resume"] = {"policy": self.resend_policy(fault), "outbox": str(self.outbox)}
            self.start_role("producer", "producer", spec)
        elif base == "processor":
            self.start_role("processor", "processor", self.processor_spec())

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
        progress: Callable[[str], None],
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
        progress(f"{self.level.title}: creating topics")
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
        self.start_role("sink", "sink", self.sink_spec())

    def sink_spec(self) -> dict[str, Any]:
        return {
            "bootstrap": self.cluster.proxied_bootstrap or self.cluster.direct_bootstrap,
            "client_id": f"{self.run_id}-{self.level.name}-sink",
            "group": f"{self.run_id}-{self.level.name}-sink",
            "topic": self.judged_topic,
            "partitions": self.scenario.workload.partitions,
            "config": self.level.consumer,
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

    def run(self, progress: Callable[[str], None]) -> dict[str, Any]:
        sc = self.scenario
        self.prepare(progress)
        if sc.pipeline == "processor":
            progress(f"{self.level.title}: writing {len(self.ledger)} input messages")
            source = self.start_role(
                "source", "producer", self.producer_spec(self.ledger, clean=True)
            )
            if not source.wait(sc.timeout_s):
                raise RunFailed(f"the input producer did not finish within {sc.timeout_s:.0f}s")

        self.started_at = time.time()
        nemesis = self.new_nemesis(list(sc.faults))
        nemesis.tick()  # faults at 0 s are in place before the first message
        if sc.pipeline == "producer":
            self.start_role("producer", "producer", self.producer_spec(self.ledger))
        else:
            self.start_role("processor", "processor", self.processor_spec())
        progress(f"{self.level.title}: running")
        try:
            self._drive(nemesis)
        finally:
            nemesis.heal()
        return self.finish(progress)

    def _drive(self, nemesis: Nemesis) -> None:
        tails: dict[Path, Tail] = {}
        proxy_tail = Tail(self.cluster.proxy.events_path) if self.cluster.proxy else None
        deadline = self.started_at + self.scenario.timeout_s
        watch = (
            PartitionWatch(self.cluster.direct_bootstrap, self.judged_topic)
            if self.scenario.watch_isr or self.scenario.watch_elr
            else None
        )
        elr_watch = None
        if self.scenario.watch_elr:

            def report(state: PartitionReplicas, at: float) -> None:
                nemesis.record("elr", read_at=at, **state.to_json())

            elr_watch = ElrWatch(self.cluster.running_bootstrap, self.judged_topic, report)
            nemesis.ctx.node_changed = elr_watch.poke
        offsets = (
            StableOffsetWatch(self.cluster.direct_bootstrap, self.judged_topic)
            if self.scenario.watch_offsets
            else None
        )
        try:
            self._drive_loop(nemesis, tails, proxy_tail, deadline, watch, elr_watch, offsets)
        finally:
            if watch is not None:
                watch.close()
            if offsets is not None:
                offsets.close()
            if elr_watch is not None:
                elr_watch.close(final_read=False)

    def _drive_loop(
        self,
        nemesis: Nemesis,
        tails: dict[Path, Tail],
        proxy_tail: Tail | None,
        deadline: float,
        watch: PartitionWatch | None,
        elr_watch: ElrWatch | None = None,
        offsets: StableOffsetWatch | None = None,
    ) -> None:
        next_watch = next_offsets = 0.0
        while True:
            if offsets is not None and time.time() >= next_offsets:
                next_offsets = time.time() + OFFSETS_EVERY_S
                if (moved := offsets.changed()) is not None:
                    nemesis.record("offsets", lso=moved[0], high_watermark=moved[1])
            if watch is not None and time.time() >= next_watch:
                next_watch = time.time() + WATCH_EVERY_S
                if (state := watch.changed()) is not None:
                    leader, isr, hw = state
                    nemesis.record("isr", leader=leader, isr=list(isr), high_watermark=hw)
                    if elr_watch is not None:
                        elr_watch.poke()
            for process in self.processes:
                tail = tails.setdefault(process.history, Tail(process.history))
                nemesis.observe(tail.read_new())
            if proxy_tail is not None:
                nemesis.observe(self._our_proxy_events(proxy_tail.read_new()))
            nemesis.tick()
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
        past it was not processed yet (engine.checker), which is not a loss."""
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

    def finish(self, progress: Callable[[str], None]) -> dict[str, Any]:
        """Read the judged topic back, stop everyone, judge every message, write the files."""
        direct = self.cluster.direct_bootstrap
        partitions = self.scenario.workload.partitions
        # Judge only once every transaction on the topic has ended (LSO = high watermark):
        # an open one is neither committed nor aborted yet. A transaction nobody ends is
        # aborted by its coordinator within transaction.timeout.ms plus its abort scan.
        in_sync = True
        if reaches_beyond_level(self.scenario.faults):
            # Brokers were hurt: read once every replica is back in sync, or the high
            # watermark may not have caught up with what the leader holds.
            progress(f"{self.level.title}: waiting until every replica is back in sync")
            in_sync = admin.wait_for_full_isr(direct, self.judged_topic, timeout=60.0)
        if self.scenario.watch_elr:
            self._record_replication_evidence()
        progress(f"{self.level.title}: waiting until no transaction is open on the topic")
        txn_timeout_s = (
            int(producer_config(self.scenario, self.level).get("transaction.timeout.ms", 60000))
            / 1000.0
        )
        still_open = open_transactions(
            direct, self.judged_topic, partitions, txn_timeout_s + TXN_ABORT_SCAN_S
        )
        progress(f"{self.level.title}: reading the topic back")
        at_level = read_topic(direct, self.judged_topic, self.isolation, partitions)
        committed = (
            at_level
            if self.isolation == "read_committed"
            else read_topic(direct, self.judged_topic, "read_committed", partitions)
        )
        self._wait_for_sink(len(at_level))
        for process in self.processes:
            process.stop()
        self.nemesis_history.close()

        history = merge([p.history for p in self.processes] + [self.folder / "nemesis.jsonl"])
        history += self._group_committed_events()
        verdicts, counts = check(
            ledger=self.ledger,
            history=history,
            stored=at_level,
            committed_view=committed,
            producer_procs=("producer", "source"),
        )
        faults = self._faults(history)
        effects = self._effects(history)
        why = explain(self.level.name, self.scenario.pipeline, history, counts, verdicts)
        why.evidence += broker_answers(faults)
        why.evidence += lost_coordinator_messages(faults)
        why.evidence += judging_caveats(still_open, verdicts, txn_timeout_s + TXN_ABORT_SCAN_S)
        why.evidence += self.notes
        if not in_sync:
            why.evidence.append(
                "A replica of the topic was still out of sync 60 s after the clients stopped: "
                "the topic was read as far as its high watermark then."
            )
        if effects.get("effect_ids") is not None:  # what the idempotency key made of it
            absorbed = effects["duplicates_absorbed"]
            why.headline += (
                f"; the database applied {effects['effects']} effects and absorbed {absorbed} "
                + ("duplicate delivery" if absorbed == 1 else "duplicate deliveries")
            )
        (self.folder / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
        (self.folder / "verdicts.json").write_text(json.dumps(verdicts_to_rows(verdicts)))
        (self.folder / "stored.json").write_text(
            json.dumps(
                {
                    "isolation": self.isolation,
                    "at_level": [asdict(r) for r in at_level],
                    "read_committed": [asdict(r) for r in committed],
                }
            )
        )
        open_txns = {str(p): list(ends) for p, ends in still_open.items()}
        return {
            **self._result(counts, faults),
            **effects,
            "open_transactions": open_txns,
            "explain": why.to_json(),
        }

    def _record_replication_evidence(self) -> None:
        """The partition's replica sets as the run ends, and what the brokers logged of its
        unclean elections and truncations since the level started (their own lines)."""
        state = describe_partition(self.cluster.direct_bootstrap, self.judged_topic)
        if state is not None:
            self.nemesis_history.write(
                "nemesis", kind="elr", read_at=time.time(), final=True, **state.to_json()
            )
        logs = {n: self.cluster.node_log_since(n, self.started_at) for n in self.cluster.node_ids}
        for node, line in replication_log_lines(logs, self.judged_topic):
            self.nemesis_history.write("nemesis", kind="broker-log", node=node, line=line)

    def dedup_store(self) -> dict[str, Any] | None:
        """SQLite in the run folder, or the PostgreSQL that LAB_DEDUP_DSN names."""
        if self.level.name != "idempotency-key":
            return None
        if dsn := os.environ.get("LAB_DEDUP_DSN"):
            return {"kind": "postgres", "dsn": dsn}
        return {"kind": "sqlite", "path": str(self.folder / "effects.sqlite")}

    def _effects(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """For the idempotency-key level: what reached the database, read from the database."""
        store = self.dedup_store()
        if store is None:
            return {}
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
                return {}
            with sqlite3.connect(store["path"]) as conn:
                rows = conn.execute(query.format(table="effects")).fetchone()
        skipped = sum(1 for e in history if e["ev"] == "effect_skipped")
        return {
            "effects": rows[0],
            "effect_ids": rows[1],
            "duplicates_absorbed": skipped,
            "effect_store": store["kind"],
        }

    def _wait_for_sink(self, expected: int, timeout: float = 15.0) -> None:
        sink = next(p for p in self.processes if p.base == "sink")
        tail, seen = Tail(sink.history), 0  # read only what the sink appended since last time
        deadline = time.time() + timeout
        while time.time() < deadline:
            seen += sum(1 for e in tail.read_new() if e["ev"] == "consumed")
            if seen >= expected:
                return
            time.sleep(0.1)

    def _faults(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        faults = [
            {
                "t": e["t"],
                "kind": e["kind"],
                **{k: v for k, v in e.items() if k not in ("t", "proc", "ev", "kind")},
            }
            for e in history
            if e["ev"] == "nemesis"
        ]
        proxy = self.cluster.proxy
        if proxy is not None:
            ours = tuple(self.client_ids.values())
            for event in read_events(proxy.events_path, since_ts=self.started_at - 1):
                client = event.get("client_id") or ""
                if event["kind"] == "proxy_started":
                    continue
                if client and not client.startswith(ours):
                    continue  # another run's fault
                faults.append(
                    {
                        "t": event["ts"],
                        "source": "proxy",
                        **{k: v for k, v in event.items() if k != "ts"},
                    }
                )
        faults.sort(key=lambda f: f["t"])
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
        return None

    def _result(self, counts: LevelCounts, faults: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "label": self.label(),
            "sink_topic": self.judged_topic,
            "isolation": self.isolation,
            "sent": counts.sent,
            "acked": counts.acked,
            "delivered": counts.delivered,
            "duplicates": counts.duplicates,
            "lost": counts.lost,
            "reordered": counts.reordered,
            "aborted_visible": counts.aborted_visible,
            "fenced": counts.fenced,
            "latency_ms": counts.latency_ms,
            "unseen_by_sink": counts.unseen_by_sink,
            "never_sent": counts.never_sent,
            "not_processed": counts.not_processed,
            "faults": faults,
            "started_at": self.started_at,
            "duration_s": round(time.time() - self.started_at, 2),
            "producer_config": producer_config(self.scenario, self.level),
            "consumer_config": self.level.consumer,
        }


def judging_caveats(
    still_open: dict[int, tuple[int, int]], verdicts: list[Verdict], waited_s: float
) -> list[str]:
    """What the counts cannot say, in the run's evidence: nothing is left out silently."""
    out = []
    for partition, (lso, hw) in sorted(still_open.items()):
        out.append(
            f"Partition {partition} still had an open transaction {waited_s:g} s after the "
            f"clients stopped (last stable offset {lso}, high watermark {hw}): its records "
            f"from offset {lso} on were judged neither committed nor aborted."
        )
    unseen = [v.id for v in verdicts if v.copies and v.consumed_at is None]
    if unseen:
        out.append(
            f"The sink never read {len(unseen)} stored message(s) (ids {id_ranges(unseen)}) "
            "before it was stopped: they count as delivered, without a latency."
        )
    return out


def last_event(path: Path) -> str | None:
    events = merge([path])
    return events[-1]["ev"] if events else None


def run_scenario(
    scenario: Scenario,
    cluster: Cluster,
    *,
    levels: list[str] | None = None,
    source_text: str | None = None,
    progress: Progress | None = None,
    run_id: str | None = None,
    side_by_side: bool | None = None,
) -> dict[str, Any]:
    """Run a scenario's levels and return the `engine run --json` object.

    How the levels share time is schedule_of's choice; `side_by_side=False` forces one at
    a time, and True is refused for a scenario whose faults would touch every level.
    """
    chosen = levels or scenario.levels
    for name in chosen:
        if name not in LEVELS:
            raise LabError(f"Unknown level '{name}'; known levels: {', '.join(LEVELS)}.")
    if len(cluster.node_ids) < scenario.nodes:
        raise LabError(
            f"Scenario '{scenario.name}' needs a {scenario.nodes}-node cluster; this one has "
            f"{len(cluster.node_ids)}. Start one with `python -m engine cluster up --nodes "
            f"{scenario.nodes}`."
        )
    schedule = schedule_of(scenario, side_by_side)
    # A level whose own prerequisite is missing (a database) is not run; the others are, and
    # the run records and returns them with the reason, which the pages and the CLI show.
    not_run = {name: why for name in chosen if (why := level_unavailable(name))}
    runnable = [name for name in chosen if name not in not_run]
    run_id = run_id or new_run_id(scenario.name)
    folder = record.create_run_folder(run_id, scenario, source_text, cluster, chosen)
    report = progress or (lambda _what, _fraction: None)
    results: dict[str, Any] = {}
    try:
        if not runnable:
            raise LevelUnavailableError(" ".join(not_run.values()))
        if schedule == "shared-faults":
            _run_shared_faults(scenario, cluster, run_id, folder, runnable, report, results)
        elif schedule == "side-by-side" and len(runnable) > 1:
            _run_side_by_side(scenario, cluster, run_id, folder, runnable, report, results)
        else:
            for index, name in enumerate(runnable):

                def step(what: str, i: int = index) -> None:
                    report(what, i / len(runnable))

                results[name] = _run_level(scenario, cluster, run_id, folder, name, step)
        report("done", 1.0)
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
        record.finish_run(folder, status="failed", reason=reason, results=results)
        raise
    output: dict[str, Any] = {"run_id": run_id, "scenario": scenario.name, "results": results}
    if not_run:
        output["not_run"] = not_run
    record.finish_run(folder, status="complete", results=results, not_run=not_run)
    record.prune_runs()  # keeps the disk use of runs/ bounded (LAB_KEEP_RUNS)
    return output


def schedule_of(scenario: Scenario, side_by_side: bool | None = None) -> Schedule:
    """How a scenario's levels run in time.

    - side by side, when no fault reaches beyond one level: each level has its own topics,
      clients, client ids and proxy rules, so its faults cannot touch another's;
    - shared faults, when the scenario says so (shared_faults): its broker faults strike
      every level at the same moment, from one nemesis (_run_shared_faults);
    - one at a time otherwise (a fault hurts brokers or the whole proxy), or when asked
      (`side_by_side=False`).
    """
    if side_by_side is False:
        return "one-at-a-time"
    if not reaches_beyond_level(list(scenario.faults)):
        return "side-by-side"
    if scenario.shared_faults:
        return "shared-faults"
    if side_by_side:
        raise LabError(
            f"Scenario '{scenario.name}' hurts brokers or the whole network, so its levels "
            "run one at a time (a fault in one level would strike the others too)."
        )
    return "one-at-a-time"


def _run_level(
    scenario: Scenario,
    cluster: Cluster,
    run_id: str,
    folder: Path,
    name: str,
    step: Callable[[str], None],
) -> dict[str, Any]:
    level_run = LevelRun(scenario, LEVELS[name], cluster, run_id, folder)
    try:
        return level_run.run(step)
    finally:
        for process in level_run.processes:
            process.stop(timeout=5)


def _run_side_by_side(
    scenario: Scenario,
    cluster: Cluster,
    run_id: str,
    folder: Path,
    chosen: list[str],
    report: Progress,
    results: dict[str, Any],
) -> None:
    """Every level in its own thread, at the same time; results kept in the chosen order.

    A level that fails does not cut the others short: they finish and are recorded, and the
    first failure is raised after them.
    """
    finished: set[str] = set()
    lock = threading.Lock()

    def step(what: str) -> None:
        with lock:
            report(what, len(finished) / len(chosen))

    with ThreadPoolExecutor(max_workers=len(chosen), thread_name_prefix=run_id) as pool:
        names = {
            pool.submit(_run_level, scenario, cluster, run_id, folder, name, step): name
            for name in chosen
        }
        for future in as_completed(names):
            with lock:
                finished.add(names[future])
                report(f"{LEVELS[names[future]].title}: judged", len(finished) / len(chosen))
    _gather({name: future for future, name in names.items()}, chosen, results)


def _gather(futures: dict[str, Future], chosen: list[str], results: dict[str, Any]) -> None:
    """Each finished level's result, in the chosen order; the first failure raised after."""
    errors = [error for name in chosen if (error := futures[name].exception()) is not None]
    for name in chosen:
        if futures[name].exception() is None:
            results[name] = futures[name].result()
    if errors:
        raise errors[0]


def placement_note(replicas: list[int], controller: int | None) -> str:
    """What the run's evidence says of the lab's placement of a shared-faults partition."""
    spared = (
        "which holds no replica of it, so that no fault on the partition's nodes stops it"
        if controller not in replicas
        else "one of its followers"
    )
    return (
        f"The lab placed the partition on nodes {replicas}, led by node {replicas[0]}, so that "
        f"the scenario's faults find the same leader and followers at every level; the active "
        f"controller is node {controller}, {spared}."
    )


def calm_leader(cluster: Cluster) -> tuple[int, int]:
    """(a node that is not the active controller, the active controller): where a scenario
    with shared faults places its partitions' leader, and the node it places last."""
    controller = cluster.active_controller()
    return next(n for n in cluster.node_ids if n != controller), controller


def _run_shared_faults(
    scenario: Scenario,
    cluster: Cluster,
    run_id: str,
    folder: Path,
    chosen: list[str],
    report: Progress,
    results: dict[str, Any],
) -> None:
    """Every level at once, under one nemesis whose broker faults strike them all together.

    Every level's partitions are placed on the same nodes, led by a node that is not the
    active controller, with the controller last among the followers (the lab's placement,
    said in each level's evidence), so "the leader" and "its followers" are the same nodes
    for all, and a scenario with fewer replicas than nodes never freezes the controller.
    The producers wait, started, at a gate; the nemesis's clock starts as it opens, with the
    faults at 0 s already in place; a fault on the producers' events fires once every
    level's producer has reached it. Each fault is written once, with one time, into every
    level's history.
    """
    runs = [LevelRun(scenario, LEVELS[name], cluster, run_id, folder) for name in chosen]
    judged: set[str] = set()
    lock = threading.Lock()

    def step(what: str) -> None:
        with lock:
            report(what, len(judged) / len(chosen))

    try:
        leader, controller = calm_leader(cluster)
        gate = folder / "start-gate"

        def prepare(level_run: LevelRun) -> RoleProcess:
            """Topics, sink, and a producer that waits at the gate: a few admin calls and
            two processes, each level's at once."""
            level_run.prepare(step, leader=leader, spare=controller)
            spec = {**level_run.producer_spec(level_run.ledger), "start_gate": str(gate)}
            return level_run.start_role("producer", "producer", spec)

        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            producers = [done.result() for done in [pool.submit(prepare, r) for r in runs]]
        step("waiting for every producer to start")
        _wait_for_event(producers, "ready", timeout=60.0)
        history = HistoryFanOut([level_run.nemesis_history for level_run in runs])
        started = time.time()
        nemesis = Nemesis(
            list(scenario.faults),
            NemesisContext(
                cluster=cluster,
                topic=runs[0].judged_topic,  # every level's has the same leader
                client_ids={},
                processes=lambda _base: None,
                replace=lambda _base, _fault: None,
                history=history,
                started_at=started,
            ),
        )
        nemesis.tick()  # faults at 0 s are in place before the first message
        gate.touch()
        together = ", ".join(LEVELS[name].title.lower() for name in chosen)
        for level_run in runs:
            level_run.started_at = started
            if len(runs) > 1:
                level_run.notes.append(
                    f"The levels ({together}) ran at the same time, their partitions on the "
                    "same nodes, and this scenario's broker faults struck them all at once."
                )
            step(f"{level_run.level.title}: running")
        try:
            _drive_together(nemesis, runs, started + scenario.timeout_s)
        finally:
            nemesis.heal()

        def finish(level_run: LevelRun) -> dict[str, Any]:
            try:
                return level_run.finish(step)
            finally:
                with lock:
                    judged.add(level_run.level.name)
                step(f"{level_run.level.title}: judged")

        with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix=run_id) as pool:
            futures = {r.level.name: pool.submit(finish, r) for r in runs}
        _gather(futures, chosen, results)
    finally:
        for level_run in runs:
            for process in level_run.processes:
                process.stop(timeout=5)


def _wait_for_event(processes: list[RoleProcess], event: str, timeout: float) -> None:
    """Until each process has written `event` to its history; RunFailed if one dies first."""
    deadline = time.time() + timeout
    tails = {id(p): Tail(p.history) for p in processes}
    waiting = list(processes)
    while waiting:
        for process in list(waiting):
            if any(e.get("ev") == event for e in tails[id(process)].read_new()):
                waiting.remove(process)
            elif not process.alive():
                raise RunFailed(
                    f"{process.name} ({process.history.parent.name}) exited before it started; "
                    "its log is in the run folder"
                )
        if waiting and time.time() > deadline:
            raise RunFailed(f"{len(waiting)} process(es) did not start within {timeout:.0f}s")
        time.sleep(0.02)


def _drive_together(nemesis: Nemesis, runs: list[LevelRun], deadline: float) -> None:
    """Fire the shared faults until they are done and every level's clients are.

    A fault on a count of the producers' events fires once every level's producer has
    reached the count: the nemesis is given, for each event, the smallest count among the
    levels (their producers start together at the gate, so they are never far apart).
    """
    tails: dict[Path, Tail] = {}
    counts: dict[str, Counter[tuple[str, str]]] = {r.level.name: Counter() for r in runs}
    while True:
        for level_run in runs:
            for process in level_run.processes:
                tail = tails.setdefault(process.history, Tail(process.history))
                for event in tail.read_new():
                    base = str(event.get("proc", "")).split("#")[0]
                    counts[level_run.level.name][(base, str(event.get("ev")))] += 1
        keys = set().union(*counts.values())
        nemesis.counts = Counter({k: min(c[k] for c in counts.values()) for k in keys})
        nemesis.tick()
        if nemesis.pending and all(level_run.clients_finished() for level_run in runs):
            nemesis.drop_unreachable()
        if nemesis.done and all(level_run.clients_finished() for level_run in runs):
            return
        if time.time() > deadline:
            late = [r.level.name for r in runs if not r.clients_finished()]
            raise RunFailed(
                f"{', '.join(late) or 'the faults'} did not finish within "
                f"{runs[0].scenario.timeout_s:.0f}s (raise timeout_s in the scenario, or look "
                "at the clients' logs in the run folder)"
            )
        time.sleep(0.05)


def default_runs_dir() -> Path:
    return paths.runs_dir()
