"""Starts the fault proxy (`python -m engine.proxy`) as a process of its own, for any backend.

The proxy outlives the command that started it (a cluster from `cluster up` runs until
`cluster down`), so it gets its own session, its log is appended to ROOT/proxy.log, and its
events go to ROOT/proxy-events.jsonl.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.base import paths
from engine.base.errors import ClusterError
from engine.cluster.base import ProxyInfo
from engine.cluster.pids import _signal_group, _wait_gone
from engine.cluster.ports import LOOPBACK


def route_args(routes: Sequence[str]) -> list[str]:
    """Route mode: brokers that advertise the proxy; each route NODE:HOST:PORT:UPHOST:UPPORT."""
    args: list[str] = []
    for route in routes:
        args += ["--route", route]
    return args


def rewrite_args(bootstrap: str, listen_host: str = LOOPBACK) -> list[str]:
    """Rewrite mode: brokers that advertise themselves; the proxy rewrites their addresses."""
    return ["--bootstrap-upstream", bootstrap, "--listen-host", listen_host]


def start_proxy_process(
    mode_args: Sequence[str],
    control_port: int,
    root: Path,
    *,
    owner_pid: int | None = None,
    control_host: str = LOOPBACK,
    ready_timeout: float = 20.0,
) -> ProxyInfo:
    """Start the proxy in its own session and wait until its control port answers.

    On failure the process is killed and ClusterError carries the tail of its log.
    """
    from engine.proxy.control import ProxyControl

    root.mkdir(parents=True, exist_ok=True)
    events = root / "proxy-events.jsonl"
    log_path = root / "proxy.log"
    cmd = [sys.executable, "-m", "engine.proxy", *mode_args]
    cmd += ["--control", f"{control_host}:{control_port}", "--events", str(events)]
    if owner_pid:
        cmd += ["--parent-pid", str(owner_pid)]
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)}
    log_start = log_path.stat().st_size if log_path.exists() else 0  # the log is appended to
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: a signal reaches only the proxy
            env=env,
        )
    try:
        ProxyControl(control_host, control_port).wait_ready(timeout=ready_timeout)
    except Exception as exc:
        _signal_group(proc.pid, signal.SIGKILL)
        _wait_gone(proc.pid, timeout=5)
        with log_path.open("rb") as log:
            log.seek(log_start)
            tail = log.read().decode(errors="replace")[-500:].strip()
        raise ClusterError(f"The fault proxy did not start: {exc}. Its log: {tail}") from exc
    return ProxyInfo(control_host, control_port, str(events), pid=proc.pid)
