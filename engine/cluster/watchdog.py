"""Ends a cluster when the process that owns it dies, even by SIGKILL.

The dashboard (and the test session) own the clusters they start. A SIGKILLed owner runs no
clean-up code, so a small separate process polls for the owner once a second and, when it is
gone, kills every process listed in the cluster's state file and deletes the data. It reads
the state file on every poll, so nodes restarted after the start are covered too.

It guards one cluster, known by its Kafka cluster id: a cluster replaced under the same name
(the dashboard's restart with more nodes) writes a new id, and the old cluster's watchdog
ends then, even when the new state file was written before it polled again.

    python -m engine.cluster.watchdog --owner PID --cluster NAME --cluster-id ID
"""

from __future__ import annotations

import argparse
import contextlib
import time

from engine.base.errors import ClusterError
from engine.cluster.embedded import EmbeddedCluster
from engine.cluster.pids import pid_alive


def watch(owner_pid: int, name: str, cluster_id: str, interval: float = 0.5) -> None:
    while True:
        try:
            if EmbeddedCluster.current_id(name) != cluster_id:
                return  # stopped normally, or replaced by another cluster with its own watchdog
        except ClusterError:
            pass  # an unreadable state file is no reason to stop guarding
        if not pid_alive(owner_pid):
            with contextlib.suppress(ClusterError):
                EmbeddedCluster.attach(name).stop()
            return
        time.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--cluster-id", required=True)
    args = parser.parse_args()
    watch(args.owner, args.cluster, args.cluster_id)


if __name__ == "__main__":
    main()
