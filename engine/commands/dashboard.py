"""Serving the dashboard from code: what the browser tests and the benchmarks start.

`./lab dashboard` runs Streamlit in the foreground; this starts the same app headless on a
free local port, in its own process group, and returns once it listens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from engine.base import paths
from engine.base.errors import LabError
from engine.cluster.ports import free_ports, is_listening


def streamlit_command(address: str, port: int, *, headless: bool = True) -> list[str]:
    """`streamlit run app.py` bound to `address`:`port`, as ./lab dashboard and the tests run it."""
    return [
        *(sys.executable, "-m", "streamlit", "run", str(paths.REPO_ROOT / "app.py")),
        *("--server.headless", "true" if headless else "false"),
        *("--server.address", address, "--server.port", str(port)),
        *("--browser.gatherUsageStats", "false"),
        *("--client.toolbarMode", "viewer"),
        # Streamlit's first run otherwise asks for an email in the terminal, and with no
        # terminal (stdin not a tty) it exits 255 instead of serving.
        *("--server.showEmailPrompt", "false"),
        # Streamlit runs a full garbage collection after every script run, fragments included;
        # with a room's viewers polling twice a second that took most of the CPU (py-spy: 58%
        # of the server's samples) and held the GIL the presenter's run needs.
        *("--runner.postScriptGC", "false"),
        # A class does not edit the code while it runs: watching the repository for changes
        # took about 91,000 inotify watches (.venv, .cache, runs) and a warning in the log.
        *("--server.fileWatcherType", "none"),
        # In these two modes Streamlit obeys a browser's debug_shutdown_runtime, which stops
        # the server for the whole room; set here, an environment variable cannot turn them on.
        *("--global.developmentMode", "false", "--global.e2eTest", "false"),
        # No page has a file uploader, but Streamlit's upload route takes a file of up to this
        # many megabytes (200 by default) from any session, a viewer's too, into the server's
        # memory; 0 refuses every non-empty file (413).
        *("--server.maxUploadSize", "0"),
        # An error no page catches shows its type only: no stack trace (with the server's
        # paths) on anyone's screen, a viewer's crafted widget value included; the full
        # traceback stays in the dashboard's log.
        *("--client.showErrorDetails", "type"),
    ]


def serve_dashboard(
    env: Mapping[str, str],
    *,
    timeout: float = 60.0,
    address: str = "127.0.0.1",
    log: Path | None = None,
) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` bound to `address` on a free port; (process, URL) once it listens.

    The URL is always loopback's: a dashboard bound to 0.0.0.0 (serving a room) is reached
    through 127.0.0.1 too, and the tests send nothing to any other address. `log`: a file
    that gets the server's output (its log), else it is dropped.
    """
    port = free_ports(1)[0]
    # The child keeps its own copy of the log's descriptor; ours closes at once.
    with log.open("w") if log is not None else contextlib.nullcontext(subprocess.DEVNULL) as out:
        server = subprocess.Popen(
            streamlit_command(address, port),
            cwd=paths.REPO_ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while not is_listening(port) and time.monotonic() < deadline:
        time.sleep(0.3)
    if not is_listening(port):
        server.kill()
        raise LabError(f"The dashboard did not start listening within {timeout:.0f} s.")
    return server, f"http://127.0.0.1:{port}"


def stop_group(server: subprocess.Popen) -> None:
    """Stop a served dashboard and what it started in its process group (its Spark JVM):
    SIGTERM, then SIGKILL if it has not ended within 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, sig)
        try:
            server.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
