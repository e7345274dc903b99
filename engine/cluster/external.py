"""The external backend: any Kafka cluster the user already runs, named by bootstrap servers.

The lab does not own these brokers, so it cannot kill or pause them. Network faults still
work: the fault proxy runs in rewrite mode in front of the cluster, rewriting the broker
addresses in Metadata, FindCoordinator and DescribeCluster responses (and leader hints in
Produce and Fetch responses) to its own listeners, so clients under test never leave it.
Checkers read the cluster directly at the bootstrap servers given.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import asdict
from pathlib import Path

from engine.base import paths
from engine.base.errors import ClusterError, ClusterNotRunningError
from engine.cluster.base import Cluster, NodeInfo, NodeState, ProxyInfo, write_json_atomic
from engine.cluster.pids import _signal_group, _wait_gone
from engine.cluster.ports import free_ports
from engine.cluster.proxy_process import rewrite_args, start_proxy_process
from engine.kafka import admin
from engine.proxy.control import ProxyControl

STATE_NAME = "external"


class ExternalCluster(Cluster):
    backend = "external"
    supports_broker_faults = False

    def __init__(self, bootstrap: str, *, owner_pid: int | None = None) -> None:
        if not bootstrap or not all(":" in part for part in bootstrap.split(",")):
            raise ClusterError(
                f"'{bootstrap}' is not a list of bootstrap servers; give host:port[,host:port]."
            )
        self._bootstrap = bootstrap
        self.owner_pid = owner_pid
        self._proxy: ProxyInfo | None = None
        self._proxied: str | None = None

    @property
    def name(self) -> str:
        return STATE_NAME

    @property
    def direct_bootstrap(self) -> str:
        return self._bootstrap

    @property
    def proxied_bootstrap(self) -> str | None:
        return self._proxied

    @property
    def proxy(self) -> ProxyInfo | None:
        return self._proxy

    @property
    def node_ids(self) -> list[int]:
        view = admin.try_describe(self._bootstrap)
        return sorted(view.brokers) if view else []

    @property
    def root(self) -> Path:
        return paths.state_dir() / STATE_NAME

    @property
    def _state_file(self) -> Path:
        return self.root / "cluster.json"

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
        self.root.mkdir(parents=True, exist_ok=True)
        self._proxy = start_proxy_process(
            rewrite_args(self._bootstrap), free_ports(1)[0], self.root, owner_pid=self.owner_pid
        )
        try:
            self._proxied = ProxyControl(
                self._proxy.control_host, self._proxy.control_port
            ).bootstrap_address()
            write_json_atomic(
                self._state_file,
                {
                    "backend": self.backend,
                    "bootstrap": self._bootstrap,
                    "proxied_bootstrap": self._proxied,
                    "proxy": asdict(self._proxy),
                },
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the lab's proxy and forget the cluster; the cluster is not ours to stop."""
        if self._proxy and self._proxy.pid:
            _signal_group(self._proxy.pid, signal.SIGKILL)
            _wait_gone(self._proxy.pid, timeout=10)
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
        cluster = cls(data["bootstrap"])
        cluster._proxied = data.get("proxied_bootstrap")
        cluster._proxy = ProxyInfo(**data["proxy"]) if data.get("proxy") else None
        return cluster
