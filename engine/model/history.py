"""The record of a run: one JSON line per event, written by every process that takes part.

Clients (producer, processor, sink), the nemesis and the fault proxy each append to their own
file; `merge` reads them back into one time-ordered list that the checker judges. An event
is a flat JSON object with at least `t` (epoch seconds), `proc` (who) and `ev` (what); read
back (`merge`, `Tail`) it is a `HistoryLine`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from engine.model.events import Event

if TYPE_CHECKING:
    from engine.proc.failpoints import ArmedFailPoint


class HistoryWriter:
    """Appends events to a JSONL file, flushing each so a SIGKILL loses at most one line."""

    def __init__(
        self, path: str | Path, proc: str, failpoint: ArmedFailPoint | None = None
    ) -> None:
        self.proc = proc
        # Kept open for the life of the role; line-buffered so each event is one write.
        self._file: TextIO = Path(path).open("a", buffering=1)  # noqa: SIM115
        self.failpoint = failpoint  # a fault point armed on this role's events, if any

    def line(self, ev: str, **attrs: Any) -> str:
        """One event as its JSONL line, stamped now, for a caller that writes lines in bulk."""
        record = {"t": time.time(), "proc": self.proc, "ev": ev, **attrs}
        return json.dumps(record, separators=(",", ":")) + "\n"

    def write(self, ev: str, **attrs: Any) -> None:
        self._file.write(self.line(ev, **attrs))
        if self.failpoint is not None:
            self.failpoint.after(ev, attrs, self)

    def flush(self) -> None:
        self._file.flush()

    def write_text(self, lines: str) -> None:
        """Append complete lines in one write (a SIGKILL may tear only the last of them)."""
        if lines:
            self._file.write(lines)

    def close(self) -> None:
        self._file.close()


class HistoryFanOut:
    """One writer's events in several histories, each line identical in all of them.

    A nemesis that strikes every level at once (shared_faults) records each fault in every
    level's own history, with the same time, so each level is judged from a full record.
    """

    def __init__(self, writers: list[HistoryWriter]) -> None:
        self.writers = writers
        self.proc = writers[0].proc

    def write(self, ev: str, **attrs: Any) -> None:
        line = self.writers[0].line(ev, **attrs)
        for writer in self.writers:
            writer.write_text(line)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file, skipping a torn last line (its writer may have been killed)."""
    events = []
    try:
        with Path(path).open() as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        return []
    return events


class HistoryLine(dict[str, Any]):
    """One line of a history as read back. What every line has is typed (`ev`, `proc`, `t`);
    what only its event carries (a send's `id`, a fault's `kind`) is read by name, as from
    the JSON object it is (a dict: the judge, the tests' made-up histories and Spark's copy
    read it so, and it is written back as it was read).

    The fault proxy's lines have `ts` where the others have `t`, and no `proc` or `ev`.
    """

    @property
    def ev(self) -> Event | str:
        """The event: an `Event` member, or the name as written if it is none (the nemesis's
        and the proxy's records carry their own `kind` instead: engine.model.events)."""
        name = str(self.get("ev", ""))
        try:
            return Event(name)
        except ValueError:
            return name

    @property
    def proc(self) -> str:
        """Who wrote it: "producer", "processor#2", "nemesis"... ("" for the proxy's)."""
        return str(self.get("proc", ""))

    @property
    def t(self) -> float:
        """When, in epoch seconds."""
        return float(self.get("t", self.get("ts", 0.0)))

    @property
    def attrs(self) -> dict[str, Any]:
        """What its event carries besides who, what and when."""
        return {k: v for k, v in self.items() if k not in ("t", "ts", "proc", "ev")}


def merge(paths: Iterable[str | Path]) -> list[HistoryLine]:
    """Every line of the histories at `paths`, in time order."""
    events = [HistoryLine(e) for p in paths for e in read_jsonl(p)]
    events.sort(key=lambda e: e.t)
    return events


class Tail:
    """Incrementally reads new complete lines of a growing JSONL file.

    `offset` skips what is already there (a shared file, such as the proxy's, read from now on).
    """

    def __init__(self, path: str | Path, offset: int = 0) -> None:
        self.path = Path(path)
        self._offset = offset
        self._partial = b""

    def read_new(self) -> list[HistoryLine]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(HistoryLine(json.loads(line)))
                except json.JSONDecodeError:
                    continue
        return out


# ---- a columnar copy for Spark ---------------------------------------------------------
_INT32, _INT64 = 2**31, 2**63


def history_columns() -> Any:
    """The fields of an event that Spark's judgement reads, with their types: the schema of
    the Parquet copy (write_columns), and the one Spark reads the JSON with
    (engine.metrics.inputs.HISTORY_SCHEMA). Every other field of an event is ignored."""
    import pyarrow as pa

    return pa.schema(
        [
            ("t", pa.float64()),
            ("proc", pa.string()),
            ("ev", pa.string()),
            ("id", pa.int64()),
            ("ids", pa.list_(pa.int64())),
            # A source's ack: where the input landed; the runner's group_committed: where
            # the processor's group stood at the end (an input at or past it is not
            # processed yet).
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            # What a refusal says (engine.judging.checker.count_refusals): its error, who refused,
            # and the client's words.
            ("error", pa.string()),
            ("by", pa.string()),
            ("reason", pa.string()),
        ]
    )


def _whole(value: Any, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -limit <= value < limit


def _fits(field: str, value: Any) -> bool:
    """Whether Spark's JSON reading gives `value` as it is in the field's column."""
    if value is None:
        return True
    if field == "t":  # NaN and infinities too: JSON reading gives them back as they are
        return isinstance(value, int | float) and not isinstance(value, bool)
    if field in ("proc", "ev", "error", "by", "reason"):
        return isinstance(value, str)
    if field == "partition":
        return _whole(value, _INT32)
    if field in ("id", "offset"):
        return _whole(value, _INT64)
    return isinstance(value, list) and all(_whole(v, _INT64) for v in value)  # ids


def write_columns(history: list[dict[str, Any]], path: Path) -> bool:
    """Write the fields Spark reads of `history` to a Parquet file at `path`.

    Spark parses a level's history.jsonl three times per judgement; from this copy a class's
    run's judgement took 0.97 s against 1.26 s (benchmarks/METRICS.md). Only when every
    field of every event has the type its column holds (JSON reading turns a value of
    another type into null, or a number into text for a text column): otherwise no copy is
    written, an earlier one is removed, and Spark reads the JSON. Returns whether the copy
    was written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = history_columns()
    columns: dict[str, list[Any]] = {field: [] for field in schema.names}
    for event in history:
        for field, values in columns.items():
            value = event.get(field)
            if not _fits(field, value):
                path.unlink(missing_ok=True)
                return False
            values.append(float(value) if field == "t" and value is not None else value)
    pq.write_table(pa.table(columns, schema=schema), path)
    return True
