"""Clean-up after failures: a failed run stops its clients; a crashed cluster's leftovers go."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from engine.cluster.embedded import EmbeddedCluster, pid_alive
from engine.run import record
from engine.run.runner import RunFailed, run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario

pytestmark = pytest.mark.kafka


def test_a_run_that_fails_midway_stops_its_clients_and_is_recorded_as_failed(cluster1):
    scenario = load_scenario(list_scenarios()["zombie"])
    # The zombie sleeps 4 s; a 2 s budget makes the level fail while clients are running.
    scenario = scenario.model_copy(update={"timeout_s": 2.0})
    with pytest.raises(RunFailed, match="did not finish within 2s") as failure:
        run_scenario(scenario, cluster1, levels=["at-least-once"], run_id="failing-run-1")
    assert "Traceback" not in str(failure.value)
    run = record.load_run("failing-run-1")
    assert run.meta["status"] == "failed"
    assert "did not finish within 2s" in run.meta["reason"]
    # Every client process of the run has exited (SIGCONT, SIGTERM, then SIGKILL if needed);
    # their command lines name their spec files inside the run folder.
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert "failing-run-1" not in cmdline or not pid_alive(int(proc.name)), cmdline


def test_leftovers_of_a_crashed_cluster_are_cleaned_at_the_next_start():
    first = EmbeddedCluster("crashed", node_count=1)
    first.start(timeout=120)
    # A crash of everything, with no clean-up at all: processes die, state stays behind.
    pids = [n.pid for n in first.nodes()] + [first.proxy.pid]
    for pid in pids:
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.state_file.exists()
    old_data = first.node(1).data_dir
    assert old_data.exists()

    second = EmbeddedCluster("crashed", node_count=1)
    second.start(timeout=120)
    try:
        assert second.cluster_id != first.cluster_id
        assert all(pid_alive(n.pid) for n in second.nodes())
        assert second.status().reachable
    finally:
        second.stop()
    assert not second.state_file.exists()
