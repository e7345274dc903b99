"""Kafka clusters the lab can start, find, hurt and stop.

`start_cluster` starts one on a backend and remembers it as the current cluster;
`current_cluster` finds it again from any process (the CLI, the dashboard, a test).
"""

from __future__ import annotations

import json

from engine.base import paths
from engine.base.errors import ClusterError, ClusterNotRunningError
from engine.cluster.base import Cluster, ClusterStatus, NodeInfo, NodeState, write_json_atomic

BACKENDS = ("local", "docker", "external")
_CURRENT = "current.json"

__all__ = [
    "BACKENDS",
    "Cluster",
    "ClusterStatus",
    "NodeInfo",
    "NodeState",
    "current_cluster",
    "default_nodes",
    "forget_current",
    "make_cluster",
    "require_same_version",
    "start_cluster",
]


def default_nodes(backend: str) -> int:
    """How many nodes a backend starts when none are asked for: docker's compose file has 3."""
    return 3 if backend == "docker" else 1


def make_cluster(
    backend: str = "local",
    *,
    nodes: int = 1,
    name: str = "default",
    bootstrap: str | None = None,
    owner_pid: int | None = None,
) -> Cluster:
    """A not-yet-started cluster handle for a backend."""
    if backend == "local":
        from engine.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster(name, node_count=nodes, owner_pid=owner_pid)
    if backend == "docker":
        from engine.cluster.docker_backend import NODE_IDS, DockerCluster

        if nodes != len(NODE_IDS):
            raise ClusterError(
                f"The docker backend runs the {len(NODE_IDS)} nodes of docker-compose.yml, not "
                f"{nodes}; use --nodes {len(NODE_IDS)}, or the local backend for {nodes}."
            )
        return DockerCluster(owner_pid=owner_pid)
    if backend == "external":
        from engine.cluster.external import ExternalCluster

        if not bootstrap:
            raise ClusterError("The external backend needs --bootstrap HOST:PORT[,HOST:PORT].")
        return ExternalCluster(bootstrap, owner_pid=owner_pid)
    raise ClusterError(f"Unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}.")


def start_cluster(cluster: Cluster, timeout: float = 180.0) -> Cluster:
    """Start a cluster and record it as the current one."""
    cluster.start(timeout=timeout)
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        paths.state_dir() / _CURRENT, {"backend": cluster.backend, "name": cluster.name}
    )
    return cluster


def current_cluster() -> Cluster:
    """The cluster started last by `start_cluster`, from whichever process started it."""
    pointer = paths.state_dir() / _CURRENT
    try:
        data = json.loads(pointer.read_text())
    except FileNotFoundError as exc:
        raise ClusterNotRunningError(
            "No cluster is running. Start one with `python -m engine cluster up`."
        ) from exc
    except (json.JSONDecodeError, OSError) as exc:
        pointer.unlink(missing_ok=True)
        raise ClusterNotRunningError(
            "The record of the current cluster was unreadable and has been removed. Start a "
            "cluster with `python -m engine cluster up`."
        ) from exc
    backend = data.get("backend")
    if backend == "local":
        from engine.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster.attach(data.get("name", "default"))
    if backend == "docker":
        from engine.cluster.docker_backend import DockerCluster

        return DockerCluster.attach()
    if backend == "external":
        from engine.cluster.external import ExternalCluster

        return ExternalCluster.attach()
    raise ClusterNotRunningError(
        f"Unknown backend '{backend}' in {pointer}; start a cluster again."
    )


def require_same_version(cluster: Cluster) -> None:
    """Refuse a running cluster of another Kafka version than this process runs.

    The Java roles, Kafka's tools and every run's record take this process's version; on a
    cluster of another they would mix versions and record the wrong one.
    """
    ours = paths.kafka_version()
    if cluster.kafka_version == ours:
        return
    theirs = cluster.kafka_version
    raise ClusterError(
        f"The running {cluster.backend} cluster is Kafka {theirs}, and this command runs "
        f"Kafka {ours}: give --kafka-version {theirs} (or LAB_KAFKA_VERSION={theirs}) to use "
        "it, or stop it first (`./lab engine cluster down`)."
    )


def forget_current() -> None:
    (paths.state_dir() / _CURRENT).unlink(missing_ok=True)
