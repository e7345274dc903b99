"""Serving the dashboard from code: what the browser tests and the benchmarks start.

`./lab dashboard` runs Streamlit in the foreground; this starts the same app headless on a
free local port, in its own process group, and returns once it listens.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping

from engine import paths
from engine.cluster.ports import free_ports, is_listening
from engine.errors import LabError


def serve_dashboard(
    env: Mapping[str, str], *, timeout: float = 60.0
) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on 127.0.0.1 and a free port; (process, URL) once it listens."""
    port = free_ports(1)[0]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"),
            *("--server.address", "127.0.0.1", "--server.port", str(port)),
            *("--browser.gatherUsageStats", "false"),
        ],
        cwd=paths.REPO_ROOT,
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while not is_listening(port) and time.monotonic() < deadline:
        time.sleep(0.3)
    if not is_listening(port):
        server.kill()
        raise LabError(f"The dashboard did not start listening within {timeout:.0f} s.")
    return server, f"http://127.0.0.1:{port}"
