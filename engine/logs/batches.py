"""The batches underneath: Kafka's DumpLogSegments run over a partition's segments, and its
output parsed into batches (producer id, epoch, sequence, transactional, control markers).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.cluster.base import Cluster
from engine.logs.errors import LogDumpError, LogViewError
from engine.logs.layout import _log_dirs, _pick_node, _segment_files


# ---- the batches underneath: DumpLogSegments -----------------------------------------------
@dataclass
class DumpedRecord:
    offset: int
    create_time: int | None
    key_size: int | None
    value_size: int | None
    sequence: int | None
    key: str | None = None
    payload: str | None = None
    marker: str | None = None  # COMMIT or ABORT for a control record
    coordinator_epoch: int | None = None


@dataclass
class Batch:
    segment: int | None  # base offset of the segment file the batch is in
    base_offset: int
    last_offset: int
    count: int
    base_sequence: int
    last_sequence: int
    producer_id: int
    producer_epoch: int
    partition_leader_epoch: int | None
    is_transactional: bool
    is_control: bool
    control_type: str | None  # COMMIT / ABORT for a control batch
    delete_horizon_ms: int | None
    position: int | None
    create_time: int | None
    size: int | None
    compression: str | None
    records: list[DumpedRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_PAIR = re.compile(r"(\w+): (\S+)")
_RECORD_FIELDS = re.compile(
    r"offset: (?P<offset>-?\d+)(?: (?:CreateTime|LogAppendTime|NO_TIMESTAMP): (?P<ts>-?\d+))?"
    r"(?: keySize: (?P<ks>-?\d+))?(?: valueSize: (?P<vs>-?\d+))?(?: sequence: (?P<seq>-?\d+))?"
)
_MARKER = re.compile(r"endTxnMarker: (?P<type>\w+)(?: coordinatorEpoch: (?P<epoch>-?\d+))?")


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _horizon(value: str | None) -> int | None:
    """`OptionalLong[1795310279712]` -> 1795310279712; `OptionalLong.empty` -> None."""
    match = re.fullmatch(r"OptionalLong\[(-?\d+)\]", value or "")
    return int(match.group(1)) if match else None


def _parse_batch(line: str, segment: int | None) -> Batch:
    f = dict(_PAIR.findall(line))
    ts = f.get("CreateTime") or f.get("LogAppendTime")
    return Batch(
        segment=segment,
        base_offset=int(f["baseOffset"]),
        last_offset=int(f["lastOffset"]),
        count=int(f["count"]),
        base_sequence=int(f.get("baseSequence", -1)),
        last_sequence=int(f.get("lastSequence", -1)),
        producer_id=int(f.get("producerId", -1)),
        producer_epoch=int(f.get("producerEpoch", -1)),
        partition_leader_epoch=_int(f.get("partitionLeaderEpoch")),
        is_transactional=f.get("isTransactional") == "true",
        is_control=f.get("isControl") == "true",
        control_type=None,
        delete_horizon_ms=_horizon(f.get("deleteHorizonMs")),
        position=_int(f.get("position")),
        create_time=_int(ts),
        size=_int(f.get("size")),
        compression=f.get("compresscodec"),
    )


def _parse_record(line: str) -> DumpedRecord | None:
    body = line.lstrip("| ").rstrip("\n")
    match = _RECORD_FIELDS.match(body)
    if not match:
        return None
    record = DumpedRecord(
        offset=int(match["offset"]),
        create_time=_int(match["ts"]),
        key_size=_int(match["ks"]),
        value_size=_int(match["vs"]),
        sequence=_int(match["seq"]),
    )
    if marker := _MARKER.search(body):
        record.marker, record.coordinator_epoch = marker["type"], _int(marker["epoch"])
        return record
    # Keys and payloads are free text: take them by their labels, the payload last.
    rest = body
    if " payload: " in rest or rest.endswith(" payload:"):
        rest, _, payload = rest.partition(" payload:")
        record.payload = payload[1:] if payload.startswith(" ") else payload
    if " key: " in rest or rest.endswith(" key:"):
        _, _, key = rest.partition(" key:")
        record.key = key[1:] if key.startswith(" ") else key
    return record


def parse_dump(text: str) -> list[Batch]:
    """Batches (with their records, given --deep-iteration) from DumpLogSegments' output."""
    batches: list[Batch] = []
    segment: int | None = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            match = re.search(r"(\d{20})\.log\s*$", line)
            segment = int(match.group(1)) if match else None
        elif line.startswith("baseOffset: "):
            batches.append(_parse_batch(line, segment))
        elif line.startswith("| ") and batches:
            record = _parse_record(line)
            if record is None:
                continue
            batch = batches[-1]
            batch.records.append(record)
            if record.marker and batch.is_control:
                batch.control_type = record.marker
    return batches


@dataclass
class LogDump:
    topic: str
    partition: int
    node_id: int
    log_dir: str
    files: list[str]
    batches: list[Batch]
    raw: str

    def to_json(self, *, raw: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "node": self.node_id,
            "log_dir": self.log_dir,
            "files": self.files,
            "batches": [b.to_json() for b in self.batches],
        }
        if raw:
            data["raw"] = self.raw
        return data


def dump_log(
    cluster: Cluster,
    topic: str,
    partition: int = 0,
    *,
    node_id: int | None = None,
    print_data: bool = True,
) -> LogDump:
    """Run Kafka's DumpLogSegments over every segment of a partition on one node."""
    dirs = _log_dirs(cluster)
    node = _pick_node(cluster, topic, partition, node_id)
    folder = dirs.partition_dir(node, topic, partition)
    for attempt in range(2):
        files = [f"{folder}/{name}" for name in _segment_files(dirs.list_dir(node, folder))]
        if not files:
            raise LogViewError(
                f"Node {node} holds no segment of {topic}-{partition} (looked in {folder}); "
                "is it a replica there?"
            )
        try:
            raw = dirs.dump(node, files, print_data)
            break
        except LogDumpError:
            # The cleaner may have swapped a segment between listing and dumping: list again.
            if attempt:
                raise
    return LogDump(topic, partition, node, folder, files, parse_dump(raw), raw)


def batch_rows(batches: list[Batch]) -> list[dict[str, Any]]:
    """One table row per batch, in the words of the issue: what each batch is."""
    rows = []
    for b in batches:
        if b.is_control:
            what = f"{b.control_type or 'control'} marker"
        elif b.is_transactional:
            what = "transactional data"
        elif b.producer_id >= 0:
            what = "idempotent data"
        else:
            what = "data"
        rows.append(
            {
                "segment": b.segment,
                "base offset": b.base_offset,
                "last offset": b.last_offset,
                "records": len(b.records) if b.records else b.count,
                "what": what,
                "producer id": b.producer_id,
                "epoch": b.producer_epoch,
                "base sequence": b.base_sequence,
                "transactional": b.is_transactional,
                "control": b.is_control,
                "control type": b.control_type,
                "delete horizon": (
                    time.strftime("%H:%M:%S", time.localtime(b.delete_horizon_ms / 1000))
                    if b.delete_horizon_ms
                    else None
                ),
            }
        )
    return rows
