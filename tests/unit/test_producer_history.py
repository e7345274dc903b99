"""The producer role's hand-formatted history lines and values are what json.dumps would give."""

from __future__ import annotations

import json
from types import SimpleNamespace

from confluent_kafka import KafkaError

from engine.history import HistoryWriter, read_jsonl
from engine.roles.common import make_value
from engine.roles.producer import ProducerHistory, Stamp


def message(key: int, partition: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(
        key=lambda: str(key).encode(), partition=lambda: partition, offset=lambda: offset
    )


def test_make_value_is_compact_json_in_field_order() -> None:
    value = make_value(42, "run-7", "exactly-once", 'odd "name"')
    parsed = json.loads(value)
    assert list(parsed) == ["id", "created_at", "run", "level", "by"]
    assert parsed["id"] == 42 and parsed["by"] == 'odd "name"'
    assert json.dumps(parsed, separators=(",", ":")).encode() == value


def test_send_ack_and_fail_lines_parse_like_write(tmp_path) -> None:
    path = tmp_path / "producer.jsonl"
    writer = HistoryWriter(path, "producer#2")
    events = ProducerHistory(writer)
    events.sends([1, 2, 3])
    events.on_delivery(None, message(1, 0, 10))
    events.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), message(2, 1, -1))
    assert read_jsonl(path)[-1]["ev"] == "send"  # reports wait for write_reports
    events.write_reports()
    writer.write("ack", id=3, partition=2, offset=5)
    writer.close()

    lines = read_jsonl(path)
    assert [(e["ev"], e["id"]) for e in lines] == [
        ("send", 1),
        ("send", 2),
        ("send", 3),
        ("ack", 1),
        ("fail", 2),
        ("ack", 3),
    ]
    by_hand, by_write = lines[3], lines[5]
    assert by_hand.keys() == by_write.keys()
    assert {k: by_hand[k] for k in ("proc", "partition", "offset")} == {
        "proc": "producer#2",
        "partition": 0,
        "offset": 10,
    }
    assert lines[4]["error"] == "_MSG_TIMED_OUT"
    times = [e["t"] for e in lines]
    assert times == sorted(times)


def test_stamp_is_a_json_number_and_never_goes_back() -> None:
    stamp = Stamp()
    seen = [float(json.loads(stamp())) for _ in range(2000)]
    assert seen == sorted(seen) and seen[0] > 1e9
