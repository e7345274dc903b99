"""A plain-Python reference of the metrics, for checking the Spark job against.

It takes the same inputs as engine.metrics.spark_job.judge (Kafka rows with the source's
columns, history rows, the levels, the ledger size) and judges each level with
engine.judging.checker.check, exactly as engine.run.runner does after a run. The fields the
checker does not compute (duplicated share, aborts by design, the latency distribution, throughput)
are computed here again, loop by loop, from their written definitions.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.base.values import parse_value
from engine.judging.checker import check, percentile
from engine.metrics.buckets import bucket_width
from engine.metrics.inputs import PRODUCER_PROCS, LevelSpec
from engine.metrics.summary import PERCENTILES
from engine.model.records import StoredRecord

# One Kafka record as Spark's Kafka source gives it: (topic, partition, offset, value).
KafkaRow = tuple[str, int, int, bytes | None]
# One history event with its level: the history.jsonl dict plus "level".
Event = Mapping[str, Any]

COUNT_FIELDS = (
    "sent",
    "acked",
    "delivered",
    "duplicates",
    "duplicated_messages",
    "lost",
    "reordered",
    "aborted_visible",
    "aborted_as_intended",
    "never_sent",
    "not_processed",
    "aborted_at_read_uncommitted",
    "writes_refused",
    "commits_refused",
    "txn_calls_refused",
    "fenced",
)


def stored_records(rows: Iterable[KafkaRow], topic: str) -> list[StoredRecord]:
    """A topic's rows as engine.kafka.reader.read_topic makes them (parse_value on each value)."""
    out = []
    for row_topic, partition, offset, raw in rows:
        if row_topic != topic:
            continue
        value = parse_value(raw)
        out.append(
            StoredRecord(
                partition=partition,
                offset=offset,
                id=value["id"] if value else None,
                created_at=value.get("created_at") if value else None,
            )
        )
    return sorted(out, key=lambda r: (r.partition, r.offset))


def judge_level(
    spec: LevelSpec,
    *,
    uncommitted: Sequence[KafkaRow],
    committed: Sequence[KafkaRow],
    history: Sequence[Event],
    messages: int,
    proxy_faults: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One level's results and verdict rows, the way the engine judges a run."""
    ledger = list(range(messages))
    events = [dict(e) for e in history if e.get("level", spec.level) == spec.level]
    committed_view = stored_records(committed, spec.topic)
    uncommitted_view = stored_records(uncommitted, spec.topic)
    at_level = uncommitted_view if spec.isolation == "read_uncommitted" else committed_view
    verdicts, counts = check(
        ledger=ledger,
        history=events,
        stored=at_level,
        committed_view=committed_view,
        proxy_faults=proxy_faults,
        producer_procs=PRODUCER_PROCS,
    )
    rows = [
        {
            "id": v.id,
            "verdict": v.verdict,
            "copies": v.copies,
            "offsets": v.offsets,
            "sent_at": v.sent_at,
            "acked_at": v.acked_at,
            "ack": v.ack,
            "consumed_at": v.consumed_at,
            "latency_ms": v.latency_ms,
            "reordered": v.reordered,
            "aborted_copies": v.aborted_copies,
        }
        for v in verdicts
    ]

    # Extras, each from its definition.
    duplicated = sum(1 for v in verdicts if v.copies > 1)
    committed_positions = {(r.partition, r.offset) for r in committed_view}
    in_ledger = set(ledger)
    hidden = sum(
        1
        for r in uncommitted_view
        if r.id in in_ledger and (r.partition, r.offset) not in committed_positions
    )
    latencies, created, consumed = _latencies(ledger, events, at_level)
    window = (max(consumed) - min(created)) if latencies else None
    width = bucket_width(window) if window is not None else None
    per_bucket: Counter[int] = Counter(
        math.floor((c - min(created)) / width) for c in consumed if width is not None
    )
    result = {
        "sink_topic": spec.topic,
        "isolation": spec.isolation,
        "messages": messages,
        **{
            name: getattr(counts, name)
            for name in ("sent", "acked", "delivered", "duplicates", "lost", "reordered")
        },
        "duplicated_messages": duplicated,
        "duplicated_share": round(duplicated / messages, 4) if messages else 0.0,
        "aborted_visible": counts.aborted_visible,
        "aborted_as_intended": sum(1 for v in verdicts if v.verdict == "aborted, as intended"),
        "never_sent": counts.never_sent,
        "not_processed": counts.not_processed,
        "aborted_at_read_uncommitted": hidden,
        "writes_refused": counts.writes_refused,
        "commits_refused": counts.commits_refused,
        "txn_calls_refused": counts.txn_calls_refused,
        "fenced": counts.fenced,
        "unseen_by_sink": counts.unseen_by_sink,
        "latency_ms": counts.latency_ms,
        "latency_distribution_ms": [
            {"q": q, "ms": round(percentile(latencies, q), 2)} for q in PERCENTILES if latencies
        ],
        "throughput": {
            "messages": len(latencies),
            "window_start": min(created) if latencies else None,
            "window_s": None if window is None else round(window, 3),
            "messages_per_s": round(len(latencies) / window, 2) if window else None,
            "bucket_s": width,
            "per_bucket": [per_bucket.get(k, 0) for k in range(max(per_bucket) + 1)]
            if per_bucket
            else [],
        },
    }
    return result, rows


def _latencies(
    ledger: Sequence[int], events: Sequence[Event], at_level: Sequence[StoredRecord]
) -> tuple[list[float], list[float], list[float]]:
    """The checker's latencies, with each one's created and first-consumed moments."""
    consumed_at: dict[int, float] = {}
    for e in events:
        if e.get("proc") == "sink" and e.get("ev") == "consumed" and e.get("id") is not None:
            consumed_at.setdefault(e["id"], e["t"])
    first_copy: dict[int, StoredRecord] = {}
    for r in sorted(at_level, key=lambda r: (r.partition, r.offset)):
        if r.id is not None:
            first_copy.setdefault(r.id, r)
    latencies, created, consumed = [], [], []
    for message_id in ledger:
        record = first_copy.get(message_id)
        seen = consumed_at.get(message_id)
        if record is None or not seen or not record.created_at:
            continue
        latencies.append((seen - record.created_at) * 1000.0)
        created.append(record.created_at)
        consumed.append(seen)
    return latencies, created, consumed


def judge(
    *,
    uncommitted: Sequence[KafkaRow],
    committed: Sequence[KafkaRow],
    history: Sequence[Event],
    levels: Sequence[LevelSpec],
    messages: int,
    proxy_faults: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Every level's results and verdict rows; `proxy_faults` per level."""
    by_level: dict[str, list[Event]] = defaultdict(list)
    for event in history:
        by_level[event["level"]].append(event)
    results, verdicts = {}, {}
    for spec in levels:
        results[spec.level], verdicts[spec.level] = judge_level(
            spec,
            uncommitted=uncommitted,
            committed=committed,
            history=by_level[spec.level],
            messages=messages,
            proxy_faults=(proxy_faults or {}).get(spec.level, ()),
        )
    return results, verdicts
