"""A big run's verdict table goes to Parquet and is read back a page at a time, unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import record
from engine.metrics import verdict_table
from engine.metrics.inputs import HISTORY_SCHEMA, KAFKA_SCHEMA, LevelSpec
from engine.metrics.summary import judge, verdict_rows


@pytest.fixture(scope="module")
def spark() -> Any:
    from engine.metrics.session import get_spark

    return get_spark("local[2]")


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
        history=spark.createDataFrame(events, history_schema),
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
