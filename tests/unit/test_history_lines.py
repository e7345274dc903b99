"""engine.model.history: a history read back is typed lines (HistoryLine), in time order, each
still the JSON object it was written as."""

from __future__ import annotations

import json

from engine.model.events import Event
from engine.model.history import HistoryLine, HistoryWriter, Tail, merge


def test_merge_gives_typed_lines_in_time_order_and_each_is_what_was_written(tmp_path):
    producer, nemesis = tmp_path / "producer.jsonl", tmp_path / "nemesis.jsonl"
    writer = HistoryWriter(producer, "producer")
    writer.write(Event.SEND, id=3, partition=0)
    writer.close()
    # Another writer's line, earlier in time, and a name that is no Event member.
    nemesis.write_text(json.dumps({"t": 1.0, "proc": "nemesis", "ev": "nemesis", "kind": "kill"}))
    first, second = merge([producer, nemesis])
    assert isinstance(first, HistoryLine) and first.t == 1.0 and first.proc == "nemesis"
    assert first.ev == "nemesis" and first["kind"] == "kill"
    assert (
        second.ev is Event.SEND
        and second.proc == "producer"
        and second.attrs
        == {
            "id": 3,
            "partition": 0,
        }
    )
    assert json.loads(producer.read_text()) == second  # the same object, read by name too
    assert second["id"] == 3 and second.get("ev") == "send"


def test_a_proxy_line_has_its_time_in_ts_and_no_writer(tmp_path):
    proxy = tmp_path / "proxy.jsonl"
    proxy.write_text(json.dumps({"ts": 2.5, "kind": "produce_response_dropped"}) + "\n")
    [line] = Tail(proxy).read_new()
    assert (line.t, line.proc, line.ev) == (2.5, "", "")
    assert line.attrs == {"kind": "produce_response_dropped"}
