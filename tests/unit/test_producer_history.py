"""The producer role's hand-formatted history lines and values parse as json.dumps's would."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from engine.base.values import Stamp, parse_value, value_maker
from engine.model.history import HistoryWriter, read_jsonl
from engine.roles.producer import ProducerHistory


def message(key: int, partition: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(
        key=lambda: str(key).encode(), partition=lambda: partition, offset=lambda: offset
    )


def test_values_are_compact_json_in_field_order() -> None:
    value = value_maker("run-7", "exactly-once", 'odd "name"')(42)
    parsed = json.loads(value)
    assert list(parsed) == ["id", "created_at", "run", "level", "by"]
    assert parsed["id"] == 42 and parsed["by"] == 'odd "name"'
    assert json.dumps(parsed, separators=(",", ":")).encode() == value


@pytest.mark.parametrize("size", [200, 1024, 10240])
def test_padded_values_have_the_size_and_still_parse(size: int) -> None:
    make = value_maker("run-1", "at-least-once", "producer", size)
    for message_id in (0, 9, 12345, 10**9):
        value = make(message_id)
        assert len(value) == size
        parsed = parse_value(value)
        assert parsed is not None and parsed["id"] == message_id
        assert parsed["level"] == "at-least-once" and set(parsed["pad"]) == {"x"}


def test_a_size_below_the_plain_value_adds_no_pad() -> None:
    value = value_maker("r", "l", "p", 10)(1)
    assert json.loads(value).keys() == json.loads(value_maker("r", "l", "p")(1)).keys()


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
    stamp = Stamp(0.001)
    seen = [json.loads(stamp()) for _ in range(2000)]
    assert seen == sorted(seen) and seen[0] > 1e9 and isinstance(seen[0], float)


def test_an_ack_without_an_offset_is_still_a_line(tmp_path) -> None:
    """An idempotent retry the broker already holds is acknowledged without its offset."""
    path = tmp_path / "producer.jsonl"
    writer = HistoryWriter(path, "producer")
    events = ProducerHistory(writer)
    events.on_delivery(None, message(3, 0, None))  # type: ignore[arg-type]
    events.write_reports()
    writer.close()
    assert read_jsonl(path) == [
        {
            "t": read_jsonl(path)[0]["t"],
            "proc": "producer",
            "ev": "ack",
            "id": 3,
            "partition": 0,
            "offset": None,
        }
    ]


def test_a_fenced_producer_restarts_only_while_it_owns_its_transactional_id(tmp_path):
    """The owner file is the application's lease: the first instance claims it; a
    replacement claims it after; the fenced first instance then must not restart."""
    from engine.roles.producer import claim_ownership, still_owner

    txn = {"owner_file": str(tmp_path / "owner"), "restart_when_fenced": True}
    claim_ownership(txn, "producer")
    assert still_owner(txn, "producer")
    claim_ownership(txn, "producer#2")
    assert not still_owner(txn, "producer")
    assert still_owner(txn, "producer#2")
    assert not still_owner({**txn, "restart_when_fenced": False}, "producer#2")
    assert not still_owner({"restart_when_fenced": True}, "producer")
