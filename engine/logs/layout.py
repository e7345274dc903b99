"""The log's layout on disk: a partition's segment files and the cleaner's checkpoint.

The broker's log directory is read as local files (embedded backend) or by a command in its
container (docker backend); Kafka's log-dump tool is run the same way.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from engine.cluster.base import Cluster
from engine.logs.errors import LogDumpError, LogViewError
from engine.logs.reading import require_partition


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
        from engine.base import tools
        from engine.kafka import jars

        # The jars of the version that wrote the segments (the cluster's own).
        libs = Path(jars.kafka_classpath(self.cluster.kafka_version)).parent
        cmd = [
            tools.find_java(),
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
    /opt/kafka/bin), which the stand-in of containers/kafka keeps; tested on it in
    tests/integration/test_docker_backend.py.
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


# ---- the log-dump tool's class in the cached jars (run by _LocalLogDirs.dump) ------------
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
