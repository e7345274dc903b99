"""A run whose owner died is "interrupted": in its run.json, in the list, and in Replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.proc import leash
from engine.run import record

APP = str(paths.REPO_ROOT / "app.py")


def dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{child.pid}:1"


def write_run(root: Path, run_id: str, *, status: str, owner: str | None, started: float) -> Path:
    folder = root / run_id
    (folder / "levels" / "exactly-once").mkdir(parents=True)
    meta = {
        "run_id": run_id,
        "scenario": "consumer-crash",
        "status": status,
        "levels": ["exactly-once"],
        "started_at": started,
    }
    if owner:
        meta["owner"] = owner
    (folder / "run.json").write_text(json.dumps(meta))
    (folder / "scenario.yaml").write_text("name: consumer-crash\n")
    history = folder / "levels" / "exactly-once" / "processor.jsonl"
    history.write_text(
        json.dumps({"t": started + 1.5, "proc": "processor", "ev": "consumed", "id": 7})
        + "\n"
        + json.dumps({"t": started + 1.6, "proc": "processor", "ev": "commit_gap"})
        + "\n"
    )
    return folder


def test_only_runs_whose_owner_is_gone_become_interrupted(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    now = time.time()
    crashed = write_run(tmp_path, "crashed", status="running", owner=dead_owner(), started=now)
    going = write_run(tmp_path, "going", status="running", owner=leash.owner_token(), started=now)
    old = write_run(tmp_path, "old", status="running", owner=None, started=now - 3600)
    os.utime(old / "run.json", (now - 3600, now - 3600))
    for path in old.rglob("*"):
        os.utime(path, (now - 3600, now - 3600))

    # Listed as interrupted at once, before anything is written.
    statuses = {m["run_id"]: m["status"] for m in record.list_runs()}
    assert statuses == {"crashed": "interrupted", "going": "running", "old": "running"}

    assert sorted(record.interrupt_orphaned_runs()) == ["crashed", "old"]
    meta = json.loads((crashed / "run.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["reason"].startswith("This run was interrupted")
    assert meta["recorded"] == {"exactly-once": {"processor": 2}}
    assert json.loads((going / "run.json").read_text())["status"] == "running"
    assert record.interrupt_orphaned_runs() == []  # once only


def test_replay_never_opens_on_an_interrupted_run(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    now = time.time()
    write_run(tmp_path, "crashed", status="running", owner=dead_owner(), started=now)
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/replay.py").run()
    assert not at.exception
    chosen = at.selectbox(key="replay_run")
    assert chosen.value is None
    assert any("interrupted or still going on" in i.value for i in at.info)
    assert any("interrupted" in option for option in chosen.options)
    chosen.set_value(record.list_runs()[0]).run()
    assert not at.exception
    assert any("This run was interrupted" in w.value for w in at.warning)
    assert at.table, "the count of events written before the crash"
    last = at.dataframe[0].value
    # Said in the room's words, not by the history's event names (consumed, commit_gap).
    assert list(last["event"]) == ["read", "outputs and input offsets out of step"]
    assert list(last["s"]) == [1.5, 1.6]
