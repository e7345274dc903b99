"""Ends a cluster when the process that owns it dies, even by SIGKILL.

The dashboard (and the test session) own the clusters they start. A SIGKILLed owner runs no
clean-up code, so a small separate process polls for the owner once a second and, when it is
gone, kills every process listed in the cluster's state file and deletes the data. It reads
the state file on every poll, so nodes restarted after the start are covered too.

    python -m engine.cluster.watchdog --owner PID --cluster NAME
"""

from __future__ import annotations

import argparse
import contextlib
import time

from engine.cluster.embedded import EmbeddedCluster
from engine.cluster.pids import pid_alive
from engine.errors import ClusterError


def watch(owner_pid: int, name: str, interval: float = 0.5) -> None:
    while True:
        if not EmbeddedCluster.exists(name):
            return  # stopped normally; nothing left to guard
        if not pid_alive(owner_pid):
            with contextlib.suppress(ClusterError):
                EmbeddedCluster.attach(name).stop()
            return
        time.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args()
    watch(args.owner, args.cluster)


if __name__ == "__main__":
    main()
