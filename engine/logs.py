"""The log views: compaction before and after, the two isolation levels, and the batches.

What these functions show is read from Kafka, never worked out on the client:

- records come from a consumer on the direct listener that reads every offset of a partition;
- high watermark and last stable offset come from ListOffsets at each isolation level;
- batches, producer ids, epochs and transaction markers come from Kafka's own log-dump tool
  (`kafka.tools.DumpLogSegments`) run against the broker's segment files.

The client only adds labels that explain what the broker returned (which later write made a
record obsolete, which gap is a control marker).
"""

from __future__ import annotations

import contextlib
import re
import secrets
import subprocess
import threading
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, ResourceType

from engine.cluster.base import Cluster
from engine.errors import LabError
from engine.kafka import admin

Progress = Callable[[str], None]


class RecordListError(LabError):
    """A record list for the compaction demo that cannot be parsed."""


class LogViewError(LabError):
    """A topic, partition or setting the log views cannot use."""


class LogDumpError(LabError):
    """Kafka's log-dump tool could not be run or read."""


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


# ---- reading a partition ---------------------------------------------------------------------
@dataclass(frozen=True)
class LogRecord:
    """One record as a consumer read it back; value None is a tombstone."""

    offset: int
    key: str | None
    value: str | None

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "key": self.key, "value": self.value}


@dataclass(frozen=True)
class PartitionRead:
    records: list[LogRecord]
    end_offset: int  # where the consumer hit the end: the HW, or the LSO at read_committed


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


def new_topic_name(kind: str) -> str:
    return f"lab.{kind}.{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def require_partition(bootstrap: str, topic: str, partition: int, timeout: float = 5.0) -> int:
    """Check that a topic and partition exist; return the partition's leader (-1 if none)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic or ""):
        raise LogViewError(
            f"'{topic}' is not a Kafka topic name (letters, digits, '.', '_' and '-' only)."
        )
    try:
        md = admin.admin_client(bootstrap).list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise LogViewError(
            f"The cluster did not answer ({exc}); check it with `python -m engine cluster status`."
        ) from exc
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        raise LogViewError(f"Topic '{topic}' does not exist; pick one the cluster has.")
    if partition not in meta.partitions:
        raise LogViewError(
            f"Topic '{topic}' has partitions 0-{len(meta.partitions) - 1}, not {partition}."
        )
    return meta.partitions[partition].leader


def list_topic_names(bootstrap: str, timeout: float = 5.0) -> list[str]:
    """Topics a person may look at (Kafka's internal ones left out), newest lab topics last."""
    try:
        md = admin.admin_client(bootstrap).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise LogViewError(f"The cluster did not answer ({exc}).") from exc
    return sorted(name for name in md.topics if not name.startswith("__"))


class PartitionReader:
    """Reads one partition from its first offset to its end, as often as asked.

    One consumer serves every read (re-assigning rewinds it), so polling the log while the
    cleaner works costs a fetch, not a new connection.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int = 0,
        *,
        isolation: str = "read_uncommitted",
        timeout: float = 20.0,
    ) -> None:
        self.topic, self.partition, self.timeout = topic, partition, timeout
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lab-logs-{secrets.token_hex(4)}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
                # The end of a short log should show up at once, not after a long fetch wait.
                "fetch.wait.max.ms": 50,
                "logger": admin.log,
            }
        )
        self._generation = 0

    def read(self) -> PartitionRead:
        tp = TopicPartition(self.topic, self.partition, OFFSET_BEGINNING)
        self._consumer.unassign()
        self._consumer.assign([tp])
        records: list[LogRecord] = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                code = msg.error().code()
                if code == KafkaError._PARTITION_EOF:
                    return PartitionRead(records, msg.offset())
                if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    raise LogViewError(f"Topic '{self.topic}' has no partition {self.partition}.")
                continue  # transient: the broker is briefly unreachable, librdkafka retries
            records.append(LogRecord(msg.offset(), _text(msg.key()), _text(msg.value())))
        raise LogViewError(
            f"Could not read {self.topic}-{self.partition} to its end within "
            f"{self.timeout:.0f}s; check the cluster with `python -m engine cluster status`."
        )

    def end_offsets(self) -> tuple[int, int]:
        """(log start, end) from ListOffsets at this reader's isolation: HW, or LSO."""
        tp = TopicPartition(self.topic, self.partition)
        try:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)
        except KafkaException as exc:
            raise LogViewError(
                f"The broker did not report the offsets of {self.topic}-{self.partition} "
                f"({exc}); check the cluster with `python -m engine cluster status`."
            ) from exc
        return low, high

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> PartitionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_partition(
    bootstrap: str, topic: str, partition: int = 0, *, isolation: str = "read_uncommitted"
) -> PartitionRead:
    with PartitionReader(bootstrap, topic, partition, isolation=isolation) as reader:
        return reader.read()


def _producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "logger": admin.log,
            **extra,
        }
    )


def _produce_all(
    producer: Producer, topic: str, records: Iterable[tuple[str, str | None]]
) -> list[int]:
    """Produce keyed records and wait for each delivery; return their offsets."""
    outcomes: list[tuple[KafkaError | None, int]] = []
    for key, value in records:
        producer.produce(
            topic,
            key=key.encode(),
            value=None if value is None else value.encode(),
            partition=0,
            on_delivery=lambda err, msg: outcomes.append((err, msg.offset())),
        )
    left = producer.flush(30)
    errors = [err for err, _ in outcomes if err is not None]
    if left or errors:
        why = errors[0].str() if errors else f"{left} record(s) undelivered after 30s"
        raise LogViewError(
            f"Writing to {topic} failed ({why}); check the cluster with "
            "`python -m engine cluster status`."
        )
    return [offset for _, offset in outcomes]


# ---- the log's layout on disk ----------------------------------------------------------------
@dataclass
class LogLayout:
    """Where a partition's segments begin, and how far the cleaner has cleaned it."""

    node_id: int
    log_dir: str
    segments: list[int]  # base offsets, oldest first; the last one is the active segment
    cleaner_checkpoint: int | None  # the first offset the cleaner has not cleaned yet

    @property
    def active_segment_base(self) -> int | None:
        return self.segments[-1] if self.segments else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "active_segment_base": self.active_segment_base}


class _LogDirs:
    """Access to the broker's log directory: local files, or a command in its container."""

    DUMP_TIMEOUT = 90.0

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def partition_dir(self, node_id: int, topic: str, partition: int) -> str:
        raise NotImplementedError

    def list_dir(self, node_id: int, path: str) -> list[str]:
        raise NotImplementedError

    def read_text(self, node_id: int, path: str) -> str | None:
        raise NotImplementedError

    def dump(self, node_id: int, files: list[str], print_data: bool) -> str:
        raise NotImplementedError

    def checkpoint_file(self, node_id: int) -> str:
        raise NotImplementedError


class _LocalLogDirs(_LogDirs):
    """The embedded backend: the node's `node-N/data` folder, and Java from the cached jars."""

    def partition_dir(self, node_id: int, topic: str, partition: int) -> str:
        node = self.cluster.node(node_id)  # type: ignore[attr-defined]
        return str(node.data_dir / f"{topic}-{partition}")

    def checkpoint_file(self, node_id: int) -> str:
        node = self.cluster.node(node_id)  # type: ignore[attr-defined]
        return str(node.data_dir / "cleaner-offset-checkpoint")

    def list_dir(self, node_id: int, path: str) -> list[str]:
        try:
            return sorted(p.name for p in Path(path).iterdir())
        except FileNotFoundError:
            return []

    def read_text(self, node_id: int, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except FileNotFoundError:
            return None

    def dump(self, node_id: int, files: list[str], print_data: bool) -> str:
        from engine.cluster import jars

        libs = Path(jars.kafka_classpath()).parent
        cmd = [
            jars.find_java(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",  # a short-lived tool starts faster without C2
            "-cp",
            str(libs / "*"),
            dump_class(libs),
            "--files",
            ",".join(files),
            "--deep-iteration",
        ]
        if print_data:
            cmd.append("--print-data-log")
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=self.DUMP_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise LogDumpError(
                f"Kafka's log-dump tool took over {self.DUMP_TIMEOUT:.0f}s; try a smaller topic."
            ) from exc
        if out.returncode != 0:
            raise LogDumpError(f"Kafka's log-dump tool failed: {_last_line(out.stderr)}")
        return out.stdout


class _DockerLogDirs(_LogDirs):
    """The docker backend: kafka-dump-log.sh inside the broker's container (Docker SDK).

    Written to the apache/kafka image's layout (log dir /var/lib/kafka/data, tools in
    /opt/kafka/bin); not run here, as no Docker engine exists on the project's machines.
    """

    DATA = "/var/lib/kafka/data"
    DUMP_SCRIPT = "/opt/kafka/bin/kafka-dump-log.sh"

    def _exec(self, node_id: int, cmd: list[str], what: str) -> tuple[int, str, str]:
        container = self.cluster.container(node_id)  # type: ignore[attr-defined]
        try:
            code, (out, err) = container.exec_run(cmd, demux=True)
        except Exception as exc:  # docker.errors.APIError and connection errors
            raise LogDumpError(
                f"Could not run {what} in {container.name} ({exc}); is node {node_id} running?"
            ) from exc
        return code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def partition_dir(self, node_id: int, topic: str, partition: int) -> str:
        return f"{self.DATA}/{topic}-{partition}"

    def checkpoint_file(self, node_id: int) -> str:
        return f"{self.DATA}/cleaner-offset-checkpoint"

    def list_dir(self, node_id: int, path: str) -> list[str]:
        code, out, _ = self._exec(node_id, ["ls", "-1", path], "ls")
        return sorted(out.split()) if code == 0 else []

    def read_text(self, node_id: int, path: str) -> str | None:
        code, out, _ = self._exec(node_id, ["cat", path], "cat")
        return out if code == 0 else None

    def dump(self, node_id: int, files: list[str], print_data: bool) -> str:
        cmd = [self.DUMP_SCRIPT, "--files", ",".join(files), "--deep-iteration"]
        if print_data:
            cmd.append("--print-data-log")
        code, out, err = self._exec(node_id, cmd, "kafka-dump-log.sh")
        if code != 0:
            raise LogDumpError(f"kafka-dump-log.sh failed in the container: {_last_line(err)}")
        return out


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # A Java stack trace's first line names the exception; later lines are frames.
    for line in lines:
        if "Exception" in line or "Error" in line:
            return line[:300]
    return (lines[-1] if lines else "no output")[:300]


def _log_dirs(cluster: Cluster) -> _LogDirs:
    if cluster.backend == "local":
        return _LocalLogDirs(cluster)
    if cluster.backend == "docker":
        return _DockerLogDirs(cluster)
    raise LogViewError(
        f"The {cluster.backend} backend gives the lab no access to the brokers' log "
        "directories; use the local or docker backend to see segments and batches."
    )


def _pick_node(cluster: Cluster, topic: str, partition: int, node_id: int | None) -> int:
    if node_id is not None:
        if node_id not in cluster.node_ids:
            raise LogViewError(f"There is no node {node_id}; this cluster has {cluster.node_ids}.")
        return node_id
    leader = require_partition(cluster.direct_bootstrap, topic, partition)
    # With no leader (its node is down) the files are still on disk: read the first node's.
    return leader if leader in cluster.node_ids else cluster.node_ids[0]


def _segment_files(names: Iterable[str]) -> list[str]:
    """Segment files only: a cleaner's `.cleaned`/`.swap` and `.deleted` files are skipped."""
    return sorted(n for n in names if re.fullmatch(r"\d{20}\.log", n))


def parse_cleaner_checkpoint(text: str | None, topic: str, partition: int) -> int | None:
    """The cleaner's checkpoint for one partition from `cleaner-offset-checkpoint`.

    The file is: a version line, a count line, then `topic partition offset` per line.
    """
    for line in (text or "").splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == str(partition):
            return int(parts[2])
    return None


def log_layout(
    cluster: Cluster, topic: str, partition: int = 0, node_id: int | None = None
) -> LogLayout:
    """A partition's segments and cleaner checkpoint, read from the broker's log dir."""
    dirs = _log_dirs(cluster)
    node = _pick_node(cluster, topic, partition, node_id)
    folder = dirs.partition_dir(node, topic, partition)
    segments = [int(n[:20]) for n in _segment_files(dirs.list_dir(node, folder))]
    checkpoint = parse_cleaner_checkpoint(
        dirs.read_text(node, dirs.checkpoint_file(node)), topic, partition
    )
    return LogLayout(node, folder, segments, checkpoint)


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


# ---- the batches underneath: DumpLogSegments -----------------------------------------------
_DUMP_CLASSES = ("kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments")


@cache
def dump_class(libs: Path) -> str:
    """The log-dump tool's class in these jars (kafka.tools in 4.1; it may move to o.a.k)."""
    wanted = {name.replace(".", "/") + ".class": name for name in _DUMP_CLASSES}
    jars = sorted(libs.glob("*.jar"), key=lambda j: not j.name.startswith(("kafka_", "kafka-t")))
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as zf:
                names = set(zf.namelist())
        except (OSError, zipfile.BadZipFile):
            continue
        for entry, name in wanted.items():
            if entry in names:
                return name
    raise LogDumpError(
        f"No DumpLogSegments class was found in {libs}; run `python -m engine setup` again."
    )


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


# ---- read_committed next to read_uncommitted ------------------------------------------------
@dataclass
class IsolationRow:
    offset: int
    key: str | None
    value: str | None
    read_uncommitted: bool
    read_committed: bool
    kind: str  # committed | aborted | open | marker | not transactional
    marker: str | None = None  # COMMIT / ABORT / None for an unknown marker
    exact: bool = True  # False when the marker's type is inferred rather than dumped
    producer: str | None = None  # "id/epoch" from the dump
    txn: str | None = None  # the recorded run's transaction, e.g. "producer txn 1: aborted"
    sink_wait_ms: float | None = None  # recorded run: the broker's ack -> the sink got it


@dataclass
class IsolationView:
    topic: str
    partition: int
    source: str  # "live" or "recorded run RUN_ID, level LEVEL"
    rows: list[IsolationRow]
    log_start: int
    high_watermark: int
    last_stable_offset: int
    value_label: str = "value"
    notes: list[str] = field(default_factory=list)

    @property
    def aborted(self) -> list[int]:
        return [r.offset for r in self.rows if r.kind == "aborted"]

    @property
    def markers(self) -> list[IsolationRow]:
        return [r for r in self.rows if r.kind == "marker"]

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source": self.source,
            "log_start": self.log_start,
            "high_watermark": self.high_watermark,
            "last_stable_offset": self.last_stable_offset,
            "aborted": self.aborted,
            "markers": [
                {"offset": r.offset, "type": r.marker, "exact": r.exact} for r in self.markers
            ],
            "rows": [asdict(r) for r in self.rows],
            "notes": self.notes,
        }


def build_isolation_rows(
    uncommitted: list[LogRecord],
    committed: list[LogRecord],
    *,
    start: int,
    end: int,
    lso: int,
    markers: dict[int, str] | None = None,
) -> list[IsolationRow]:
    """Line two reads of one partition up by offset and say what each offset is.

    An offset in neither read, between `start` and `end`, is a control marker: consumers
    never receive markers. Its type comes from `markers` (the dump) when given, and is
    inferred otherwise: a marker right after aborted records is an ABORT.
    """
    unc = {r.offset: r for r in uncommitted}
    com = {r.offset: r for r in committed}
    rows: list[IsolationRow] = []
    last_data_kind: str | None = None
    for offset in range(start, max(end, max([*unc, *com], default=-1) + 1)):
        record = unc.get(offset) or com.get(offset)
        if record is not None:
            if offset in com:
                kind = "committed"
            elif offset >= lso:
                kind = "open"
            else:
                kind = "aborted"
            rows.append(
                IsolationRow(
                    offset, record.key, record.value, offset in unc, offset in com, kind=kind
                )
            )
            last_data_kind = kind
            continue
        if markers is not None:
            rows.append(
                IsolationRow(offset, None, None, False, False, "marker", markers.get(offset))
            )
        else:
            guess = "ABORT" if last_data_kind == "aborted" else "COMMIT"
            rows.append(IsolationRow(offset, None, None, False, False, "marker", guess, False))
    return rows


INFERRED_MARKERS = (
    "Offsets in neither read are control markers; their types are inferred from the records "
    "before them until the batches are dumped."
)


def apply_batches(view: IsolationView, batches: list[Batch]) -> IsolationView:
    """Replace inferred marker types by the dump's, and add each offset's producer id/epoch."""
    marker_types: dict[int, str] = {}
    producers: dict[int, str] = {}
    transactional: set[int] = set()
    for b in batches:
        for offset in range(b.base_offset, b.last_offset + 1):
            producers[offset] = f"{b.producer_id}/{b.producer_epoch}"
            if b.is_transactional:
                transactional.add(offset)
            if b.is_control:
                marker_types[offset] = b.control_type or "control"
    for row in view.rows:
        row.producer = producers.get(row.offset)
        if row.kind == "marker" and row.offset in marker_types:
            row.marker, row.exact = marker_types[row.offset], True
        elif row.kind == "committed" and row.producer and row.offset not in transactional:
            row.kind = "not transactional"
    view.notes = [n for n in view.notes if n != INFERRED_MARKERS]
    view.notes.append("Markers, producer ids and epochs come from Kafka's DumpLogSegments.")
    return view


def isolation_live(bootstrap: str, topic: str, partition: int = 0) -> IsolationView:
    """One partition as read_uncommitted and read_committed consumers see it right now.

    The high watermark and the last stable offset are ListOffsets answers at each isolation
    level; a read_committed consumer stops at the LSO while a transaction is open.
    """
    require_partition(bootstrap, topic, partition)
    readers = {
        iso: PartitionReader(bootstrap, topic, partition, isolation=iso)
        for iso in ("read_uncommitted", "read_committed")
    }
    try:
        low, hw = readers["read_uncommitted"].end_offsets()
        _, lso = readers["read_committed"].end_offsets()
        reads: dict[str, PartitionRead] = {}
        failures: list[BaseException] = []

        def read(iso: str) -> None:
            try:
                reads[iso] = readers[iso].read()
            except BaseException as exc:  # re-raised in the caller's thread below
                failures.append(exc)

        # Both reads at once: each mostly waits on the broker.
        threads = [threading.Thread(target=read, args=(iso,)) for iso in readers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
    finally:
        for reader in readers.values():
            reader.close()
    rows = build_isolation_rows(
        reads["read_uncommitted"].records,
        reads["read_committed"].records,
        start=low,
        end=hw,
        lso=lso,
    )
    notes = [f"read_committed stopped at offset {reads['read_committed'].end_offset} (the LSO)."]
    if any(r.kind == "marker" for r in rows):
        notes.append(INFERRED_MARKERS)
    return IsolationView(topic, partition, "live", rows, low, hw, lso, notes=notes)


def _run_txn_labels(
    history: list[dict[str, Any]], partition: int, writes: tuple[str, ...]
) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """From a run's history: each written offset's transaction, and every transaction.

    Returns (offset -> label, transactions in order). A
    transaction is a txn_begin with its ids, ended by txn_commit or txn_abort of the same
    client process; one without an end was fenced or crashed, and the coordinator aborts it.
    """
    open_txn: dict[str, dict[str, Any]] = {}
    txns: list[dict[str, Any]] = []
    labels: dict[int, str] = {}
    for event in sorted(history, key=lambda e: e.get("t", 0)):
        proc, ev = str(event.get("proc", "")), event.get("ev")
        if ev == "txn_begin":
            txn = {"proc": proc, "n": sum(1 for t in txns if t["proc"] == proc), "end": None}
            txn["offsets"] = []
            txns.append(txn)
            open_txn[proc] = txn
        elif ev in ("txn_commit", "txn_abort") and proc in open_txn:
            open_txn.pop(proc)["end"] = "commit" if ev == "txn_commit" else "abort"
        elif ev in writes and event.get("partition") == partition and "offset" in event:
            txn = open_txn.get(proc)
            if txn is not None:
                txn["offsets"].append(event["offset"])
    for txn in txns:
        outcome = {"commit": "committed", "abort": "aborted"}.get(
            txn["end"], "never ended (aborted by the coordinator)"
        )
        for offset in txn["offsets"]:
            labels[offset] = f"{txn['proc']} txn {txn['n']}: {outcome}"
    return labels, txns


def _sink_waits(
    history: list[dict[str, Any]], partition: int, writes: tuple[str, ...]
) -> dict[int, float]:
    """Offset -> ms from the writer's ack to the level's sink consuming the record.

    Negative when the sink had the record before the ack reached the writer (a
    read_uncommitted sink can).
    """
    acked: dict[int, float] = {}
    consumed: dict[int, float] = {}
    for event in history:
        if event.get("partition") != partition or event.get("offset") is None:
            continue
        base = str(event.get("proc", "")).split("#")[0]
        if event.get("ev") in writes and base != "sink":
            acked[event["offset"]] = min(event["t"], acked.get(event["offset"], event["t"]))
        elif base == "sink" and event.get("ev") == "consumed":
            consumed[event["offset"]] = min(event["t"], consumed.get(event["offset"], event["t"]))
    return {o: round((consumed[o] - acked[o]) * 1000) for o in consumed if o in acked}


def isolation_from_run(run: dict[str, Any], level: str, partition: int = 0) -> IsolationView:
    """A recorded run's judged topic at both isolation levels, from runs/RUN_ID (no Kafka).

    The record holds the read_committed read, and the read at the level's own isolation. For
    a read_committed level the read_uncommitted side is what the broker acknowledged to the
    writer (an offset per ack); markers are the offsets in neither, typed by the run's
    transaction events.
    """
    run_id = run.get("meta", {}).get("run_id", "?")
    data = run.get("levels", {}).get(level)
    result = run.get("result", {}).get("results", {}).get(level)
    if data is None or result is None:
        raise LogViewError(f"Run {run_id} has no level '{level}'; pick one of its levels.")
    stored, history = data["stored"], data["history"]
    topic = result.get("sink_topic", "?")
    # The judged topic is the processor's output for a processor pipeline, else the input.
    writes = ("output_acked",) if topic.endswith(".out") else ("ack",)

    def as_records(items: Iterable[dict[str, Any]]) -> list[LogRecord]:
        found = {
            int(i["offset"]): LogRecord(int(i["offset"]), None, str(i.get("id")))
            for i in items
            if i.get("partition", 0) == partition and i.get("offset") is not None
        }
        return [found[o] for o in sorted(found)]

    committed = as_records(stored.get("read_committed", []))
    notes: list[str] = []
    if stored.get("isolation") == "read_uncommitted":
        uncommitted = as_records(stored.get("at_level", []))
        notes.append("Both reads were recorded by the run (read back from the broker).")
    else:
        acked = [
            e
            for e in history
            if e.get("ev") in writes and str(e.get("proc", "")).split("#")[0] != "sink"
        ]
        uncommitted = as_records(acked)
        notes.append(
            "This level read at read_committed, so its record has no read_uncommitted read: "
            "that side shows what the broker acknowledged to the writer (offset per ack). "
            "Open the run's read_uncommitted level for a real read at that isolation."
        )
    labels, txns = _run_txn_labels(history, partition, writes)
    waits = _sink_waits(history, partition, writes)
    seen = {r.offset for r in uncommitted} | {r.offset for r in committed}
    last = max(seen, default=-1)
    # Markers: after each ended transaction's last record, the first offset nobody read.
    # The last transaction's marker lies past the last record, beyond both reads.
    marker_at: dict[int, str] = {}
    for txn in sorted((t for t in txns if t["offsets"]), key=lambda t: max(t["offsets"])):
        outcome = {"commit": "COMMIT", "abort": "ABORT", None: "ABORT"}[txn["end"]]
        candidate = max(txn["offsets"]) + 1
        while candidate in seen or candidate in marker_at:
            candidate += 1
        if candidate <= last or txn["end"] is not None:
            marker_at[candidate] = outcome
    end = max([last, *marker_at]) + 1
    rows = build_isolation_rows(uncommitted, committed, start=0, end=end, lso=end)
    for row in rows:
        row.txn = labels.get(row.offset)
        row.sink_wait_ms = waits.get(row.offset)
        if row.kind == "marker":
            row.exact = False
            if row.offset in marker_at:
                row.marker = marker_at[row.offset]
    if any(e.get("ev") == "txn_open" for e in history):
        notes.append(
            f"The run held a transaction open on purpose. The level's sink read at "
            f"{stored.get('isolation')}. 'Sink got it' is the time from the broker's ack to "
            "the sink receiving the record (negative: before the ack reached the writer); a "
            "read_committed sink waits at the LSO until the commit."
        )
    if txns:
        notes.append(
            "Markers are the offsets in neither read; their types follow the run's "
            "transaction events. High watermark and LSO are inferred: every transaction had "
            "ended when the run read the topic, so the LSO equals the high watermark."
        )
    else:
        notes.append("This level wrote no transactions: both isolation levels read the same.")
    return IsolationView(
        topic,
        partition,
        f"recorded run {run_id}, level {level}",
        rows,
        0,
        end,
        end,
        value_label="message id",
        notes=notes,
    )


def run_has_transactions(run: dict[str, Any], level: str) -> bool:
    data = run.get("levels", {}).get(level) or {}
    return any(e.get("ev") == "txn_begin" for e in data.get("history", []))


def wait_until_stable(bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
    """Wait until no transaction is open on the partition (LSO = HW); return that offset."""
    with (
        PartitionReader(bootstrap, topic, partition) as unc,
        PartitionReader(bootstrap, topic, partition, isolation="read_committed") as com,
    ):
        deadline = time.monotonic() + timeout
        while True:
            hw, lso = unc.end_offsets()[1], com.end_offsets()[1]
            if lso == hw or time.monotonic() > deadline:
                return lso
            time.sleep(0.05)


@dataclass
class OpenTransactionDemo:
    topic: str
    while_open: IsolationView
    after_commit: IsolationView

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "while_open": self.while_open.to_json(),
            "after_commit": self.after_commit.to_json(),
        }


def open_transaction_demo(
    bootstrap: str, *, open_records: int = 3, progress: Progress | None = None
) -> OpenTransactionDemo:
    """Commit one transaction, abort one, hold a third open and look, then commit it and look.

    While the third is open, read_committed stops at the last stable offset (its first
    record), below the high watermark; after the commit the two offsets meet.
    """
    if not 1 <= open_records <= 100:
        raise LogViewError(f"The open transaction takes 1 to 100 records, not {open_records}.")
    say = progress or (lambda _step: None)
    topic = new_topic_name("isolation")
    say(f"Creating {topic}")
    try:
        admin.create_topic(bootstrap, topic)
    except (KafkaException, TimeoutError) as exc:
        raise LogViewError(f"Could not create the topic {topic} ({exc}).") from exc
    producer = _producer(
        bootstrap, **{"transactional.id": f"{topic}-txn", "transaction.timeout.ms": 30000}
    )
    try:
        producer.init_transactions(30)
        say("Transaction 1: three records, committed")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"c{i}", f"committed {i}") for i in range(1, 4)])
        producer.commit_transaction(30)
        say("Transaction 2: two records, aborted")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"a{i}", f"aborted {i}") for i in range(1, 3)])
        producer.abort_transaction(30)
        say(f"Transaction 3: {open_records} record(s), left open")
        producer.begin_transaction()
        _produce_all(producer, topic, [(f"o{i}", f"open {i}") for i in range(1, open_records + 1)])
        say("Reading both isolation levels while transaction 3 is open")
        while_open = isolation_live(bootstrap, topic)
        say("Committing transaction 3")
        producer.commit_transaction(30)
        # The commit returns once the coordinator has decided; its marker follows shortly.
        wait_until_stable(bootstrap, topic)
    except BaseException as exc:
        # Never leave the transaction open: it would hold read_committed readers for 30 s.
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(10)
        if isinstance(exc, KafkaException):
            raise LogViewError(f"The transactional producer failed ({exc}).") from exc
        raise
    after_commit = isolation_live(bootstrap, topic)
    return OpenTransactionDemo(topic, while_open, after_commit)
