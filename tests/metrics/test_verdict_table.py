"""A big run's verdict table goes to Parquet and is read back a page at a time, unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.metrics import verdict_table
from engine.metrics.inputs import HISTORY_SCHEMA, KAFKA_SCHEMA, LevelSpec
from engine.metrics.summary import judge, verdict_rows
from engine.run import record


@pytest.fixture(scope="module")
def spark() -> Any:
    from engine.metrics.session import get_spark

    return get_spark("local[2]")


def padded(events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each event's row with None for the history fields it does not name (level first)."""
    width = 1 + len(HISTORY_SCHEMA.fields)
    return [e + (None,) * (width - len(e)) for e in events]


def test_the_parquet_table_pages_through_the_same_rows(spark, monkeypatch) -> None:
    messages = 250
    levels = [
        LevelSpec("at-least-once", "lab.table.alo", "read_uncommitted"),
        LevelSpec("exactly-once", "lab.table.eo", "read_committed"),
    ]
    records, events = [], []
    for spec in levels:
        for i in range(messages):
            if i % 17 == 3:  # lost: sent, never stored
                events.append((spec.level, 100.0 + i, "producer", "send", i, None, None, None))
                continue
            value = json.dumps({"id": i, "created_at": 100.0 + i}).encode()
            copies = 2 if i % 11 == 5 and spec.level == "at-least-once" else 1
            records += [(spec.topic, i % 2, 2 * i + k, value) for k in range(copies)]
            events.append((spec.level, 100.0 + i, "producer", "send", i, None, None, None))
            events.append((spec.level, 100.5 + i, "sink", "consumed", i, None, None, None))
    frame = spark.createDataFrame(records, KAFKA_SCHEMA)
    history_schema = "level string, " + ", ".join(
        f"{f.name} {f.dataType.simpleString()}" for f in HISTORY_SCHEMA.fields
    )
    judged = judge(
        uncommitted=frame,
        committed=frame,
        history=spark.createDataFrame(padded(events), history_schema),
        levels=levels,
        messages=messages,
    )
    run_id = "20260101-000000-table"
    record.run_folder(run_id).mkdir(parents=True, exist_ok=True)
    try:
        expected = verdict_rows(judged)
        monkeypatch.setenv("LAB_VERDICT_ROWS", str(messages))  # 2 levels x 250 rows: too many
        fields = verdict_table.verdict_fields(judged, run_id)
    finally:
        judged.release()
    assert fields == {"verdicts": None, "verdicts_parquet": "verdicts.parquet"}
    for spec in levels:
        kinds = verdict_table.verdict_kinds(run_id, spec.level)
        assert kinds == sorted({r["verdict"] for r in expected[spec.level]})
        rows = []
        for page in range(4):
            got = verdict_table.read_page(run_id, spec.level, kinds, page=page, page_size=70)
            assert got.total == messages and got.first == 70 * page
            rows += got.rows.to_dict("records")
        assert len(rows) == messages
        for row in rows:  # pandas gives NaN where the table has None
            for k, v in row.items():
                if isinstance(v, float) and v != v:
                    row[k] = None
        assert rows == expected[spec.level]
        lost = verdict_table.read_page(run_id, spec.level, ["lost"], page=9, page_size=5)
        assert lost.total == len(range(3, messages, 17)) and lost.first == 10  # the last page
        assert list(lost.rows["id"]) == list(range(3, messages, 17))[10:]


def _sparks_table(judged: Any) -> dict[str, list[dict[str, Any]]]:
    """Judged.verdicts() collected, as verdict_rows shapes its rows (Spark's own join)."""
    out: dict[str, list[dict[str, Any]]] = {s.level: [] for s in judged.levels}
    for r in judged.verdicts().orderBy("level", "id").collect():
        row = r.asDict()
        row["latency_ms"] = None if row["latency_ms"] is None else round(row["latency_ms"], 2)
        row["offsets"] = list(row["offsets"])
        out[row.pop("level")].append(row)
    return out


@pytest.mark.parametrize("collect_rows", [False, True], ids=["after", "beside-the-summary"])
def test_the_collected_table_is_sparks_joined_table(spark, collect_rows: bool) -> None:
    """verdict_rows fills in the ledger in Python; Judged.verdicts() joins it in Spark. Its
    rows are collected after judge(), or by judge() itself beside the summary's job."""
    messages = 30
    levels = [
        LevelSpec("at-least-once", "lab.collected.alo", "read_uncommitted"),
        LevelSpec("exactly-once", "lab.collected.eo", "read_committed"),
    ]
    uncommitted, committed, events = [], [], []
    for spec in levels:
        offset = {0: 0, 1: 0}
        for i in [*range(messages), messages + 4]:  # and one id beyond the ledger
            if i % 7 == 0:
                continue  # nothing names it: never sent, filled in
            value = json.dumps({"id": i, "created_at": 100.0 + i}).encode()
            # id 5 is stored three times: offsets 9 and 10 of partition 0 and 2 of partition 1
            places = [(0, 9), (0, 10), (1, 2)] if i == 5 else [(i % 2, None)]
            for partition, at in places:
                position = offset[partition] if at is None else at
                offset[partition] = max(offset[partition], position) + 1
                row = (spec.topic, partition, position, value)
                uncommitted.append(row)
                if i % 9 != 4:  # aborted: only read_uncommitted shows it
                    committed.append(row)
            events.append((spec.level, 100.0 + i, "producer", "send", i, None, None, None))
            events.append((spec.level, 100.2 + i, "producer", "ack", i, None, None, None))
            events.append((spec.level, 100.5 + i, "sink", "consumed", i, None, None, None))
    history_schema = "level string, " + ", ".join(
        f"{f.name} {f.dataType.simpleString()}" for f in HISTORY_SCHEMA.fields
    )
    judged = judge(
        uncommitted=spark.createDataFrame(uncommitted, KAFKA_SCHEMA),
        committed=spark.createDataFrame(committed, KAFKA_SCHEMA),
        history=spark.createDataFrame(padded(events), history_schema),
        levels=levels,
        messages=messages,
        collect_rows=collect_rows,
    )
    assert (judged.collected is not None) == collect_rows
    try:
        collected, joined = verdict_rows(judged), _sparks_table(judged)
    finally:
        judged.release()
    assert collected == joined
    for spec in levels:  # the same columns in the same order, row by row
        assert [list(r) for r in collected[spec.level]] == [list(r) for r in joined[spec.level]]
    # The cases the Python side decides, so the equality above covers them:
    alo, eo = collected["at-least-once"], collected["exactly-once"]
    assert [r["id"] for r in alo] == list(range(messages))  # the ledger only, in id order
    never = alo[7]  # an id nothing names
    assert never["verdict"] == "never sent" and never["copies"] == 0 and never["offsets"] == []
    # Positions in (partition, offset) order by number: "0:10" sorts before "0:9" as text.
    assert alo[5]["offsets"] == ["0:9", "0:10", "1:2"] and alo[5]["verdict"] == "duplicated"
    assert alo[4]["aborted_copies"] == 1 and alo[4]["verdict"] == "visible although aborted"
    assert eo[4]["copies"] == 0 and eo[4]["offsets"] == []  # read_committed never shows it
    assert alo[3]["latency_ms"] == 500.0
