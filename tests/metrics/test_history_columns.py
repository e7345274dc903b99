"""A level's history read by Spark from its Parquet copy equals the same history read from
history.jsonl (engine.model.history.write_columns, engine.metrics.inputs.read_history).

The copy is written only when every field Spark reads has its column's type; any other
value is what JSON reading turns into null, and then Spark reads the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.metrics.inputs import read_history
from engine.model.history import write_columns
from engine.run import record

# Every field the judgement reads, with the values runs write: missing fields, nulls, a
# transaction's ids, a source's ack position, the runner's group_committed, ints as times.
EVENTS: list[dict[str, Any]] = [
    {"t": 1.5, "proc": "producer", "ev": "send", "id": 0},
    {"t": 2, "proc": "producer#2", "ev": "ack", "id": 0, "partition": 0, "offset": 7},
    {"t": 2.25, "proc": "producer", "ev": "txn_commit", "ids": [0, 1, 2**62]},
    {"t": 2.5, "proc": "producer", "ev": "txn_abort", "ids": []},
    {"t": 3.0, "proc": "source", "ev": "ack", "id": -3, "partition": 2**31 - 1, "offset": 0},
    {"t": 3.5, "proc": "runner", "ev": "group_committed", "partition": 1, "offset": 12},
    {"t": 4.0, "proc": "sink", "ev": "consumed", "id": None, "extra": {"x": 1}},
    {"t": 4.5, "proc": "processor", "ev": "fenced", "error": "_FENCED", "by": "group coordinator"}
    | {"reason": "Commit failed: Broker: Static consumer fenced"},
    {"t": None, "proc": None, "ev": None},
    {},
]
# A field's value that JSON reading does not give as it is: each alone keeps the copy from
# being written.
MISFITS: list[tuple[str, Any]] = [
    ("t", True),
    ("id", 1.0),
    ("id", "1"),
    ("ev", 5),
    ("ids", [1, 2.5]),
    ("partition", 2**31),
    ("offset", 2**63),
    ("error", 47),
    ("by", {"who": "coordinator"}),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


def level_history(folder: Path, level: str, events: list[dict[str, Any]]) -> Path:
    """history.jsonl of `level` as engine.run.record.write_judge_inputs writes it, and its copy."""
    level_dir = record.level_folder(folder, level)
    level_dir.mkdir(parents=True)
    path = level_dir / record.HISTORY
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    write_columns(events, level_dir / record.HISTORY_COLUMNS)
    return path


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_the_copy_reads_as_the_json_does(spark, tmp_path) -> None:
    paths = {
        "at-least-once": level_history(tmp_path, "at-least-once", EVENTS),
        "exactly-once": level_history(tmp_path, "exactly-once", EVENTS[:3]),
    }
    assert all(p.with_name(record.HISTORY_COLUMNS).exists() for p in paths.values())
    from_copy = read_history(spark, paths)
    assert {Path(f).suffix for f in from_copy.inputFiles()} == {".parquet"}
    copied = rows(from_copy)
    for p in paths.values():
        p.with_name(record.HISTORY_COLUMNS).unlink()
    from_json = read_history(spark, paths)
    assert {Path(f).suffix for f in from_json.inputFiles()} == {".jsonl"}
    assert copied == rows(from_json)
    assert len(copied) == len(EVENTS) + 3


@pytest.mark.parametrize("misfit", MISFITS, ids=repr)
def test_a_value_json_reading_would_turn_into_null_leaves_the_json_to_spark(
    spark, tmp_path, misfit
) -> None:
    """No copy for a history with such a value, and an earlier copy is removed. The
    contrast: JSON reading gives that field another value (null, or a number as text), so
    a copy of the value as it is would read otherwise."""
    path = level_history(tmp_path, "at-least-once", EVENTS)
    copy = path.with_name(record.HISTORY_COLUMNS)
    assert copy.exists()
    field, value = misfit
    events = [*EVENTS, {"t": 1.0, "proc": "misfit", "ev": "send", "id": 1, field: value}]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert not write_columns(events, copy)
    assert not copy.exists()
    read = read_history(spark, {"at-least-once": path})
    assert {Path(f).suffix for f in read.inputFiles()} == {".jsonl"}
    [row] = [r.asDict() for r in read.collect() if r["proc"] == "misfit"]
    assert row[field] != value, row
