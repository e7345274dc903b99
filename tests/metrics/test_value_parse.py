"""The judgement reads a record value's id and created_at as from_json does, faster.

engine.metrics.sql cuts the lab's own values (engine.base.values.value_maker's compact
JSON) apart with string functions and parses any other value as JSON. Both ways must give
the same struct for every value: the values the lab's producers write, values other roles
write (a processor's json.dumps, with spaces), and values that look like the lab's but are
not (escapes, leading zeros, too many digits, bytes that are not UTF-8, a final newline).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.values import value_maker
from engine.metrics import sql


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


# Values that look like the lab's and are not, or are the lab's with an unusual number.
NEAR_MISSES = [
    b'{"id":1,"created_at":2.5,"run":"r","level":"l","by":"\xff"}',  # not UTF-8
    b'{"id":1,"created_at":2.5,"run":"r","level":"l","by":"\xc3\xa9"}',  # UTF-8, not ASCII
    b'{"id":1,"created_at":2.5,"run":"r\\"x","level":"l","by":"p"}',  # an escaped quote
    b'{"id":1,"created_at":2.5,"run":"r\\\\","level":"l","by":"p"}',  # an escaped backslash
    b'{"id":01,"created_at":2.5,"run":"r","level":"l","by":"p"}',  # a leading zero
    b'{"id":1234567890123456789,"created_at":2.5,"run":"r","level":"l","by":"p"}',
    b'{"id":99999999999999999999,"created_at":2.5,"run":"r","level":"l","by":"p"}',
    b'{"id":-7,"created_at":-0.0,"run":"r","level":"l","by":"p"}',
    b'{"id":7,"created_at":1e5,"run":"r","level":"l","by":"p"}',
    b'{"id":7,"created_at":1.25E-7,"run":"r","level":"l","by":"p"}',
    b'{"id":7,"created_at":1e400,"run":"r","level":"l","by":"p"}',  # past a double's range
    b'{"id":7,"created_at":123456789012345678901234567890,"run":"r","level":"l","by":"p"}',
    b'{"id":7,"created_at":null,"run":"r","level":"l","by":"p"}',
    b'{"id":null,"created_at":2.5,"run":"r","level":"l","by":"p"}',
    b'{"id":7,"created_at":2.5,"run":"r","level":"l","by":"p"}\n',
    b'{"id":7,"created_at":2.5,"run":"r","level":"l","by":"p","pad":"xxxx"}',
    b'{"id":7,"created_at":2.5,"run":"r","level":"l","by":"p","pad":"yy"}',
    b'{"id":7,"created_at":2.5,"run":"r","level":"l"}',
    b'{"id":7,"created_at":2.5,"run":"r","level":"l","by":"p"',  # cut short
    b'{"id": 7, "created_at": 2.5, "run": "r", "level": "l", "by": "processor"}',
    b'{"id":7.5,"created_at":2.5,"run":"r","level":"l","by":"p"}',
    b"not json",
    b"",
]


def parsed(spark: Any, values: list[bytes]) -> list[tuple[Any, Any, bool]]:
    """For each value: (the judgement's struct, from_json's struct, cut apart or not)."""
    from engine.metrics.inputs import KAFKA_SCHEMA

    frame = spark.createDataFrame([("t", 0, k, v) for k, v in enumerate(values)], KAFKA_SCHEMA)
    rows = sql.run_sql(
        spark,
        f"""
        SELECT `offset`, {sql._value_sql("text")} AS ours,
               CASE WHEN is_valid_utf8(text)
                    THEN from_json(text, 'id BIGINT, created_at DOUBLE') END AS theirs,
               text RLIKE {sql._sql_str(sql._MADE_BY_THE_LAB)} AS cut
        FROM (SELECT `offset`, CAST(value AS STRING) AS text FROM {{values}})
        ORDER BY `offset`""",
        values=frame,
    ).collect()
    return [(r["ours"], r["theirs"], r["cut"]) for r in rows]


def test_near_misses_are_read_as_from_json_reads_them(spark) -> None:
    for value, (ours, theirs, _cut) in zip(NEAR_MISSES, parsed(spark, NEAR_MISSES), strict=True):
        assert ours == theirs, value


def test_a_pattern_that_takes_any_character_reads_bytes_that_are_not_utf8_as_a_message(
    spark, monkeypatch
) -> None:
    """The contrast: with `[^"\\]` for a string's characters, the value that is not UTF-8
    (U+FFFD in Spark's string) is cut apart as a message; from_json is never asked about it."""
    naive = sql._MADE_BY_THE_LAB.replace(sql._STRING, '"[^"\\\\]*"')
    assert naive != sql._MADE_BY_THE_LAB
    monkeypatch.setattr(sql, "_MADE_BY_THE_LAB", naive)
    ours, theirs, cut = parsed(spark, NEAR_MISSES[:1])[0]
    assert cut and theirs is None and ours is not None


@settings(max_examples=5, deadline=None)
@given(
    ids=st.lists(st.integers(-(10**18) + 1, 10**18 - 1), min_size=1, max_size=40),
    size=st.sampled_from([0, 0, 120]),
    level=st.sampled_from(["at-least-once", "exactly-once", "a b~[x]"]),
)
def test_the_labs_own_values_are_cut_apart_and_read_as_from_json_reads_them(
    spark, ids: list[int], size: int, level: str
) -> None:
    make = value_maker("20261128-093500-ack-loss-abcd", level, "producer", size)
    values = [make(i) for i in ids]
    # A processor's output (engine/roles/processor.py): json.dumps, spaces and all.
    values += [json.dumps({"id": i, "created_at": 1.5, "by": "processor"}).encode() for i in ids]
    results = parsed(spark, values)
    for value, (ours, theirs, _cut) in zip(values, results, strict=True):
        assert ours == theirs, value
        assert ours is not None and ours["id"] == json.loads(value)["id"], value
    assert [cut for _, _, cut in results] == [True] * len(ids) + [False] * len(ids)
