"""`./lab dashboard` on a fresh account with no terminal serves at once: no email prompt."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

from engine.base import paths
from engine.cluster.ports import free_ports, is_listening
from engine.commands.dashboard import stop_group


def test_lab_dashboard_serves_with_a_fresh_home_and_no_terminal(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    port = free_ports(1)[0]
    env = {
        **os.environ,
        "HOME": str(home),  # no ~/.streamlit/credentials.toml: Streamlit's first run
        "LAB_PORT": str(port),
        "LAB_STATE_DIR": str(tmp_path / "state"),
        "LAB_RUNS_DIR": str(tmp_path / "runs"),
    }
    env.pop("DISPLAY", None)
    output = tmp_path / "output.txt"
    with output.open("wb") as out:
        dashboard = subprocess.Popen(
            [str(paths.REPO_ROOT / "lab"), "dashboard"],
            cwd=paths.REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,  # not a terminal
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while not is_listening(port) and dashboard.poll() is None:
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.5)
        assert dashboard.poll() is None, f"exited {dashboard.returncode}: {output.read_text()}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10) as r:
            assert r.status == 200 and r.read() == b"ok"
        text = output.read_text()
        assert "Email" not in text and "Welcome to Streamlit" not in text, text
    finally:
        stop_group(dashboard)
