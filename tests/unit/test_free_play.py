"""Free play's settings, and the nemesis waking what it froze (a real process, no Kafka)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from engine.base.errors import LabError
from engine.cluster.external import ExternalCluster
from engine.model.history import HistoryWriter, read_jsonl
from engine.proc.processes import RoleProcess
from engine.run.freeplay import (
    RATE_BOUNDS,
    TIME_LIMIT_BOUNDS,
    FreePlayError,
    FreePlaySettings,
)
from engine.run.nemesis import Nemesis, NemesisContext
from engine.scenarios.scenario import Fault
from engine.teach.live import nemesis_text


def test_the_recorded_scenario_is_the_processor_pipeline_with_no_scheduled_fault():
    settings = FreePlaySettings(rate=12, time_limit_s=30)
    scenario = settings.scenario()
    assert scenario.pipeline == "processor"
    assert scenario.faults == []
    assert scenario.levels == list(settings.levels)
    assert scenario.workload.rate == 12
    # More ids than the stream can send within its limit: the limit, not the ids, ends it.
    assert scenario.workload.messages > 12 * 30
    assert scenario.timeout_s > settings.time_limit_s
    assert (scenario.nodes, scenario.replication) == (1, 1)


def test_broker_faults_replicate_every_topic_on_three_nodes():
    scenario = FreePlaySettings(broker_faults=True).scenario()
    assert (scenario.nodes, scenario.replication) == (3, 3)
    assert scenario.topic_config == {"min.insync.replicas": "2"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"levels": ()}, "at least one level"),
        ({"levels": ("at-most-twice",)}, "Unknown level"),
        ({"rate": RATE_BOUNDS[1] + 1}, "The rate must be between"),
        ({"time_limit_s": TIME_LIMIT_BOUNDS[0] - 1}, "The time limit must be between"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(change, says):
    problems = FreePlaySettings(**change).problems(None)
    assert any(says in p for p in problems), problems
    # No cluster yet is said too, in the same list.
    assert any("not ready" in p for p in problems)


def test_a_session_without_a_cluster_is_refused_in_one_sentence():
    from engine.run.freeplay import FreePlay

    with pytest.raises(FreePlayError, match="not ready"):
        FreePlay(None, FreePlaySettings())  # type: ignore[arg-type]


def frozen(pid: int) -> bool:
    """The process state from /proc: T is stopped by a signal."""
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "T"


def wait_state(pid: int, stopped: bool) -> None:
    deadline = time.monotonic() + 10
    while frozen(pid) != stopped:
        assert time.monotonic() < deadline, f"process {pid} never {'stopped' if stopped else 'ran'}"
        time.sleep(0.02)


@pytest.fixture
def nemesis(tmp_path):
    """A nemesis over one real process (sleep) named processor."""
    process = RoleProcess(name="processor", role="-", history=tmp_path / "p.jsonl", spec={})
    process.popen = subprocess.Popen(["sleep", "60"])
    history = HistoryWriter(tmp_path / "nemesis.jsonl", "nemesis")
    ctx = NemesisContext(
        # Never started: crashes, pauses and wakes touch no broker and no proxy.
        cluster=ExternalCluster("127.0.0.1:1"),
        topic="-",
        client_ids={},
        processes=lambda base: process if process.alive() and not process.paused else None,
        replace=lambda base, fault: None,
        history=history,
    )
    yield Nemesis([], ctx), process, tmp_path / "nemesis.jsonl"
    process.popen.kill()
    process.popen.wait()
    history.close()


def kinds(path: Path) -> list[str]:
    return [e["kind"] for e in read_jsonl(path)]


def test_a_resume_fault_wakes_the_process_the_nemesis_froze(nemesis):
    nem, process, path = nemesis
    nem.fire(Fault(kind="pause", target="processor"))
    wait_state(process.pid, stopped=True)
    nem.fire(Fault(kind="resume", target="processor"))
    wait_state(process.pid, stopped=False)
    nem.fire(Fault(kind="resume", target="processor"))  # nothing frozen any more: said so
    assert kinds(path) == ["pause", "resume", "resume-skipped"]
    woke = read_jsonl(path)[1]
    assert (woke["signal"], woke["pid"]) == ("SIGCONT", process.pid)
    assert nemesis_text(woke) == "processor woke (SIGCONT)"


def test_heal_wakes_a_process_frozen_with_no_timed_wake(nemesis):
    nem, process, path = nemesis
    nem.fire(Fault(kind="pause", target="processor"))
    wait_state(process.pid, stopped=True)
    nem.heal()
    wait_state(process.pid, stopped=False)
    assert kinds(path) == ["pause", "resume"]


def test_a_timed_wake_after_a_manual_one_does_not_signal_twice(nemesis):
    nem, process, path = nemesis
    nem.fire(Fault(kind="pause", target="processor", duration_s=0.2))
    nem.fire(Fault(kind="resume", target="processor"))
    time.sleep(0.3)  # the timed wake is due; tick() must find nothing left to wake
    nem.tick()
    assert kinds(path) == ["pause", "resume"]
    assert not frozen(process.pid)


def test_a_broker_killed_outside_a_level_is_named_as_such():
    text = nemesis_text({"ev": "nemesis", "kind": "kill-node", "node": 2, "leader": 3})
    assert text == "broker node 2 killed (this level's leader was node 3)"


def test_one_click_delivered_twice_strikes_once(monkeypatch):
    """The same button twice within SAME_CLICK_S is one click; another button still strikes."""
    from engine.run import freeplay

    session = freeplay.FreePlay(ExternalCluster("127.0.0.1:1"), FreePlaySettings())
    session.phase = "running"  # never started: only the queue of strikes is looked at
    clock = [100.0]
    monkeypatch.setattr(freeplay.time, "monotonic", lambda: clock[0])
    assert session.strike("kill-processor") is True
    clock[0] += 0.05
    assert session.strike("kill-processor") is False
    assert session.strike("freeze-processor") is True
    clock[0] += freeplay.SAME_CLICK_S
    assert session.strike("freeze-processor") is True
    queued = [session._strikes.get_nowait() for _ in range(session._strikes.qsize())]
    assert queued == ["kill-processor", "freeze-processor", "freeze-processor"]


def test_a_fatal_error_handed_to_error_cb_as_fatal_code_is_kept():
    """confluent_kafka passes error_cb a consumer's fatal error as _FATAL, fatal() False."""
    from confluent_kafka import KafkaError

    from engine.roles.common import FatalErrors

    fatal = FatalErrors()
    fatal(KafkaError(KafkaError._TRANSPORT, "broker down"))  # retried by librdkafka: not kept
    text = "Fatal error: Broker: Static consumer fenced by other consumer with same "
    text += "group.instance.id"
    fatal(KafkaError(KafkaError._FATAL, text))
    assert [e.code() for e in fatal.errors] == [KafkaError._FATAL]
    kind, error = fatal.classify(fatal.errors[-1])
    assert kind == "fenced" and "group.instance.id" in error.str()


def test_a_processor_that_exited_says_why_from_its_history(tmp_path):
    from engine.run.freeplay import exit_reason

    history = HistoryWriter(str(tmp_path / "processor.jsonl"), "processor")
    history.write("consumed", id=1)
    history.write("fenced", error="_FATAL", reason="Static consumer fenced", by="group coordinator")
    history.close()
    assert exit_reason(tmp_path / "processor.jsonl") == (
        "fenced by the group coordinator: Static consumer fenced"
    )
    empty = HistoryWriter(str(tmp_path / "other.jsonl"), "processor")
    empty.close()
    assert exit_reason(tmp_path / "other.jsonl") == "no reason in its history"


def test_a_broker_fault_waits_for_the_cluster_to_name_a_leader(tmp_path, monkeypatch):
    """Right after a cluster restart a broker may not know the new topic's leader yet (-1):
    seen in CI, where a pause aimed at "a follower" then froze the leader."""
    from engine.faults import nodes

    answers = iter([-1, -1, 3])
    cluster = ExternalCluster("127.0.0.1:1")
    monkeypatch.setattr(cluster, "leader_of", lambda topic, partition=0: next(answers))
    history = HistoryWriter(tmp_path / "nemesis.jsonl", "nemesis")
    ctx = NemesisContext(
        cluster=cluster,
        topic="t",
        client_ids={},
        processes=lambda base: None,
        replace=lambda base, fault: None,
        history=history,
    )
    assert nodes.leader(Nemesis([], ctx)) == 3

    monkeypatch.setattr(cluster, "leader_of", lambda topic, partition=0: -1)
    monkeypatch.setattr(nodes, "LEADER_WAIT_S", 0.2)
    with pytest.raises(LabError, match="No broker named a leader for t"):
        nodes.leader(Nemesis([], ctx))
    history.close()
