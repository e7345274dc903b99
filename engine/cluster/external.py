"""The external backend: any Kafka cluster the user already runs, named by bootstrap servers.

The lab does not own these brokers, so it cannot kill or pause them. It reads and writes
through the same client code as the other backends.
"""

from __future__ import annotations

import json
import time

from engine import paths
from engine.cluster.base import Cluster, NodeInfo, NodeState, write_json_atomic
from engine.errors import ClusterError, ClusterNotRunningError
from engine.kafka import admin

STATE_NAME = "external"


class ExternalCluster(Cluster):
    backend = "external"
    supports_broker_faults = False

    def __init__(self, bootstrap: str) -> None:
        if not bootstrap or not all(":" in part for part in bootstrap.split(",")):
            raise ClusterError(
                f"'{bootstrap}' is not a list of bootstrap servers; give host:port[,host:port]."
            )
        self._bootstrap = bootstrap

    @property
    def name(self) -> str:
        return STATE_NAME

    @property
    def direct_bootstrap(self) -> str:
        return self._bootstrap

    @property
    def proxied_bootstrap(self) -> str | None:
        # The brokers advertise their own addresses; see the README for why faults through the
        # proxy are not offered on this backend yet.
        return None

    @property
    def node_ids(self) -> list[int]:
        view = admin.try_describe(self._bootstrap)
        return sorted(view.brokers) if view else []

    @property
    def _state_file(self):
        return paths.state_dir() / STATE_NAME / "cluster.json"

    def start(self, timeout: float = 30.0) -> None:
        """Check that the cluster answers, and remember it for later commands."""
        deadline = time.monotonic() + timeout
        view = None
        while view is None and time.monotonic() < deadline:
            view = admin.try_describe(self._bootstrap, timeout=min(5.0, timeout))
        if view is None:
            raise ClusterError(
                f"No Kafka broker answered at {self._bootstrap} within {timeout:.0f}s. Check the "
                "address and that the cluster is running and reachable from this machine."
            )
        self._state_file.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self._state_file, {"backend": self.backend, "bootstrap": self._bootstrap})

    def stop(self) -> None:
        """Forget the cluster; it is not ours to stop."""
        self._state_file.unlink(missing_ok=True)

    def nodes(self) -> list[NodeInfo]:
        view = admin.try_describe(self._bootstrap)
        if view is None:
            return []
        return [
            NodeInfo(node_id=i, state=NodeState.RUNNING, direct_address=addr)
            for i, addr in sorted(view.brokers.items())
        ]

    @classmethod
    def attach(cls) -> ExternalCluster:
        state_file = paths.state_dir() / STATE_NAME / "cluster.json"
        try:
            data = json.loads(state_file.read_text())
        except FileNotFoundError as exc:
            raise ClusterNotRunningError(
                "No external cluster is registered. Use `python -m engine cluster up "
                "--backend external --bootstrap HOST:PORT`."
            ) from exc
        return cls(data["bootstrap"])
