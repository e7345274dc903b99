"""The live view's reading of a level folder while its files grow (engine.teach.live)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.teach.live import LevelWatch, RunWatch, fault_line, fault_text, fold_faults

RUN = "20250101-000000-consumer-crash-abcd"


def append(path: Path, *events: dict[str, Any], torn: str = "") -> None:
    with path.open("a") as handle:
        handle.write("".join(json.dumps(e) + "\n" for e in events) + torn)


def ev(t: float, proc: str, name: str, **attrs: Any) -> dict[str, Any]:
    return {"t": t, "proc": proc, "ev": name, **attrs}


def level_folder(tmp_path: Path, level: str = "at-least-once") -> Path:
    folder = tmp_path / RUN / "levels" / level
    folder.mkdir(parents=True)
    return folder


def test_counts_grow_as_lines_are_appended(tmp_path):
    folder = level_folder(tmp_path)
    watch = LevelWatch("at-least-once", folder)
    append(folder / "source.jsonl", *(ev(1.0, "source", "ack", id=i) for i in range(3)))
    append(folder / "source.jsonl", ev(1.1, "source", "done"))
    append(folder / "processor.jsonl", ev(1.2, "processor", "consumed", id=0))
    append(folder / "processor.jsonl", ev(1.3, "processor", "output_acked", id=0))
    append(folder / "sink.jsonl", ev(1.4, "sink", "consumed", id=0))
    first = watch.poll()
    assert (first.input_written, first.read, first.outputs, first.seen) == (3, 1, 1, 1)
    assert first.started_at == 1.1  # the input was written: the level's clock starts
    # A second copy reaches the sink, and a replacement instance writes its own file.
    append(folder / "sink.jsonl", ev(1.5, "sink", "consumed", id=0))
    append(folder / "processor-2.jsonl", ev(2.0, "processor#2", "output_acked", id=1))
    second = watch.poll()
    assert second.outputs == 2, "every instance's outputs count"
    assert (second.seen, second.seen_ids) == (2, 1)


def test_a_torn_last_line_is_read_once_it_is_complete(tmp_path):
    folder = level_folder(tmp_path)
    watch = LevelWatch("at-least-once", folder)
    path = folder / "sink.jsonl"
    append(path, ev(1.0, "sink", "consumed", id=0), torn='{"t": 1.1, "proc": "sink", ')
    assert watch.poll().seen == 1
    with path.open("a") as handle:
        handle.write('"ev": "consumed", "id": 1}\n')
    snapshot = watch.poll()
    assert (snapshot.seen, snapshot.seen_ids) == (2, 2)


def test_merged_history_and_outbox_are_not_counted_twice(tmp_path):
    folder = level_folder(tmp_path)
    append(folder / "producer.jsonl", ev(1.0, "producer", "send", id=0))
    append(folder / "history.jsonl", ev(1.0, "producer", "send", id=0))
    append(folder / "outbox.jsonl", {"id": 0, "state": "sent"})
    assert LevelWatch("at-least-once", folder).poll().sent == 1


def test_faults_are_in_words_at_their_recorded_time(tmp_path):
    folder = level_folder(tmp_path)
    append(
        folder / "nemesis.jsonl",
        ev(
            5.0,
            "nemesis",
            "nemesis",
            kind="crash",
            target="processor",
            signal="SIGKILL",
            point="after commit_gap #2",
        ),
    )
    append(folder / "processor.jsonl", ev(4.0, "processor", "start"))
    append(folder / "processor-2.jsonl", ev(5.2, "processor#2", "start"))
    snapshot = LevelWatch("at-least-once", folder).poll()
    assert [(f.t, f.text) for f in snapshot.faults] == [
        (
            5.0,
            "processor killed (SIGKILL) in the middle of its 2nd batch, outputs and offsets "
            "out of step",
        ),
        (5.2, "processor 2 started (a replacement)"),
    ]
    assert snapshot.since_start(5.0) == 1.0


def test_fault_words_for_pauses_fencing_and_the_proxy():
    assert (
        fault_text(ev(1, "nemesis", "nemesis", kind="pause", target="processor"))
        == "processor frozen (SIGSTOP)"
    )
    assert (
        fault_text(ev(1, "nemesis", "nemesis", kind="resume", target="processor"))
        == "processor woke (SIGCONT)"
    )
    assert (
        fault_text(ev(1, "processor", "fenced", error="FENCED_INSTANCE_ID"))
        == "processor fenced: a newer member with the same instance id joined the group"
    )
    fenced = ev(1, "processor", "fenced", error="_FATAL", by="group coordinator")
    assert fault_text(fenced) == (
        "processor fenced by the group coordinator: stopped for good: the client library "
        "cannot go on"
    )
    # The client's own code is kept for small type, beside the words; the lab's event name is not.
    assert fault_line(fenced).raw == "_FATAL"
    restarted = ev(1, "nemesis", "nemesis", kind="supervisor-restart", target="processor")
    assert fault_text(restarted) == (
        "processor exited on its own; the application's supervisor starts a new instance"
    )
    assert (
        fault_text(ev(1, "proxy", "proxy", kind="produce_response_dropped"))
        == "ack of a Produce request dropped"
    )
    assert (
        fault_text(
            ev(1, "nemesis", "nemesis", kind="drop-produce-response", target="producer", nth=3)
        )
        == "proxy set to drop the ack of producer's Produce request #3"
    )
    assert fault_text(ev(1, "producer", "send", id=1)) is None
    assert fault_text(ev(1, "proxy", "proxy", kind="connection_held")) is None


def test_run_watch_follows_levels_as_they_begin_and_routes_the_proxys_events(tmp_path):
    run = tmp_path / RUN
    proxy = tmp_path / "proxy-events.jsonl"
    old = {"ts": 0.5, "kind": "produce_response_dropped", "client_id": f"{RUN}-at-least-once-p"}
    append(proxy, old)  # before the run: not ours to show
    watch = RunWatch(run, ["at-most-once", "at-least-once"], proxy_events=proxy)
    assert watch.poll() == []
    first = level_folder(tmp_path, "at-most-once")
    append(first / "producer.jsonl", ev(1.0, "producer", "send", id=0))
    append(
        proxy,
        {"ts": 1.2, "kind": "produce_response_dropped", "client_id": f"{RUN}-at-most-once-p"},
        {"ts": 1.3, "kind": "produce_response_dropped", "client_id": "another-run-producer"},
    )
    (snapshot,) = watch.poll()
    assert snapshot.level == "at-most-once"
    assert [f.text for f in snapshot.faults] == ["ack of a Produce request dropped"]
    level_folder(tmp_path, "at-least-once")
    assert [s.level for s in watch.poll()] == ["at-most-once", "at-least-once"]


def test_a_fault_is_named_by_what_kafka_and_the_fault_point_know():
    dropped = {"ev": "proxy", "kind": "produce_response_dropped", "correlation_id": 4}
    assert fault_text({**dropped, "after": "reset"}) == (
        "ack of the Produce request with correlation id 4 dropped; connection reset"
    )
    crash = {
        "ev": "nemesis",
        "kind": "crash",
        "target": "processor",
        "point": "after commit_gap #2",
        "at": {"batch": 2, "ids": [5, 6, 7, 8, 9]},
    }
    assert fault_text(crash) == (
        "processor killed (SIGKILL) in the middle of its 2nd batch, outputs and offsets out of "
        "step (batch 2, ids 5–9)"
    )
    # The fault's kind and point are the lab's own names: not shown, even in small type.
    assert fault_line({**crash, "t": 1.0}).raw == ""
    # A producer stopped at a transaction step holds a transaction, not a batch: no "batch None".
    flushed = {
        **crash,
        "target": "producer",
        "point": "after txn_flushed #3",
        "at": {"txn": 3, "ids": [10, 11, 12]},
    }
    text = fault_text(flushed)
    assert "None" not in text and "txn_flushed" not in text
    assert text.endswith(
        "3rd transaction's records were written, before the commit (transaction 3, ids 10–12)"
    )
    # A processor's transaction aborted on purpose carries no number: no "transaction None".
    assert (
        fault_text(ev(1, "processor", "txn_abort"))
        == "processor aborted its transaction (on purpose)"
    )


def test_repeated_refusals_fold_into_one_line_with_a_count():
    refusals = [
        ev(
            1 + i / 10,
            "proxy",
            "proxy",
            kind="produce_error",
            node=2,
            error="NOT_ENOUGH_REPLICAS",
            correlation_id=i,
        )
        for i in range(60)
    ]
    lines = [fault_line(e) for e in refusals]
    assert "too few in-sync replicas" in lines[0].text and "request 0" in lines[0].text
    crash = ev(9, "nemesis", "nemesis", kind="crash", target="processor")
    (folded, after) = fold_faults([*lines, fault_line(crash)])
    assert folded.count == 60 and (folded.t, folded.last_t) == (1.0, 1 + 59 / 10)
    assert folded.text == "node 2 refused writes: too few in-sync replicas"
    assert "NOT_ENOUGH_REPLICAS" in folded.raw
    assert after.count == 1
