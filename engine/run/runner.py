"""Runs a scenario: its levels (engine.run.level_run), side by side or not, then records the run.

The levels run side by side in time unless a fault reaches beyond one level; a scenario
whose broker faults are shared runs them at once under one nemesis (schedule_of). Each level
is driven and read back by a LevelRun and judged by engine.judging.judge; the run folder is
engine.run.record's.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Literal

from engine.base import paths, settings
from engine.base.errors import LabError
from engine.cluster.base import Cluster
from engine.judging.judge import LevelResult
from engine.model.history import Tail
from engine.model.levels import LEVELS
from engine.proc.processes import RoleProcess, exit_words
from engine.run import record
from engine.run.level_run import (  # the names other modules take from the runner
    LevelRun,
    RunFailed,
    calm_leader,
    every_level_nemesis,
    producer_config,
    replica_watches,
)
from engine.run.nemesis import (
    Nemesis,
    reaches_beyond_level,
)
from engine.run.progress import Progress, Step
from engine.run.replica_watches import ReplicaWatches
from engine.scenarios.scenario import Scenario

__all__ = ["LevelRun", "RunFailed", "producer_config", "run_scenario", "schedule_of"]


# How a run's levels share time (schedule_of).
Schedule = Literal["side-by-side", "shared-faults", "one-at-a-time"]


class LevelUnavailableError(LabError):
    """A level cannot run here (its database does not answer); the other levels still run."""


def _mask_password(dsn: str) -> str:
    return re.sub(r"(://[^:@/]+):[^@/]*@", r"\1:***@", dsn)


def level_unavailable(name: str) -> str | None:
    """Why a level cannot run on this machine (one line that says what to do), or None.

    Only the idempotency-key level needs something beyond Kafka: the PostgreSQL that
    LAB_DEDUP_DSN names, asked before the run so that its absence costs no other level.
    """
    dsn = settings.DEDUP_DSN.get()
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
    if scenario.kafka_from is not None and scenario.kafka_from.refuses(cluster.kafka_version):
        raise LabError(
            f"Scenario '{scenario.name}' needs Kafka {scenario.kafka_from.version} or newer "
            f"({scenario.kafka_from.why}); this cluster runs Kafka {cluster.kafka_version}. "
            f"Run it on a newer one, e.g. --kafka-version {paths.pom_kafka_version()}."
        )
    schedule = schedule_of(scenario, side_by_side)
    # A level whose own prerequisite is missing (a database) is not run; the others are, and
    # the run records and returns them with the reason, which the pages and the CLI show.
    not_run = {name: why for name in chosen if (why := level_unavailable(name))}
    runnable = [name for name in chosen if name not in not_run]
    run_id = run_id or new_run_id(scenario.name)
    folder = record.create_run_folder(run_id, scenario, source_text, cluster, chosen)
    report = progress or (lambda _what, _fraction: None)
    results: dict[str, LevelResult] = {}
    try:
        if not runnable:
            raise LevelUnavailableError(" ".join(not_run.values()))
        if schedule == "shared-faults":
            _run_shared_faults(scenario, cluster, run_id, folder, runnable, report, results)
        elif schedule == "side-by-side" and len(runnable) > 1:
            _run_side_by_side(scenario, cluster, run_id, folder, runnable, report, results)
        else:
            for index, name in enumerate(runnable):

                def step(what: Step, i: int = index) -> None:
                    report(what, i / len(runnable))

                results[name] = _run_level(scenario, cluster, run_id, folder, name, step)
        report(Step("done"), 1.0)
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
        record.finish_run(folder, status="failed", reason=reason, results=results)
        raise
    output = record.run_output(run_id, scenario.name, results, not_run)
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
    step: Callable[[Step], None],
) -> LevelResult:
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
    results: dict[str, LevelResult],
) -> None:
    """Every level in its own thread, at the same time; results kept in the chosen order.

    A level that fails does not cut the others short: they finish and are recorded, and the
    first failure is raised after them.
    """
    finished: set[str] = set()
    lock = threading.Lock()

    def step(what: Step) -> None:
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
                report(Step("judged", names[future]), len(finished) / len(chosen))
    _gather({name: future for future, name in names.items()}, chosen, results)


def _gather(futures: dict[str, Future], chosen: list[str], results: dict[str, LevelResult]) -> None:
    """Each finished level's result, in the chosen order; the first failure raised after."""
    errors = [error for name in chosen if (error := futures[name].exception()) is not None]
    for name in chosen:
        if futures[name].exception() is None:
            results[name] = futures[name].result()
    if errors:
        raise errors[0]


def _run_shared_faults(
    scenario: Scenario,
    cluster: Cluster,
    run_id: str,
    folder: Path,
    chosen: list[str],
    report: Progress,
    results: dict[str, LevelResult],
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

    def step(what: Step) -> None:
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
            return level_run.start_part("producer", spec)

        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            producers = [done.result() for done in [pool.submit(prepare, r) for r in runs]]
        step(Step("waiting for every producer to start"))
        _wait_for_event(producers, "ready", timeout=60.0)
        started = time.time()
        # Every level's judged topic has the same leader (the lab's placement).
        nemesis = every_level_nemesis(
            cluster, runs, list(scenario.faults), topic=runs[0].judged_topic, started_at=started
        )
        nemesis.tick()  # faults at 0 s are in place before the first message
        nemesis.wait_settled()
        gate.touch()
        together = ", ".join(LEVELS[name].title.lower() for name in chosen)
        for level_run in runs:
            level_run.started_at = started
            if len(runs) > 1:
                level_run.notes.append(
                    f"The levels ({together}) ran at the same time, their partitions on the "
                    "same nodes, and this scenario's broker faults struck them all at once."
                )
            step(Step("running", level_run.level.name))
        # As a level alone starts its watches (LevelRun._drive): once the run is under way,
        # and closed whatever happens next (an ElrWatch left running starts a JVM every 5 s).
        watches = replica_watches(nemesis, runs)
        try:
            _drive_together(nemesis, runs, started + scenario.timeout_s, watches)
        finally:
            watches.close()
            nemesis.heal()

        def finish(level_run: LevelRun) -> LevelResult:
            try:
                return level_run.finish(step)
            finally:
                with lock:
                    judged.add(level_run.level.name)
                step(Step("judged", level_run.level.name))

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
            if any(e.ev == event for e in tails[id(process)].read_new()):
                waiting.remove(process)
            elif not process.alive():
                code = process.exit_code
                ended = "exited" if code is None else exit_words(code, killed=process.killed)
                raise RunFailed(
                    f"{process.name} ({process.history.parent.name}) {ended} before it "
                    "started; its log is in the run folder"
                )
        if waiting and time.time() > deadline:
            raise RunFailed(f"{len(waiting)} process(es) did not start within {timeout:.0f}s")
        time.sleep(0.02)


def _drive_together(
    nemesis: Nemesis, runs: list[LevelRun], deadline: float, watches: ReplicaWatches
) -> None:
    """Fire the shared faults until they are done and every level's clients are.

    A fault on a count of the producers' events fires once every level's producer has
    reached the count: the nemesis is given, for each event, the smallest count among the
    levels (their producers start together at the gate, so they are never far apart).
    `watches` reads each level's partition as a scenario with watch_isr asks.
    """
    tails: dict[Path, Tail] = {}
    counts: dict[str, Counter[tuple[str, str]]] = {r.level.name: Counter() for r in runs}
    while True:
        watches.poll()
        for level_run in runs:
            for process in level_run.processes:
                tail = tails.setdefault(process.history, Tail(process.history))
                for event in tail.read_new():
                    base = event.proc.split("#")[0]
                    counts[level_run.level.name][(base, str(event.ev))] += 1
        keys = set().union(*counts.values())
        nemesis.counts = Counter({k: min(c[k] for c in counts.values()) for k in keys})
        nemesis.tick()
        for level_run in runs:  # the levels share the faults: one dead role ends them all
            level_run.fail_on_outside_death()
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
