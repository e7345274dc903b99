"""The embedded cluster's watchdog guards one cluster, known by its Kafka cluster id.

A real watchdog process, over a state file written the way EmbeddedCluster writes it (no
JVM: the watchdog reads only that file and the owner's pid). The dashboard's restart with
more nodes stops the old cluster and writes the new one's state under the same name at
once, faster than the watchdog polls: before the fix, the old watchdog saw a state file
still there and lived until the dashboard shut down.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.base import paths
from engine.cluster.base import write_json_atomic

NAME = "guarded"


def write_state(state_dir: Path, cluster_id: str) -> Path:
    """The fields EmbeddedCluster._save writes; no node, no proxy (nothing to kill)."""
    folder = state_dir / NAME
    folder.mkdir(parents=True, exist_ok=True)
    state_file = folder / "cluster.json"
    write_json_atomic(
        state_file,
        {
            "backend": "local",
            "name": NAME,
            "cluster_id": cluster_id,
            "node_count": 1,
            "heap": "512m",
            "owner_pid": None,
            "nodes": [],
            "proxy": None,
        },
    )
    return state_file


def wait_until(holds, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if holds():
            return True
        time.sleep(0.1)
    return holds()


@pytest.fixture
def owner() -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def start_watchdog(state_dir: Path, owner_pid: int, cluster_id: str) -> subprocess.Popen:
    env = {**os.environ, "LAB_STATE_DIR": str(state_dir), "PYTHONPATH": str(paths.REPO_ROOT)}
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "engine.cluster.watchdog", "--owner", str(owner_pid)),
            *("--cluster", NAME, "--cluster-id", cluster_id),
        ],
        env=env,
    )


def test_a_replaced_clusters_watchdog_ends(tmp_path, owner):
    write_state(tmp_path, "old-cluster-id")
    watchdog = start_watchdog(tmp_path, owner.pid, "old-cluster-id")
    try:
        # Replaced under the same name: the state file never disappears.
        write_state(tmp_path, "new-cluster-id")
        assert wait_until(lambda: watchdog.poll() is not None), "the old watchdog still runs"
        assert (tmp_path / NAME / "cluster.json").exists(), "and it left the new cluster alone"
    finally:
        watchdog.kill()
        watchdog.wait()


def test_the_same_cluster_saved_again_stays_guarded(tmp_path, owner):
    """The contrast: a node restarted saves the state again with the same id; the watchdog
    keeps guarding, and ends that cluster when its owner dies."""
    state_file = write_state(tmp_path, "the-cluster-id")
    watchdog = start_watchdog(tmp_path, owner.pid, "the-cluster-id")
    try:
        write_state(tmp_path, "the-cluster-id")
        owner.kill()
        owner.wait()
        assert wait_until(lambda: not state_file.exists()), "the owner's death ends the cluster"
        assert wait_until(lambda: watchdog.poll() is not None)
    finally:
        watchdog.kill()
        watchdog.wait()


def test_a_stopped_clusters_watchdog_ends(tmp_path, owner):
    state_file = write_state(tmp_path, "the-cluster-id")
    watchdog = start_watchdog(tmp_path, owner.pid, "the-cluster-id")
    try:
        state_file.unlink()
        assert wait_until(lambda: watchdog.poll() is not None)
    finally:
        watchdog.kill()
        watchdog.wait()
