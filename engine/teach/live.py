"""A run as it happens: counts and faults read from its history files while they are written.

The live view on the pages draws only this: what the clients, the nemesis and the proxy have
already written to disk. Each file is followed with a `Tail`, so a poll reads only the lines
appended since the last one, and a torn last line (a writer mid-write or killed) waits until
it is complete. Nothing is estimated or animated.

runs/RUN_ID/levels/LEVEL/ holds one JSONL file per process (producer.jsonl, processor.jsonl,
processor-2.jsonl for a replacement, sink.jsonl, source.jsonl, nemesis.jsonl). The proxy's
events are in one file shared by every run on the cluster; the client id, which starts with
"RUN_ID-LEVEL-", says whose they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.faults import KINDS, fault_words
from engine.judging.explain import id_ranges
from engine.model.events import Event, NemesisRecord, ProxyRecord
from engine.model.history import Tail
from engine.model.words import error_words, nodes_words, point_words, process_words, say_error
from engine.run import record

# The per-process files; history.jsonl (written at the end, every event merged) and
# outbox.jsonl (the producer's application record) would count events twice.
PROCESS_FILE = record.PROCESS_HISTORY

PROXY_WORDS = {
    "produce_response_dropped": "ack of a Produce request dropped",
    "produce_request_dropped": "Produce request dropped before the broker",
    "offset_commit_response_dropped": "answer to an OffsetCommit dropped",
    "offset_commit_request_dropped": "OffsetCommit request dropped before the coordinator",
    "end_txn_response_dropped": "answer to an EndTxn dropped",
    "end_txn_request_dropped": "EndTxn request dropped before the coordinator",
}


def proxy_text(event: dict[str, Any]) -> str | None:
    """A proxy event in words, naming the request by Kafka's own correlation id."""
    kind, cid = str(event.get("kind")), event.get("correlation_id")
    if kind == ProxyRecord.PRODUCE_ERROR:
        request = f" (request {cid})" if cid is not None else ""
        return (
            f"node {event.get('node')} refused a write{request}: "
            f"{error_words(str(event.get('error') or ''), event.get('reason'))}"
        )
    if cid is None or kind not in PROXY_WORDS:
        return PROXY_WORDS.get(kind)
    reset = "; connection reset" if event.get("after") == "reset" else ""
    if kind == ProxyRecord.PRODUCE_RESPONSE_DROPPED:
        return f"ack of the Produce request with correlation id {cid} dropped{reset}"
    if kind == ProxyRecord.PRODUCE_REQUEST_DROPPED:
        return f"Produce request with correlation id {cid} dropped before the broker{reset}"
    held = "; connection held" if event.get("after") == "hold" else reset
    return f"{PROXY_WORDS[kind]} (correlation id {cid}){held}"


def fault_raw(event: dict[str, Any]) -> str:
    """The name behind a fault line that the room may read in small type: the error's own
    name, Kafka's ("NOT_ENOUGH_REPLICAS", also for one the proxy knew only by number) or the
    client's ("_FATAL", "CommitFailedException"), beside its words. The lab's own names (the
    event, the fault's kind, the fault point "after commit_gap #2") are not shown."""
    return say_error(str(event.get("error") or "")).raw if event.get("error") else ""


def fault_fold(event: dict[str, Any], text: str) -> str:
    """What makes two fault lines "the same again": a node refusing writes with the same
    error, whatever the request; otherwise the line itself. Repeats fold into one, counted."""
    if event.get("ev") == Event.PROXY and event.get("kind") == ProxyRecord.PRODUCE_ERROR:
        return f"produce_error:{event.get('node')}:{event.get('error')}"
    if event.get("ev") == Event.PROXY and event.get("kind") in PROXY_WORDS:
        return f"proxy:{event.get('kind')}"
    return text


def fold_text(event: dict[str, Any], text: str) -> str:
    """The words of a folded run of repeats: without the one request's correlation id."""
    kind = event.get("kind")
    if event.get("ev") == Event.PROXY and kind == ProxyRecord.PRODUCE_ERROR:
        return (
            f"node {event.get('node')} refused writes: "
            f"{error_words(str(event.get('error') or ''), event.get('reason'))}"
        )
    if event.get("ev") == Event.PROXY and kind in PROXY_WORDS:
        return PROXY_WORDS[str(kind)]
    return text


@dataclass(frozen=True)
class FaultLine:
    """A fault or a client's reaction to one, in words, at the moment the history gives."""

    t: float  # epoch seconds, as recorded
    text: str
    raw: str = ""  # the engine's names (kind, error code, fault point), for small type
    fold: str = ""  # equal for repeats of one fault (engine.teach.live.fold_faults)
    fold_text: str = ""  # the words of a folded run of repeats


@dataclass(frozen=True)
class FoldedFault:
    """A run of repeated fault lines, drawn once: its first and last moment, and how many."""

    t: float
    last_t: float
    text: str
    raw: str
    count: int


def fold_faults(lines: list[FaultLine] | tuple[FaultLine, ...]) -> list[FoldedFault]:
    """Consecutive repeats of one fault (dozens of refused writes while the ISR is short) as
    one line with a count; any other line in between starts a new run."""
    folded: list[FoldedFault] = []
    keys: list[str] = []
    for line in lines:
        key = line.fold or line.text
        if keys and keys[-1] == key:
            last = folded[-1]
            folded[-1] = FoldedFault(
                last.t, line.t, line.fold_text or last.text, last.raw, last.count + 1
            )
        else:
            folded.append(FoldedFault(line.t, line.t, line.text, line.raw, 1))
            keys.append(key)
    return folded


@dataclass(frozen=True)
class LevelSnapshot:
    """One level's counts so far; `started_at` is its first event under test, if any yet."""

    level: str
    sent: int = 0  # `send` by the producer (not the source that writes a processor's input)
    acked: int = 0  # `ack` by the producer
    failed: int = 0  # `fail` by the producer
    input_written: int = 0  # `ack` by the source
    read: int = 0  # `consumed` by the processor (every instance)
    outputs: int = 0  # `output_acked` by the processor (every instance)
    seen: int = 0  # `consumed` by the sink: copies, duplicates included
    seen_ids: int = 0  # distinct ids the sink has seen
    faults: tuple[FaultLine, ...] = ()
    started_at: float | None = None
    last_t: float | None = None

    @property
    def seen_again(self) -> int:
        """Copies the sink saw beyond each id's first: what a lost ack or a woken zombie adds."""
        return self.seen - self.seen_ids

    def since_start(self, t: float) -> float | None:
        """Seconds since the level started, as the finished run's timeline counts them."""
        return None if self.started_at is None else t - self.started_at


def fault_text(event: dict[str, Any]) -> str | None:
    """A history event that marks a fault, in words; None for ordinary traffic."""
    ev, role = event.get("ev"), str(event.get("proc", ""))
    proc = process_words(role)  # "processor#2" is "processor 2"
    if ev == Event.NEMESIS and event.get("kind") == NemesisRecord.OFFSETS:
        return offsets_text(event)
    if ev == Event.NEMESIS:
        return nemesis_text(event)
    if ev == Event.PROXY:
        return proxy_text(event)
    said = error_words(str(event.get("error") or ""), event.get("reason"))
    if ev == Event.FENCED:
        by = f" by the {event['by']}" if event.get("by") else ""
        # "fenced: a newer instance ..." would say fenced twice
        return f"{proc} fenced{by}: {said.removeprefix('fenced: ')}"
    if ev == Event.ERROR and role.split("#")[0] == "processor":  # it stopped: the room must see it
        return f"{proc} stopped on an error: {said}"
    if ev == Event.COMMIT_REJECTED:
        return f"{proc}'s offset commit refused: {said}"
    if ev == Event.TXN_ABORT and event.get("error"):
        return f"{proc} aborted its transaction: {said}"
    if ev == Event.TXN_ABORT:
        which = f" {event['txn']}" if event.get("txn") is not None else ""
        return f"{proc} aborted its transaction{which} (on purpose)"
    if ev == Event.START and "#" in role:
        return f"{proc} started (a replacement)"
    return None


def fault_line(event: dict[str, Any]) -> FaultLine | None:
    """A fault event as a line to draw: its words, its raw names and what folds it."""
    text = fault_text(event)
    if text is None:
        return None
    raw = fault_raw(event) if event.get("ev") != Event.START else ""
    t = float(event.get("t", 0.0))
    return FaultLine(t, text, raw, fault_fold(event, text), fold_text(event, text))


def nemesis_text(event: dict[str, Any], *, short: bool = False) -> str:
    """The nemesis's record of what it did, in the words the room reads; `short` for a chart's
    label (the fault point briefly, without the batch in hand)."""
    if isinstance(event.get("target"), str):  # a replacement "processor#2" is "processor 2"
        event = {**event, "target": process_words(event["target"])}
    kind, target = event.get("kind"), event.get("target")
    point = f" {point_words(str(event['point']), short=short)}" if event.get("point") else ""
    at = event.get("at") or {}
    if point and at.get("ids") and not short:  # where the fault point stopped it: the batch in hand
        held = [f"ids {id_ranges(at['ids'])}"]
        if at.get("batch") is not None:
            held.insert(0, f"batch {at['batch']}")
        elif at.get("txn") is not None:
            held.insert(0, f"transaction {at['txn']}")
        state = f": {at['state']}" if at.get("state") else ""  # what was done, what was not
        point += f" ({', '.join(held)}{state})"
    if short and (brief := SHORT_RECORDS.get(str(kind))) is not None:
        return brief(event)
    if (fault := KINDS.get(str(kind))) is not None:
        return (fault.short(event) if short else None) or fault.live(event, point)
    words = {
        "kill-node": f"broker node {event.get('node')} killed (this level's leader was node "
        f"{event.get('leader')})",
        "isr": isr_text(event),
        "node-stopped": f"node {event.get('node')} has stopped",
        "node-ready": f"node {event.get('node')} is back and registered",
        "restart-failed": f"node {event.get('node')} did not come back: {event.get('error')}",
        "elr": elr_text(event),
        "broker-log": f"node {event.get('node')} logged: {event.get('line')}",
        "supervisor-restart": f"{target} exited on its own; the application's supervisor "
        "starts a new instance",
        "fault-not-reached": f"{event.get('fault')} of {target} never fired "
        f"({event.get('point')}): the clients finished first",
    }
    return words.get(str(kind), f"{target or ''} {fault_words(str(kind))}".strip())


# A chart's label for the records (not fault kinds: those say their own, FaultKind.short) whose
# full words run long; the rest are short already.
SHORT_RECORDS = {
    "kill-node": lambda e: f"broker node {e.get('node')} killed",
    "isr": lambda e: f"in sync now: {nodes_words(e.get('isr'))}",
    "supervisor-restart": lambda e: f"{e.get('target')} restarted by its supervisor",
    "fault-not-reached": lambda e: f"{e.get('fault')} of {e.get('target')} never fired",
    "restart-failed": lambda e: f"node {e.get('node')} did not come back",
}


def offsets_text(event: dict[str, Any]) -> str | None:
    """The LSO and high watermark, in words, only while the LSO is behind: a transaction is
    open, and read_committed readers wait at the LSO."""
    lso, hw = event.get("lso"), event.get("high_watermark")
    if lso is None or hw is None or lso >= hw:
        return None
    return f"LSO {lso}, high watermark {hw}: read_committed readers wait at offset {lso}"


def isr_text(event: dict[str, Any]) -> str:
    if (event.get("leader") or 0) < 0:
        return f"no leader: the partition is offline (in sync: {nodes_words(event.get('isr'))})"
    hw = event.get("high_watermark")
    return (
        f"in-sync replicas now {nodes_words(event.get('isr'))} (leader node "
        f"{event.get('leader')}, high watermark {'not read' if hw is None else hw})"
    )


def elr_text(event: dict[str, Any]) -> str:
    """The replica sets Kafka's topic tool read: leader, ISR, ELR, last known leader."""
    leader = event.get("leader")
    who = f"leader node {leader}" if (leader or 0) >= 0 else "no leader"
    return (
        f"kafka-topics --describe: {who}; in sync: {nodes_words(event.get('isr'))}; "
        f"eligible to lead: {nodes_words(event.get('elr'))}; last known eligible: "
        f"{nodes_words(event.get('last_known_elr'))}"
    )


@dataclass
class LevelWatch:
    """Follows one level's folder; counts accumulate across polls."""

    level: str
    folder: Path
    tails: dict[Path, Tail] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    ids_seen: set[int] = field(default_factory=set)
    faults: list[FaultLine] = field(default_factory=list)
    started_at: float | None = None
    last_t: float | None = None

    def poll(self, proxy_events: list[dict[str, Any]] | None = None) -> LevelSnapshot:
        """Read what was appended since the last poll and return the counts so far."""
        for path in sorted(self.folder.glob("*.jsonl")):
            if PROCESS_FILE.fullmatch(path.name) and path not in self.tails:
                self.tails[path] = Tail(path)
        events = [e for tail in self.tails.values() for e in tail.read_new()]
        events.extend(proxy_events or [])
        for event in sorted(events, key=lambda e: e.get("t", 0.0)):
            self.observe(event)
        return self.snapshot()

    def observe(self, event: dict[str, Any]) -> None:
        base = str(event.get("proc", "")).split("#")[0]
        ev, t = str(event.get("ev")), float(event.get("t", 0.0))
        self.last_t = t if self.last_t is None else max(self.last_t, t)
        if base not in ("sink", "source", "proxy") or (base == "source" and ev == Event.DONE):
            self.started_at = t if self.started_at is None else min(self.started_at, t)
        key = f"{base}:{ev}"
        self.counts[key] = self.counts.get(key, 0) + 1
        if key == "sink:consumed" and event.get("id") is not None:
            self.ids_seen.add(int(event["id"]))
        if (line := fault_line(event)) is not None:
            self.faults.append(line)

    def snapshot(self) -> LevelSnapshot:
        c = self.counts.get
        return LevelSnapshot(
            level=self.level,
            sent=c("producer:send", 0),
            acked=c("producer:ack", 0),
            failed=c("producer:fail", 0),
            input_written=c("source:ack", 0),
            read=c("processor:consumed", 0),
            outputs=c("processor:output_acked", 0),
            seen=c("sink:consumed", 0),
            seen_ids=len(self.ids_seen),
            faults=tuple(sorted(self.faults, key=lambda f: f.t)),
            started_at=self.started_at,
            last_t=self.last_t,
        )


def proxy_as_history(event: dict[str, Any]) -> dict[str, Any]:
    """A proxy event (`ts`, `kind`, `client_id`) in the shape of a history event."""
    return {**event, "t": event.get("ts", 0.0), "proc": "proxy", "ev": "proxy"}


class RunWatch:
    """Follows a run's folder (given, or named by the run's id): one LevelWatch per level
    folder as the runner creates it."""

    def __init__(
        self,
        folder: Path | str,
        levels: list[str],
        proxy_events: Path | None = None,
        *,
        proxy_offset: int | None = None,
    ) -> None:
        folder = record.run_folder(folder) if isinstance(folder, str) else folder
        self.folder, self.levels = folder, levels
        self.run_id = folder.name
        self.watches: dict[str, LevelWatch] = {}
        self.proxy: Tail | None = None
        if proxy_events is not None:
            # The proxy's file is shared and long: read only what is written from now on, or
            # from where the run began (a viewer who starts following mid-run).
            if proxy_offset is None:
                proxy_offset = proxy_events.stat().st_size if proxy_events.exists() else 0
            self.proxy = Tail(proxy_events, offset=proxy_offset)

    def poll(self) -> list[LevelSnapshot]:
        """Snapshots of the levels begun so far, in run order; the last is the one running."""
        for level in self.levels:
            if level not in self.watches and record.level_folder(self.folder, level).is_dir():
                self.watches[level] = LevelWatch(level, record.level_folder(self.folder, level))
        by_level = self.route_proxy(self.proxy.read_new() if self.proxy else [])
        return [watch.poll(by_level.get(level, [])) for level, watch in self.watches.items()]

    def route_proxy(self, events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """The proxy events of this run's clients, by level (their client ids name both)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            client = str(event.get("client_id") or "")
            for level in self.levels:
                if client.startswith(f"{self.run_id}-{level}-"):
                    out.setdefault(level, []).append(proxy_as_history(event))
        return out
