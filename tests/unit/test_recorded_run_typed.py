"""A recorded run loads as typed records (engine.run.record.RecordedRun.levels_judged): each
level's result as engine.judging.judge.LevelResult, which the pages draw; result.json itself is
unchanged on disk, and `results` still gives it as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.face import LevelResult, load_judged, load_run
from engine.judging.judge import Effects, UncommittedReader
from engine.run import record
from engine.run.record import CorruptRunError
from tests.data.record import unpack_runs


@pytest.fixture(scope="module")
def recorded_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    runs = tmp_path_factory.mktemp("runs")
    return runs, unpack_runs(runs)


@pytest.fixture
def runs_dir(recorded_runs, monkeypatch) -> dict[str, str]:
    folder, unpacked = recorded_runs
    monkeypatch.setenv("LAB_RUNS_DIR", str(folder))
    return unpacked


def test_every_recorded_run_loads_each_level_as_its_typed_result(runs_dir) -> None:
    assert runs_dir
    for name, run_id in runs_dir.items():
        run = load_run(run_id)
        assert list(run.levels_judged) == list(run.results), name
        for level, typed in run.levels_judged.items():
            assert isinstance(typed, LevelResult)
            assert typed.settings.level == level
            assert typed.to_json() == run.results[level], (name, level)
        assert load_judged(run_id) == run.levels_judged
        assert run.levels_judged is run.levels_judged  # read once


def test_the_typed_result_says_what_the_json_says(runs_dir) -> None:
    run = load_run(runs_dir["ack-loss"])
    for level, data in run.results.items():
        typed = run.levels_judged[level]
        assert typed.counts.duplicates == data["duplicates"]
        assert typed.counts.latency_ms == data["latency_ms"]
        assert typed.isolation == data["isolation"]
        assert typed.explanation.headline == data["explain"]["headline"]
        assert (typed.effects is not None) == ("effects" in data)


def test_a_damaged_level_result_is_said_when_the_run_loads(runs_dir) -> None:
    run_id = runs_dir["ack-loss"]
    path = record.run_folder(run_id) / record.RESULT
    kept = path.read_text()
    damaged = json.loads(kept)
    level = next(iter(damaged["results"]))
    del damaged["results"][level]["sent"]
    try:
        path.write_text(json.dumps(damaged))
        with pytest.raises(CorruptRunError, match="damaged"):
            load_run(run_id)
        with pytest.raises(CorruptRunError):
            load_judged(run_id)
    finally:
        path.write_text(kept)


RECORDED: dict[str, Any] = {
    "label": None,
    "sink_topic": "lab.x.at-least-once",
    "isolation": "read_committed",
    "sent": 10,
    "acked": 10,
    "delivered": 10,
    "duplicates": 2,
    "lost": 0,
    "reordered": 0,
    "aborted_visible": 0,
    "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0},
    "faults": [],
    "started_at": 100.0,
    "duration_s": 5.0,
    "producer_config": {},
    "consumer_config": {},
    "open_transactions": {"0": [4, 9]},
}


def test_a_result_recorded_before_a_count_existed_reads_it_as_not_counted() -> None:
    """A run recorded before the refusals were counted by kind (and before the explanations):
    the page tells "not counted then" (None) from 0, and it is written back as it was."""
    old = {**RECORDED, "fenced": 3}
    typed = LevelResult.from_json("at-least-once", old)
    assert typed.count("writes_refused") is None and typed.counts.writes_refused == 0
    assert typed.count("fenced") == 3
    assert "explain" in typed.not_recorded and typed.explanation.headline == ""
    assert typed.to_json() == old
    assert typed.open_transactions == {0: (4, 9)}


def test_a_count_by_name_covers_the_database_and_the_uncommitted_reader() -> None:
    full = {
        **RECORDED,
        "effects": 9,
        "effect_ids": 9,
        "duplicates_absorbed": 2,
        "effect_store": "sqlite",
        "read_uncommitted_duplicates": 4,
        "read_uncommitted_aborted": 3,
        "explain": {"evidence": ["e"], "why": [], "choices": [], "headline": "h"},
    }
    typed = LevelResult.from_json("idempotency-key", full)
    assert typed.effects == Effects(9, 9, 2, "sqlite")
    assert typed.uncommitted_reader == UncommittedReader(4, 3)
    assert typed.count("duplicates_absorbed") == 2
    assert typed.count("read_uncommitted_aborted") == 3
    assert typed.to_json() == full
    plain = LevelResult.from_json("at-least-once", RECORDED)
    assert plain.count("effects") is None and plain.count("read_uncommitted_duplicates") is None
    # No count under these names: a label, the latency summary, a sum a scenario may teach.
    for name in ("label", "latency_ms", "effect_store", "writes_refused+txn_calls_refused"):
        assert typed.count(name) is None, name
