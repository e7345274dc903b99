"""Recorded runs judged again offline: the judge (engine.judging.judge) needs no Kafka.

tests/data/recorded/NAME/LEVEL/ keeps what a real run's level was judged from (its merged
history, what was read back, how it ran), as etcd's robustness tests keep their histories;
`python -m tests.data.record NAME` records them again. Judging them again must give the
counts the run itself recorded (tests/data/recorded/NAME.json), and each scenario's
`teaches` bound must hold when judged from its own run and fail when judged from another.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.judging.checker import LevelCounts
from engine.judging.judge import LevelResult, judge
from engine.run import record
from engine.scenarios.scenario import list_scenarios, load_scenario, meets
from tests.data.record import JUDGED_AGAIN

RECORDED = Path(__file__).parent.parent / "data" / "recorded"

# The checker's counts (its latency summary is compared on its own).
COUNT_FIELDS = [f.name for f in fields(LevelCounts) if f.name != "latency_ms"]


def judged_again(name: str, level: str) -> dict[str, Any]:
    """The level's result, judged now from its recorded inputs, as `engine run --json`'s."""
    history, read, settings = record.load_judged_inputs(RECORDED / name / level)
    return judge(history, read, settings).result.to_json()


def recorded_result(name: str, level: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{name}.json").read_text())["results"][level]


LEVELS_KEPT = [
    (name, level.name)
    for name in JUDGED_AGAIN
    for level in sorted((RECORDED / name).iterdir())
    if level.is_dir()
]


def test_every_run_judged_again_was_kept() -> None:
    assert {name for name, _ in LEVELS_KEPT} == set(JUDGED_AGAIN), (
        "run `python -m tests.data.record NAME` for the missing ones"
    )


@pytest.mark.parametrize("kept", LEVELS_KEPT, ids=["/".join(k) for k in LEVELS_KEPT])
def test_judging_again_gives_the_recorded_result(kept: tuple[str, str]) -> None:
    name, level = kept
    again, then = judged_again(name, level), recorded_result(name, level)
    assert {f: again[f] for f in COUNT_FIELDS} == {f: then[f] for f in COUNT_FIELDS}
    assert again["latency_ms"] == then["latency_ms"]
    assert again["explain"] == then["explain"]
    assert again["faults"] == then["faults"]
    for field in ("effects", "effect_ids", "duplicates_absorbed", "effect_store"):
        assert again.get(field) == then.get(field), field


@pytest.mark.parametrize("kept", LEVELS_KEPT, ids=["/".join(k) for k in LEVELS_KEPT])
def test_a_recorded_result_reads_back_into_its_types(kept: tuple[str, str]) -> None:
    name, level = kept
    then = recorded_result(name, level)
    typed = LevelResult.from_json(level, then)
    assert typed.to_json() == then


# Every level of every recorded run's result (tests/data/recorded/NAME.json), judged again or not.
EVERY_RECORDED_LEVEL = [
    (path.stem, level)
    for path in sorted(RECORDED.glob("*.json"))
    for level in json.loads(path.read_text())["results"]
]


@pytest.mark.parametrize(
    "recorded", EVERY_RECORDED_LEVEL, ids=["/".join(k) for k in EVERY_RECORDED_LEVEL]
)
def test_every_recorded_result_reads_back_into_its_types_and_out_the_same(
    recorded: tuple[str, str],
) -> None:
    """Runs recorded before a count existed (never_sent, not_processed) read back too, with
    the count's default, and are written back without it, as they were."""
    name, level = recorded
    then = recorded_result(name, level)
    typed = LevelResult.from_json(level, then)
    assert typed.to_json() == then
    assert typed.not_recorded == {f for f in ("never_sent", "not_processed") if f not in then}
    for field in COUNT_FIELDS:  # each count the pages read by name, as recorded
        assert typed.count(field) == then.get(field), field
    assert typed.count("effects") == then.get("effects")
    assert typed.count("read_uncommitted_duplicates") == then.get("read_uncommitted_duplicates")
    assert typed.settings.label == then["label"]
    assert typed.settings.sink_topic == then["sink_topic"]
    assert typed.settings.started_at == then["started_at"]
    assert typed.explanation.to_json() == then["explain"]
    assert typed.faults == then["faults"]


def test_a_judged_result_records_every_field() -> None:
    name, level = LEVELS_KEPT[0]
    history, read, settings = record.load_judged_inputs(RECORDED / name / level)
    result = judge(history, read, settings).result
    assert result.not_recorded == frozenset()
    assert set(COUNT_FIELDS) <= set(result.to_json())


TEACHES = [
    (name, level, field, bound)
    for name in JUDGED_AGAIN
    if name in list_scenarios()
    for level, fields in load_scenario(list_scenarios()[name]).teaches.items()
    if (RECORDED / name / level).is_dir()
    for field, bound in fields.items()
]


@pytest.mark.parametrize("entry", TEACHES, ids=["-".join(t[:3]) for t in TEACHES])
def test_a_judged_bound_holds_on_its_run_and_fails_on_another(entry) -> None:
    name, level, field, bound = entry
    assert meets(judged_again(name, level)[field], bound), entry
    elsewhere = [
        (other, other_level)
        for other, other_level in LEVELS_KEPT
        if (other, other_level) != (name, level)
        and field in (result := judged_again(other, other_level))
        and not meets(result[field], bound)
    ]
    assert elsewhere, f"{entry} holds when judged from every kept run"


def test_the_lost_ack_duplicate_is_judged_from_the_fault_not_assumed() -> None:
    """The same level judged from ack-loss and from its control run without the fault: the
    judge finds the duplicate only where the proxy really dropped an ack."""
    with_fault = judged_again("ack-loss", "at-least-once")
    without = judged_again("ack-loss-without-faults", "at-least-once")
    assert with_fault["duplicates"] >= 1 and any(
        f.get("source") == "proxy" for f in with_fault["faults"]
    )
    assert without["duplicates"] == 0 and without["faults"] == []


def test_a_level_whose_judgement_fails_keeps_what_it_was_to_be_judged_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LevelRun.finish writes the judge's inputs before it judges: a judgement that raises
    (a bug in the checker, say) leaves a level that can be judged again offline."""
    from engine.run import level_run

    history, read, settings = record.load_judged_inputs(RECORDED / "ack-loss" / "at-least-once")
    (tmp_path / "producer.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))

    class Finished(level_run.LevelRun):
        """A level whose clients have run: what finish() reads of it, without Kafka."""

        def __init__(self) -> None:
            self.folder = tmp_path
            self.processes = [SimpleNamespace(history=tmp_path / "producer.jsonl", stop=list)]
            self.nemesis_history = open(tmp_path / record.NEMESIS_HISTORY, "w")  # noqa: SIM115
            self.scenario = None

        def read_back(self, progress):
            return read

        def _group_committed_events(self):
            return []

        def _proxy_faults(self):
            return read.proxy_faults

        def _effect_rows(self):
            return read.effect_rows

        def how_it_ran(self):
            return settings

    def broken_judge(*args: Any) -> None:
        raise RuntimeError("the checker's bug")

    monkeypatch.setattr(level_run, "judge", broken_judge)
    with pytest.raises(RuntimeError, match="the checker's bug"):
        Finished().finish(lambda _: None)
    assert not (tmp_path / record.VERDICTS).exists()
    kept_history, kept_read, kept_settings = record.load_judged_inputs(tmp_path)
    assert kept_history == history and kept_settings == settings
    again = judge(kept_history, kept_read, kept_settings).result.to_json()
    assert {f: again[f] for f in COUNT_FIELDS} == {
        f: recorded_result("ack-loss", "at-least-once")[f] for f in COUNT_FIELDS
    }
