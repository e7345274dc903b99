"""Compaction before and after: a record list written to a new compacted topic, the segment
rolled, the cleaner waited for, and every offset labelled with what became of it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from engine.base.errors import LabError
from engine.cluster.base import Cluster
from engine.kafka import admin
from engine.logs.errors import LogViewError, RecordListError
from engine.logs.layout import LogLayout, log_layout
from engine.logs.reading import (
    LogRecord,
    PartitionReader,
    Progress,
    _produce_all,
    _producer,
    new_topic_name,
    require_partition,
)

# ---- the record list -------------------------------------------------------------------------
ROLL_KEY = "__roll__"
# The lecture's example: offsets 0-10; compaction keeps offsets 3 4 6 8 9 10.
LECTURE_PRESET = "K1=V1,K2=V2,K1=V3,K1=V4,K3=V5,K2=V6,K4=V7,K5=V8,K5=V9,K2=V10,K6=V11"
MAX_RECORDS = 500
_FORMAT_HINT = "write records as KEY=VALUE separated by ',' (KEY= for a tombstone)"


def parse_records(text: str) -> list[tuple[str, str | None]]:
    """Parse `K1=V1,K2=,K1=V3` into (key, value) pairs; an empty value is a tombstone (None).

    Raises RecordListError naming the first bad item.
    """
    text = text.strip()
    if not text:
        raise RecordListError(f"The record list is empty; {_FORMAT_HINT}, e.g. K1=V1,K2=V2,K1=.")
    # Newlines separate records too, so a list pasted one per line works.
    items = [item.strip() for item in re.split(r",|\n", text)]
    if len(items) > MAX_RECORDS:
        raise RecordListError(
            f"The record list has {len(items)} items; the demo takes at most {MAX_RECORDS}."
        )
    records: list[tuple[str, str | None]] = []
    for n, item in enumerate(items, start=1):
        where = f"Item {n} '{item}'"
        if not item:
            raise RecordListError(
                f"Item {n} is empty (two separators in a row, or one at the end); {_FORMAT_HINT}."
            )
        for bad in (";", "|", "\t"):
            if bad in item:
                raise RecordListError(
                    f"{where} contains {bad!r}: separate records with ',' (KEY=VALUE, or KEY= "
                    "for a tombstone)."
                )
        if "=" not in item:
            raise RecordListError(f"{where} has no '='; {_FORMAT_HINT}.")
        if item.count("=") > 1:
            raise RecordListError(
                f"{where} has more than one '=' (a missing ',' between records?); {_FORMAT_HINT}."
            )
        key, value = (part.strip() for part in item.split("=", 1))
        if not key:
            raise RecordListError(
                f"{where} has an empty key: a compacted topic refuses records without a key."
            )
        if any(ch.isspace() for ch in key):
            raise RecordListError(f"{where} has a space in its key; keys are single words.")
        if key == ROLL_KEY:
            raise RecordListError(
                f"{where} uses the key {ROLL_KEY}, which the lab keeps for the record that "
                "rolls the segment; choose another key."
            )
        records.append((key, value or None))
    return records


# ---- compaction --------------------------------------------------------------------------------
@dataclass
class CompactionSettings:
    """The topic's cleaner settings (Kafka's names in `topic_config`)."""

    min_cleanable_dirty_ratio: float = 0.01
    segment_ms: int = 1000
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 2000

    def validate(self) -> None:
        checks = (
            ("min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio, 0.0, 1.0),
            # Kafka accepts 1 ms; below 100 ms the roll records would flood the log.
            ("segment.ms", self.segment_ms, 100, 60_000),
            ("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, 300_000),
            ("delete.retention.ms", self.delete_retention_ms, 0, 300_000),
        )
        for name, value, low, high in checks:
            if not low <= value <= high:
                raise LogViewError(f"{name} must be between {low} and {high} here, not {value}.")

    def topic_config(self) -> dict[str, str]:
        # segment.bytes stays at its default: Kafka 4 refuses anything under 1 MiB, so the
        # demo's segments are closed by time (segment.ms) and the next write.
        return {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": str(self.min_cleanable_dirty_ratio),
            "segment.ms": str(self.segment_ms),
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
            "delete.retention.ms": str(self.delete_retention_ms),
        }


SHOWN_TOPIC_SETTINGS = (
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "segment.ms",
    "segment.bytes",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
)
SHOWN_BROKER_SETTINGS = ("log.cleaner.backoff.ms", "log.cleaner.enable")


def _typed(value: str | None) -> Any:
    if value is None:
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value, value)


def effective_settings(bootstrap: str, topic: str, node_id: int | None = None) -> dict[str, Any]:
    """The cleaner settings as the broker reports them for the topic (and its broker)."""
    client = admin.admin_client(bootstrap)
    resources = [ConfigResource(ResourceType.TOPIC, topic)]
    if node_id is not None and node_id >= 0:
        resources.append(ConfigResource(ResourceType.BROKER, str(node_id)))
    settings: dict[str, Any] = {}
    try:
        for resource, future in client.describe_configs(resources).items():
            wanted = (
                SHOWN_TOPIC_SETTINGS
                if resource.restype == ResourceType.TOPIC
                else SHOWN_BROKER_SETTINGS
            )
            entries = future.result(timeout=10)
            for name in wanted:
                if name in entries:
                    settings[name] = _typed(entries[name].value)
    except KafkaException as exc:
        raise LogViewError(f"The broker did not describe {topic}'s settings ({exc}).") from exc
    return settings


@dataclass
class CompactionResult:
    topic: str
    partition: int
    settings: dict[str, Any]
    before: list[LogRecord]
    after: list[LogRecord]
    after_first_clean: list[LogRecord] | None  # the first read without the obsolete records
    roll_offsets: list[int]  # offsets of the labelled __roll__ records the lab wrote
    rolled_at: float  # wall time the first roll record closed the segment
    cleaner_seconds: float | None  # first roll -> obsolete records gone (None: not in time)
    tombstone_seconds: float | None  # first roll -> tombstones gone (None: none, or not in time)
    tombstones_waited: bool
    timed_out: bool
    layout: LogLayout | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "settings": self.settings,
            "before": [r.to_json() for r in self.before],
            "after": [r.to_json() for r in self.after],
            "after_first_clean": (
                None
                if self.after_first_clean is None
                else [r.to_json() for r in self.after_first_clean]
            ),
            "roll_offsets": self.roll_offsets,
            "cleaner_seconds": self.cleaner_seconds,
            "tombstone_seconds": self.tombstone_seconds,
            "timed_out": self.timed_out,
            "log": self.layout.to_json() if self.layout else None,
            "notes": self.notes,
        }


def check_cleaner_timeout(timeout: float) -> None:
    if not 5 <= timeout <= 600:
        raise LogViewError(f"The cleaner timeout must be between 5 and 600 s, not {timeout:g}.")


def run_compaction(
    cluster: Cluster,
    records: list[tuple[str, str | None]],
    settings: CompactionSettings | None = None,
    *,
    timeout: float = 60.0,
    wait_for_tombstones: bool = True,
    progress: Progress | None = None,
) -> CompactionResult:
    """Write keyed records to a new compacted topic, roll its segment, and wait for the cleaner.

    `before` is read back right after the writes, `after` once the records that later writes
    made obsolete are gone (and, if asked, the tombstones too, after delete.retention.ms).
    The active segment is never cleaned, so labelled `__roll__` records are written after
    segment.ms to close it; while waiting for tombstones, more follow, since only new dirty
    data makes the cleaner look at the log again.
    """
    settings = settings or CompactionSettings()
    settings.validate()
    if not records:
        raise RecordListError(f"The record list is empty; {_FORMAT_HINT}.")
    check_cleaner_timeout(timeout)
    say = progress or (lambda _step: None)
    bootstrap = cluster.direct_bootstrap
    topic = new_topic_name("compaction")
    say(f"Creating the compacted topic {topic}")
    try:
        admin.create_topic(bootstrap, topic, config=settings.topic_config())
    except (KafkaException, TimeoutError) as exc:
        raise LogViewError(f"Could not create the topic {topic} ({exc}).") from exc

    producer = _producer(bootstrap)
    say(f"Writing {len(records)} record(s)")
    written_at = time.monotonic()
    _produce_all(producer, topic, records)
    roll_offsets: list[int] = []

    def roll() -> None:
        n = len(roll_offsets) + 1
        roll_offsets.extend(_produce_all(producer, topic, [(ROLL_KEY, f"roll {n}")]))

    with PartitionReader(bootstrap, topic) as reader:
        before = reader.read().records
        last_of_key = {r.key: r.offset for r in before}
        obsolete = {r.offset for r in before if last_of_key[r.key] != r.offset}
        tombstones = {r.offset for r in before if r.value is None and r.offset not in obsolete}
        wait_tombs = wait_for_tombstones and bool(tombstones)

        # A segment rolls on the first write after segment.ms since its first record.
        say(f"Waiting segment.ms ({settings.segment_ms} ms), then rolling the segment")
        time.sleep(max(0.0, written_at + settings.segment_ms / 1000 + 0.1 - time.monotonic()))
        roll()
        rolled_at_wall, rolled_at, last_roll = time.time(), time.monotonic(), time.monotonic()
        roll_every = max(settings.segment_ms / 1000, 1.0) + 0.1
        deadline = rolled_at + timeout
        cleaner_s: float | None = None
        tomb_s: float | None = None
        first_clean: list[LogRecord] | None = None
        say("Waiting for the log cleaner")
        while True:
            current = reader.read().records
            present = {r.offset for r in current}
            now = time.monotonic()
            if cleaner_s is None and not obsolete & present:
                cleaner_s, first_clean = round(now - rolled_at, 2), current
                if wait_tombs:
                    say(
                        "Cleaned; tombstones stay for delete.retention.ms "
                        f"({settings.delete_retention_ms} ms) after that"
                    )
            if cleaner_s is not None and wait_tombs and tomb_s is None and not tombstones & present:
                tomb_s = round(now - rolled_at, 2)
            done = cleaner_s is not None and (tomb_s is not None or not wait_tombs)
            if done or now > deadline:
                break
            # Once cleaned, only new dirty data brings the cleaner back (tombstone removal).
            if cleaner_s is not None and now - last_roll >= roll_every:
                roll()
                last_roll = time.monotonic()
            time.sleep(0.25)
        after = current
    producer.flush(5)

    notes = []
    if not obsolete:
        notes.append("Every key was written once, so compaction had nothing to remove.")
    if cleaner_s is None:
        notes.append(
            f"The cleaner had not removed the obsolete records after {timeout:.0f}s: "
            "min.compaction.lag.ms or min.cleanable.dirty.ratio may hold it back."
        )
    elif wait_tombs and tomb_s is None:
        notes.append(
            f"The tombstones were still there after {timeout:.0f}s: they leave at a cleaning "
            "after delete.retention.ms, and a cleaning needs min.cleanable.dirty.ratio of new "
            "data."
        )
    layout = None
    try:
        layout = log_layout(cluster, topic)
    except LabError as exc:
        notes.append(f"Segments not shown: {exc}")
    leader = layout.node_id if layout else require_partition(bootstrap, topic, 0)
    return CompactionResult(
        topic=topic,
        partition=0,
        settings=effective_settings(bootstrap, topic, leader),
        before=before,
        after=after,
        after_first_clean=first_clean,
        roll_offsets=roll_offsets,
        rolled_at=rolled_at_wall,
        cleaner_seconds=cleaner_s,
        tombstone_seconds=tomb_s,
        tombstones_waited=wait_tombs,
        timed_out=cleaner_s is None or (wait_tombs and tomb_s is None),
        layout=layout,
        notes=notes,
    )


def compaction_rows(result: CompactionResult) -> list[dict[str, Any]]:
    """Every offset written, with what became of it and why: the before/after table."""
    kept = {r.offset: r for r in result.after}
    first_clean = {r.offset for r in result.after_first_clean or []}
    # The next write of the same key is the one that made a record obsolete.
    next_write: dict[int, int] = {}
    last_seen: dict[str | None, int] = {}
    for r in reversed(result.before):
        if r.key in last_seen:
            next_write[r.offset] = last_seen[r.key]
        last_seen[r.key] = r.offset
    layout = result.layout
    rows = []
    for r in result.before:
        tombstone = r.value is None
        later = next_write.get(r.offset)
        if r.offset in kept and later is None:
            status = "tombstone kept" if tombstone else "kept"
            why = (
                f"the latest write of {r.key}; removed after delete.retention.ms"
                if tombstone
                else f"the latest value of {r.key}"
            )
        elif r.offset in kept:
            status, why = "not cleaned yet", f"offset {later} wrote {r.key} again"
        elif later is not None:
            status, why = "removed", f"obsolete: offset {later} wrote {r.key} again"
        elif tombstone:
            kept_once = " (kept by the first cleaning)" if r.offset in first_clean else ""
            status = "tombstone removed"
            why = f"delete.retention.ms had passed{kept_once}"
        else:
            status, why = "removed", "not in the log any more"
        rows.append(
            {
                "offset": r.offset,
                "key": r.key,
                "value": "null (tombstone)" if tombstone else r.value,
                "status": status,
                "superseded_by": later,
                "why": why,
                "segment": segment_label(r.offset, layout),
            }
        )
    for n, offset in enumerate(result.roll_offsets, start=1):
        present = offset in kept
        rows.append(
            {
                "offset": offset,
                "key": ROLL_KEY,
                "value": f"roll {n}",
                "status": "roll record" if present else "roll record, removed",
                "superseded_by": None,
                "why": "written by the lab to close the active segment"
                + ("" if present else "; a later roll record replaced it"),
                "segment": segment_label(offset, layout),
            }
        )
    return sorted(rows, key=lambda row: row["offset"])


def segment_label(offset: int, layout: LogLayout | None) -> str:
    if layout is None:
        return "?"
    active = layout.active_segment_base
    if active is not None and offset >= active:
        return "active segment"
    if layout.cleaner_checkpoint is not None and offset < layout.cleaner_checkpoint:
        return "cleaned"
    return "closed, not cleaned yet"
