"""A read_committed level is also judged as a read_uncommitted reader would see its topic:
exactly-once holds for read_committed readers only, and the card says what the other reader
counts (the records of aborted transactions, and the duplicates they make)."""

from __future__ import annotations

import dataclasses

from engine.judging.judge import LevelResult, LevelSettings, ReadBack, UncommittedReader, judge
from engine.model.records import StoredRecord
from engine.teach.lesson import UNCOMMITTED_READER_COUNTS

SETTINGS = LevelSettings(
    level="exactly-once",
    pipeline="producer",
    ledger=[0, 1, 2],
    sink_topic="t",
    label=None,
    started_at=0.0,
    duration_s=1.0,
    producer_config={},
    consumer_config={},
)
HISTORY = [
    {"t": 1.0 + i, "proc": "producer", "ev": ev, "id": i}
    for i in range(3)
    for ev in ("send", "ack")
]
# Ids 0 and 1 were written in a transaction that was aborted, then again and committed.
COMMITTED = [StoredRecord(0, offset, i) for offset, i in ((3, 0), (4, 1), (5, 2))]
EVERYTHING = [StoredRecord(0, 0, 0), StoredRecord(0, 1, 1), *COMMITTED]


def test_a_read_committed_level_counts_what_a_read_uncommitted_reader_would_see():
    read = ReadBack(
        isolation="read_committed", at_level=COMMITTED, committed=COMMITTED, uncommitted=EVERYTHING
    )
    result = judge(HISTORY, read, SETTINGS).result
    assert result.counts.duplicates == 0  # the level's own reader: each id once
    assert result.uncommitted_reader == UncommittedReader(2, 2)
    data = result.to_json()
    assert (data["read_uncommitted_duplicates"], data["read_uncommitted_aborted"]) == (2, 2)
    assert LevelResult.from_json("exactly-once", data).uncommitted_reader == UncommittedReader(2, 2)
    assert ReadBack.from_json(read.to_json()).uncommitted == EVERYTHING


def test_a_level_read_at_read_uncommitted_has_no_other_reader():
    read = ReadBack(isolation="read_uncommitted", at_level=EVERYTHING, committed=COMMITTED)
    result = judge(HISTORY, read, SETTINGS).result
    assert result.uncommitted_reader is None
    assert "read_uncommitted_duplicates" not in result.to_json()
    assert ReadBack.from_json(read.to_json()).uncommitted is None


def test_a_lesson_may_cite_exactly_the_other_readers_counts():
    names = {f.name for f in dataclasses.fields(UncommittedReader)}
    assert set(UNCOMMITTED_READER_COUNTS) == names
