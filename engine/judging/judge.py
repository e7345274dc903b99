"""The judge: one level's history and what was read back -> a typed level result.

The runner drives a level and reads its topic back (engine.run.runner); the judge decides what
that means, with no Kafka and no files: every message's verdict and the counts
(engine.judging.checker), why each excluded count happened (engine.judging.explain), the
faults as they happened, and what the idempotency-key level's database made of the deliveries.
Because it needs nothing but its three inputs, a recorded run can be judged again offline
(`judge_recorded` in engine.run.record; the unit tests do so with tests/data/recorded/).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from engine.judging.checker import LevelCounts, Verdict, check
from engine.judging.explain import (
    Explanation,
    broker_answers,
    explain,
    id_ranges,
    lost_coordinator_messages,
)
from engine.model.events import Event
from engine.model.records import StoredRecord

# The processes whose sends are the ledger's: the producer (and its replacements), and the
# processor pipeline's input writer.
PRODUCER_PROCS = ("producer", "source")


@dataclass(frozen=True)
class EffectRows:
    """What the idempotency-key level's database holds at the end, as the runner read it."""

    effects: int  # rows applied
    effect_ids: int  # distinct ids among them
    store: str  # "sqlite" or "postgres"


@dataclass(frozen=True)
class ReadBack:
    """What the runner read back once the clients were done: the judge's view of Kafka."""

    isolation: str  # the level's own
    at_level: list[StoredRecord]
    committed: list[StoredRecord]  # the same topic at read_committed
    # The same topic at read_uncommitted, read for a read_committed level only: what a reader
    # left at the Java consumer's default isolation would get (exactly-once is exact for
    # read_committed readers only).
    uncommitted: list[StoredRecord] | None = None
    # Partitions whose transaction was still open after waiting `waited_s`: (LSO, high wm).
    still_open: dict[int, tuple[int, int]] = field(default_factory=dict)
    waited_s: float = 0.0
    in_sync: bool = True  # every replica back in sync before the read (after broker faults)
    # The fault proxy's events caused by this level's clients, as faults (source "proxy").
    proxy_faults: list[dict[str, Any]] = field(default_factory=list)
    effect_rows: EffectRows | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "isolation": self.isolation,
            "at_level": [asdict(r) for r in self.at_level],
            "read_committed": [asdict(r) for r in self.committed],
            "read_uncommitted": None
            if self.uncommitted is None
            else [asdict(r) for r in self.uncommitted],
            "open_transactions": {str(p): list(ends) for p, ends in self.still_open.items()},
            "waited_s": self.waited_s,
            "in_sync": self.in_sync,
            "proxy_faults": self.proxy_faults,
            "effect_rows": asdict(self.effect_rows) if self.effect_rows else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReadBack:
        rows = data.get("effect_rows")
        return cls(
            isolation=data["isolation"],
            at_level=[StoredRecord(**r) for r in data["at_level"]],
            committed=[StoredRecord(**r) for r in data["read_committed"]],
            uncommitted=None
            if data.get("read_uncommitted") is None
            else [StoredRecord(**r) for r in data["read_uncommitted"]],
            still_open={
                int(p): (int(ends[0]), int(ends[1]))
                for p, ends in data.get("open_transactions", {}).items()
            },
            waited_s=float(data.get("waited_s", 0.0)),
            in_sync=bool(data.get("in_sync", True)),
            proxy_faults=list(data.get("proxy_faults", [])),
            effect_rows=EffectRows(**rows) if rows else None,
        )


@dataclass(frozen=True)
class LevelSettings:
    """How the level was run: what the judge needs besides the history, and passes on."""

    level: str
    pipeline: str  # "producer" or "processor"
    ledger: list[int]  # the ids the workload meant to deliver
    sink_topic: str
    label: str | None  # what the level really ran as, where the scenario changed it
    started_at: float
    duration_s: float
    producer_config: dict[str, Any]
    consumer_config: dict[str, Any]
    # What the run's evidence must also say about how this level was run.
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LevelSettings:
        return cls(**data)


@dataclass(frozen=True)
class Effects:
    """What the idempotency key made of the deliveries, read from its database."""

    effects: int
    effect_ids: int
    duplicates_absorbed: int
    effect_store: str


@dataclass(frozen=True)
class UncommittedReader:
    """What a read_uncommitted reader of a read_committed level's topic counts: the records of
    aborted transactions it returns, and the duplicates they make beside the committed copies."""

    read_uncommitted_duplicates: int
    read_uncommitted_aborted: int


# The checker's counts by name (its latency summary is no count).
COUNT_NAMES = frozenset(f.name for f in fields(LevelCounts) if f.name != "latency_ms")
# The counts of a result's optional parts, by name.
EFFECT_COUNT_NAMES = frozenset(("effects", "effect_ids", "duplicates_absorbed"))
UNCOMMITTED_COUNT_NAMES = frozenset(f.name for f in fields(UncommittedReader))
# A result's fields that joined result.json after its first runs: the counts with a default,
# and the explanation. A recorded result without one of them still reads back
# (LevelResult.not_recorded).
RECORDED_SINCE = (
    *(f.name for f in fields(LevelCounts) if f.default is not MISSING),
    "explain",
)


@dataclass
class LevelResult:
    """One level's judged result: `engine run --json`'s per-level object, typed."""

    settings: LevelSettings
    isolation: str
    counts: LevelCounts
    faults: list[dict[str, Any]]
    explanation: Explanation
    open_transactions: dict[int, tuple[int, int]] = field(default_factory=dict)
    effects: Effects | None = None
    uncommitted_reader: UncommittedReader | None = None
    # The fields (of RECORDED_SINCE) a recorded result did not hold, as it was recorded before
    # they existed: read back with their defaults (a count's 0), left out again by to_json, so
    # an old result.json reads back as it was, and a page tells "not counted then" from 0.
    # Empty for every result the judge makes.
    not_recorded: frozenset[str] = frozenset()

    def count(self, name: str) -> int | None:
        """A count by its name in result.json (the names a scenario's `teaches` uses): the
        checker's, the database's (idempotency-key) or the read_uncommitted reader's; None
        when this result has no such count (a level without a database, a run recorded before
        it was counted, a name that is no count)."""
        if name in COUNT_NAMES:
            return None if name in self.not_recorded else getattr(self.counts, name)
        if self.effects is not None and name in EFFECT_COUNT_NAMES:
            return getattr(self.effects, name)
        if self.uncommitted_reader is not None and name in UNCOMMITTED_COUNT_NAMES:
            return getattr(self.uncommitted_reader, name)
        return None

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        data = {
            "label": s.label,
            "sink_topic": s.sink_topic,
            "isolation": self.isolation,
            **asdict(self.counts),
            "faults": self.faults,
            "started_at": s.started_at,
            "duration_s": s.duration_s,
            "producer_config": s.producer_config,
            "consumer_config": s.consumer_config,
            **(asdict(self.effects) if self.effects else {}),
            **(asdict(self.uncommitted_reader) if self.uncommitted_reader else {}),
            "open_transactions": {str(p): list(e) for p, e in self.open_transactions.items()},
            "explain": self.explanation.to_json(),
        }
        for name in self.not_recorded:
            data.pop(name, None)
        return data

    @classmethod
    def from_json(cls, level: str, data: dict[str, Any]) -> LevelResult:
        """A recorded result (result.json's per-level object) read back into its types.

        What a result does not record (the pipeline, the ledger, the notes apart from the
        evidence) is left empty in its settings.
        """
        count_fields = LevelCounts.__dataclass_fields__
        has_effects = data.get("effect_ids") is not None
        return cls(
            settings=LevelSettings(
                level=level,
                pipeline="",
                ledger=[],
                sink_topic=data.get("sink_topic", ""),
                label=data.get("label"),
                started_at=float(data.get("started_at", 0.0)),
                duration_s=float(data.get("duration_s", 0.0)),
                producer_config=data.get("producer_config", {}),
                consumer_config=data.get("consumer_config", {}),
            ),
            isolation=data.get("isolation", ""),
            counts=LevelCounts(**{k: v for k, v in data.items() if k in count_fields}),
            faults=list(data.get("faults", [])),
            explanation=Explanation(**data.get("explain", {})),
            open_transactions={
                int(p): (int(e[0]), int(e[1])) for p, e in data.get("open_transactions", {}).items()
            },
            effects=Effects(
                effects=data["effects"],
                effect_ids=data["effect_ids"],
                duplicates_absorbed=data["duplicates_absorbed"],
                effect_store=data["effect_store"],
            )
            if has_effects
            else None,
            uncommitted_reader=UncommittedReader(
                read_uncommitted_duplicates=data["read_uncommitted_duplicates"],
                read_uncommitted_aborted=data["read_uncommitted_aborted"],
            )
            if data.get("read_uncommitted_duplicates") is not None
            else None,
            not_recorded=frozenset(name for name in RECORDED_SINCE if name not in data),
        )


@dataclass
class Judgement:
    """The judge's answer: every message's verdict (kept in the run folder) and the result."""

    verdicts: list[Verdict]
    result: LevelResult


def judge(history: list[dict[str, Any]], read: ReadBack, settings: LevelSettings) -> Judgement:
    """Judge one level: its merged history, what was read back, and how it was run."""
    verdicts, counts = check(
        ledger=settings.ledger,
        history=history,
        stored=read.at_level,
        committed_view=read.committed,
        proxy_faults=read.proxy_faults,
        producer_procs=PRODUCER_PROCS,
    )
    faults = faults_of(history, read.proxy_faults)
    effects = effects_of(history, read.effect_rows)
    uncommitted_reader = None
    if read.uncommitted is not None:
        # The same judgement from the other reader's records: its copies beyond the first,
        # and those of aborted transactions (absent from the read_committed view).
        _, seen = check(
            ledger=settings.ledger,
            history=history,
            stored=read.uncommitted,
            committed_view=read.committed,
            producer_procs=PRODUCER_PROCS,
        )
        uncommitted_reader = UncommittedReader(seen.duplicates, seen.aborted_visible)
    why = explain(settings.level, settings.pipeline, history, counts, verdicts)
    why.evidence += broker_answers(faults)
    why.evidence += lost_coordinator_messages(faults)
    why.evidence += judging_caveats(read.still_open, verdicts, read.waited_s)
    why.evidence += settings.notes
    if not read.in_sync:
        why.evidence.append(
            "A replica of the topic was still out of sync 60 s after the clients stopped: "
            "the topic was read as far as its high watermark then."
        )
    if effects is not None:  # what the idempotency key made of it
        absorbed = effects.duplicates_absorbed
        why.headline += (
            f"; the database applied {effects.effects} effects and absorbed {absorbed} "
            + ("duplicate delivery" if absorbed == 1 else "duplicate deliveries")
        )
    result = LevelResult(
        settings=settings,
        isolation=read.isolation,
        counts=counts,
        faults=faults,
        explanation=why,
        open_transactions=dict(read.still_open),
        effects=effects,
        uncommitted_reader=uncommitted_reader,
    )
    return Judgement(verdicts=verdicts, result=result)


def faults_of(
    history: list[dict[str, Any]], proxy_faults: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every fault in time order: the nemesis's (from the history) and the proxy's."""
    faults = [
        {
            "t": e["t"],
            "kind": e["kind"],
            **{k: v for k, v in e.items() if k not in ("t", "proc", "ev", "kind")},
        }
        for e in history
        if e["ev"] == Event.NEMESIS
    ]
    faults += proxy_faults
    faults.sort(key=lambda f: f["t"])
    return faults


def effects_of(history: list[dict[str, Any]], rows: EffectRows | None) -> Effects | None:
    """The database's counts, with the duplicate deliveries its key absorbed (the sink's
    `effect_skipped` lines); None for a level without a database."""
    if rows is None:
        return None
    return Effects(
        effects=rows.effects,
        effect_ids=rows.effect_ids,
        duplicates_absorbed=sum(1 for e in history if e["ev"] == Event.EFFECT_SKIPPED),
        effect_store=rows.store,
    )


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
