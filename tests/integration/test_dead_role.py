"""A role killed from outside the lab ends its level at once, named, and the other levels'
results are kept (issue 60: the run used to wait its whole timeout_s, then drop every level)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from engine.base.errors import LabError
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario

pytestmark = pytest.mark.kafka


def producer_pids(level: str) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", f"levels/{level}/producer.spec.json"], capture_output=True, text=True
    ).stdout
    return [int(pid) for pid in out.split()]


def test_a_producer_killed_by_a_person_ends_its_level_at_once(cluster1, monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    scenario = load_scenario(list_scenarios()["ack-loss"])
    scenario = scenario.model_copy(update={"timeout_s": 120})
    # Slow enough that the producer is still sending when it is killed.
    workload = scenario.workload.model_copy(update={"messages": 200, "rate": 20})
    scenario = scenario.model_copy(update={"workload": workload})
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["output"] = run_scenario(scenario, cluster1)
        except LabError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not (pids := producer_pids("at-least-once")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids, "the at-least-once producer never started"
    time.sleep(2)  # it is sending
    killed_at = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    error = str(outcome.get("error"))
    assert "at-least-once: producer was ended by SIGKILL, not from the lab" in error, outcome
    # Noticed at once, not at the 120 s timeout: the other levels finish their 10 s of work.
    assert time.monotonic() - killed_at < 60
    runs = record.list_runs()
    run = record.load_run(runs[0]["run_id"])
    assert run.meta["status"] == "failed"
    kept = set(run.results)
    assert "at-least-once" not in kept and {"at-most-once", "exactly-once"} <= kept
