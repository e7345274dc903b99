"""A run's owner killed by SIGKILL mid-run leaves no process, and its run says "interrupted".

The owner is a real process started from the command line, as the dashboard is: `engine run`
for the producer and processor pipelines, and a free play session for the third. One client
is stopped (SIGSTOP) before the kill, as a pause fault leaves it: a stopped process runs no
code of its own, so only the kernel's SIGKILL or someone else's can end it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.proc.leash import pid_alive
from engine.run import record

pytestmark = pytest.mark.kafka

APP = str(paths.REPO_ROOT / "app.py")
GONE_WITHIN_S = 20.0

FREE_PLAY_OWNER = """
import sys, time
from engine.cluster import current_cluster
from engine.run.freeplay import FreePlay, FreePlaySettings
session = FreePlay(current_cluster(), FreePlaySettings(levels=("at-least-once", "exactly-once"),
                   rate=20.0, time_limit_s=60.0)).start()
print(session.run_id, flush=True)
time.sleep(600)
"""


def processes_of(folder: Path) -> list[int]:
    """Live processes whose command line names the run's folder (each client's spec does)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline and pid_alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def describe(pid: int) -> str:
    """A leftover's state, parent and command line, for the failure message."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    return f"state {stat[0]}, parent {stat[1]}: {cmdline[:300]}"


def longer(scenario: str, tmp_path: Path, **workload: object) -> Path:
    """The scenario file with a longer workload, so that the kill lands mid-run."""
    data = yaml.safe_load((paths.REPO_ROOT / "scenarios" / f"{scenario}.yaml").read_text())
    data["workload"].update(workload)
    data.pop("expect", None)
    data.pop("teaches", None)
    path = tmp_path / f"{scenario}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def start_owner(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        cwd=paths.REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def newest_run_since(began: float) -> str | None:
    runs = [m for m in record.list_runs() if (m.get("started_at") or 0) >= began]
    return runs[0]["run_id"] if runs else None


def kill_mid_run(owner: subprocess.Popen, run_id_of, clients: int) -> tuple[str, float]:
    """Wait for `clients` client processes of the run, stop one, SIGKILL the owner.

    Returns the run id and the seconds until no process of the run was left.
    """
    deadline = time.monotonic() + 90
    run_id, pids = None, []
    while time.monotonic() < deadline:
        assert owner.poll() is None, "the run ended before it could be killed"
        run_id = run_id or run_id_of()
        if run_id:
            pids = processes_of(record.run_folder(run_id))
            if len(pids) >= clients:
                break
        time.sleep(0.05)
    assert run_id and len(pids) >= clients, f"no {clients} clients of the run appeared"
    os.kill(pids[0], signal.SIGSTOP)  # as a pause fault leaves a client
    killed_at = time.monotonic()
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(10)
    folder = record.run_folder(run_id)
    while processes_of(folder) and time.monotonic() - killed_at < GONE_WITHIN_S + 5:
        time.sleep(0.1)
    took = time.monotonic() - killed_at
    left = processes_of(folder)
    described = {pid: describe(pid) for pid in left}
    for pid in left:  # never leave them to the next test, even when this one fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running {GONE_WITHIN_S:.0f} s after the owner's SIGKILL: {described}"
    assert took < GONE_WITHIN_S
    print(f"no process of {run_id} left {took:.2f} s after its owner's SIGKILL")
    return run_id, took


def assert_shown_as_interrupted(run_id: str, monkeypatch) -> None:
    """After a restart: run.json says interrupted, Replay lists it so and never opens on it."""
    listed = subprocess.run(
        [sys.executable, "-m", "engine", "runs", "--json"],
        cwd=paths.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    statuses = {m["run_id"]: m["status"] for m in json.loads(listed.stdout)}
    assert statuses[run_id] == "interrupted"
    meta = json.loads((record.run_folder(run_id) / "run.json").read_text())
    assert meta["status"] == "interrupted"
    assert "interrupted" in meta["reason"]
    assert meta["recorded"], "what the clients wrote before the crash is counted"
    assert not (record.run_folder(run_id) / "result.json").exists()

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/replay.py").run()
    assert not at.exception
    chosen = at.selectbox(key="replay_run")
    assert chosen.value is None or chosen.value["run_id"] != run_id
    labels = list(chosen.options)
    assert any("interrupted" in label for label in labels), labels
    opened = next(m for m in record.list_runs() if m["run_id"] == run_id)
    chosen.set_value(opened).run()
    assert not at.exception
    assert any("interrupted" in w.value for w in at.warning)
    assert not any("recorded no results" in i.value for i in at.info)


@pytest.fixture
def current(cluster1):
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "local", "name": cluster1.name}))
    yield cluster1
    pointer.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("scenario", "workload", "clients"),
    [
        ("producer-crash", {"messages": 400, "rate": 20.0}, 2),  # producer and sink
        ("consumer-crash", {"messages": 300}, 2),  # processor and sink (and the input's producer)
    ],
)
def test_a_killed_run_leaves_no_client_and_shows_as_interrupted(
    current, tmp_path, monkeypatch, scenario, workload, clients
):
    path = longer(scenario, tmp_path, **workload)
    began = time.time()
    owner = start_owner(
        [sys.executable, "-m", "engine", "run", str(path), "--guarantee", "exactly-once"]
    )
    try:
        run_id, _ = kill_mid_run(owner, lambda: newest_run_since(began), clients)
    finally:
        owner.kill()
    assert_shown_as_interrupted(run_id, monkeypatch)


def test_a_killed_free_play_leaves_no_client_and_shows_as_interrupted(current, monkeypatch):
    owner = start_owner([sys.executable, "-c", FREE_PLAY_OWNER])
    try:
        assert owner.stdout is not None
        run_id = owner.stdout.readline().strip()
        # Two levels of a processor pipeline: a producer, a processor and a sink each.
        run_id, _ = kill_mid_run(owner, lambda: run_id, 5)
    finally:
        owner.kill()
    assert_shown_as_interrupted(run_id, monkeypatch)
