"""What every backend offers: addresses, node states, broker faults and the fault proxy.

A backend is one of `local` (embedded JVM processes, the default), `docker` (the
docker-compose cluster) or `external` (any cluster reachable by bootstrap servers).
Two addresses matter:

- `proxied_bootstrap`: through the fault proxy; every client under test uses it.
- `direct_bootstrap`: straight to the brokers; admin and checkers use it, so that a fault
  never changes what the lab reads back.
"""

from __future__ import annotations

import contextlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.base.errors import UnsupportedFaultError
from engine.kafka import admin, quorum


class NodeState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    DOWN = "down"


@dataclass
class NodeInfo:
    node_id: int
    state: NodeState
    direct_address: str
    proxied_address: str | None = None
    pid: int | None = None
    container: str | None = None
    log_file: str | None = None


@dataclass
class ProxyInfo:
    control_host: str
    control_port: int
    events_path: str
    pid: int | None = None


@dataclass
class ClusterStatus:
    backend: str
    name: str
    direct_bootstrap: str
    proxied_bootstrap: str | None
    nodes: list[NodeInfo]
    reachable: bool
    controller_id: int | None = None
    kafka_version: str | None = None
    proxy: ProxyInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # topic -> partition -> leading node (-1: none); None when no broker answered
    partition_leaders: dict[str, dict[int, int]] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("partition_leaders")  # every partition of every topic: too long to print
        data["nodes"] = [{**asdict(n), "state": str(n.state)} for n in self.nodes]
        return data


class Cluster(ABC):
    """A handle on a running (or startable) Kafka cluster."""

    backend: str = "abstract"
    supports_broker_faults: bool = False

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def direct_bootstrap(self) -> str: ...

    @property
    @abstractmethod
    def proxied_bootstrap(self) -> str | None: ...

    @property
    def proxy(self) -> ProxyInfo | None:
        return None

    @property
    @abstractmethod
    def node_ids(self) -> list[int]: ...

    @abstractmethod
    def start(self, timeout: float = 120.0) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def nodes(self) -> list[NodeInfo]: ...

    @property
    def kafka_version(self) -> str:
        """The Kafka version the cluster runs: the lab's (a backend that remembers the
        version it started with says that one)."""
        from engine.base import paths

        return paths.kafka_version()

    def proxy_control(self):  # -> ProxyControl | None; imported lazily to keep import time low
        info = self.proxy
        if info is None:
            return None
        from engine.proxy.control import ProxyControl

        return ProxyControl(info.control_host, info.control_port)

    def status(self, timeout: float = 3.0) -> ClusterStatus:
        view = admin.try_describe(self.direct_bootstrap, timeout=timeout)
        nodes = self.nodes()
        controller = None
        if view is not None:  # for half a second: the sidebar asks every two
            with contextlib.suppress(quorum.QuorumUnknown):
                controller = quorum.active_controller(self.running_bootstrap(nodes), 0.5)
        return ClusterStatus(
            backend=self.backend,
            name=self.name,
            direct_bootstrap=self.direct_bootstrap,
            proxied_bootstrap=self.proxied_bootstrap,
            nodes=nodes,
            reachable=view is not None,
            controller_id=controller,
            kafka_version=self.kafka_version,
            proxy=self.proxy,
            partition_leaders=view.leaders if view else None,
        )

    def running_bootstrap(self, nodes: list[NodeInfo] | None = None) -> str:
        """The direct addresses of the nodes running now, or every node's if none is known
        to run. A frozen broker still accepts connections (the kernel, or Docker's port
        proxy, does it for it) and never answers: asked first, it would use up a timeout."""
        nodes = self.nodes() if nodes is None else nodes
        running = [n.direct_address for n in nodes if n.state == NodeState.RUNNING]
        return ",".join(running) or self.direct_bootstrap

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The partition's leader, asked of the nodes running now."""
        return admin.partition_leader(self.running_bootstrap(), topic, partition)

    def partition_replicas(self, topic: str, partition: int = 0) -> list[int]:
        """The node ids holding a replica of the partition, preferred leader first; none
        while the broker answering does not know the topic yet."""
        return admin.partition_replicas(self.direct_bootstrap, topic, partition)

    def active_controller(self, timeout: float = 10.0) -> int:
        """The active controller (the metadata quorum's leader), asked of the nodes running
        now; QuorumUnknown if none tells within `timeout` (for about 30 s after the active
        controller froze, brokers forward the question to it)."""
        return quorum.active_controller(self.running_bootstrap(), timeout)

    # Broker faults: only backends that own the broker processes can do these.
    def kill_node(self, node_id: int) -> None:
        raise self._no_broker_faults("kill")

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Shut a node down cleanly (SIGTERM): it hands its partitions' leadership over first."""
        raise self._no_broker_faults("stop")

    def pause_node(self, node_id: int) -> None:
        raise self._no_broker_faults("pause")

    def resume_node(self, node_id: int) -> None:
        raise self._no_broker_faults("resume")

    def restart_node(self, node_id: int, timeout: float = 60.0) -> None:
        raise self._no_broker_faults("restart")

    def wipe_partition(self, node_id: int, topic: str, partition: int) -> None:
        """Delete a stopped node's copy of one partition: its disk lost, the node kept."""
        raise self._no_broker_faults("wipe a partition's data on")

    def node_log_since(self, node_id: int, since: float) -> list[str]:
        """The node's own log lines written at or after `since` (epoch seconds); [] if the
        backend cannot read them."""
        return []

    def _no_broker_faults(self, what: str) -> UnsupportedFaultError:
        return UnsupportedFaultError(
            f"Cannot {what} a node on the {self.backend} backend: the lab does not own its "
            "brokers. Network faults through the proxy still work; use the local or docker "
            "backend for broker faults."
        )


def load_coordinators_at_start(
    bootstrap: str, progress: Callable[[str], None], timeout: float = 30.0
) -> bool:
    """The last step of a backend's start: Kafka's coordinators made now, not in a run.

    Kafka creates __consumer_offsets and __transaction_state on the first FindCoordinator
    request (KafkaApis.getCoordinator); left to the first run, the class waits for them. A
    cluster whose coordinators do not answer in time still serves: the step says so and
    the first run waits for them as it would have.
    """
    progress("Loading the group and transaction coordinators")
    if admin.load_coordinators(bootstrap, timeout):
        return True
    progress(
        f"The group and transaction coordinators did not answer within {timeout:.0f} s; "
        "the first run will wait for them"
    )
    return False


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so that a reader never sees half a file (and a full disk loses nothing)."""
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)
