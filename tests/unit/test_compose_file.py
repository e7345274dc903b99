"""docker-compose.yml and the docker backend, checked without a Docker engine.

The compose file is parsed as YAML and held to what the lab relies on (the pinned Kafka
version, loopback-only ports, the listener layout the fault proxy needs, the internal topics'
replication, no credentials). The backend is driven against a fake Docker client and a fake
`docker` command, so its argument lists, node states and faults are checked here too; the
real thing is tests/integration/test_docker_backend.py.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import yaml

from engine import paths
from engine.cluster import docker_backend as db
from engine.cluster.base import NodeState, ProxyInfo
from engine.errors import (
    ClusterError,
    ClusterNotRunningError,
    DockerUnavailableError,
    MissingToolError,
)

COMPOSE = paths.REPO_ROOT / "docker-compose.yml"
NODES = (1, 2, 3)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def kafka_env(compose: dict[str, Any], node: int) -> dict[str, str]:
    env = compose["services"][f"kafka-{node}"]["environment"]
    assert isinstance(env, dict), "the kafka services' environment is a mapping"
    return {k: str(v) for k, v in env.items()}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """`NAME://HOST:PORT,...` as {NAME: (HOST, PORT)}."""
    out = {}
    for item in value.split(","):
        name, address = item.split("://")
        host, port = address.rsplit(":", 1)
        out[name] = (host, int(port))
    return out


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """A service's published ports as (host_ip, host_port, container_port)."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip", ""), int(port["published"]), int(port["target"])))
            continue
        parts = str(port).split(":")
        if len(parts) == 3:
            out.append((parts[0], int(parts[1]), int(parts[2].split("/")[0])))
        else:  # "HOST:CONTAINER" or "CONTAINER": binds every interface
            out.append(("", int(parts[0]), int(parts[-1].split("/")[0])))
    return out


# ---- the compose file ----------------------------------------------------------------------
def test_project_name_is_the_one_the_backend_looks_for(compose: dict[str, Any]) -> None:
    assert compose["name"] == db.PROJECT == "kafka-failure-lab"
    for service in compose["services"].values():
        assert "container_name" not in service, "the backend finds containers by compose labels"


def test_kafka_image_is_the_version_pinned_in_the_pom(compose: dict[str, Any]) -> None:
    for n in NODES:
        assert compose["services"][f"kafka-{n}"]["image"] == f"apache/kafka:{paths.kafka_version()}"


def test_every_published_port_binds_loopback_only(compose: dict[str, Any]) -> None:
    seen = []
    for name, service in compose["services"].items():
        for host_ip, host_port, _ in published(service):
            assert host_ip == "127.0.0.1", f"{name} publishes {host_port} on {host_ip or 'all'}"
            seen.append(host_port)
    assert len(seen) == len(set(seen)), "two services publish the same host port"


def test_nodes_agree_on_the_quorum(compose: dict[str, Any]) -> None:
    voters = {kafka_env(compose, n)["KAFKA_CONTROLLER_QUORUM_VOTERS"] for n in NODES}
    assert voters == {"1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"}
    ids = {kafka_env(compose, n)["CLUSTER_ID"] for n in NODES}
    assert len(ids) == 1 and len(ids.pop()) == 22  # one cluster, a base64 UUID
    for n in NODES:
        env = kafka_env(compose, n)
        assert env["KAFKA_NODE_ID"] == str(n)
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
        assert listeners(env["KAFKA_LISTENERS"])["CONTROLLER"][1] == 9093


def test_listener_layout_sends_clients_through_the_proxy(compose: dict[str, Any]) -> None:
    for n in NODES:
        env = kafka_env(compose, n)
        bound = listeners(env["KAFKA_LISTENERS"])
        advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        protocol_map = env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
        protocols = dict(p.split(":") for p in protocol_map.split(","))
        assert set(bound) == set(protocols) == {"CLIENT", "DIRECT_HOST", "DOCKER", "CONTROLLER"}
        assert set(advertised) <= set(bound)

        # CLIENT advertises the proxy's port, so metadata never points a client past it.
        assert bound["CLIENT"] == ("0.0.0.0", 9092)
        assert advertised["CLIENT"] == ("127.0.0.1", db.PROXY_PORTS[n]) == ("127.0.0.1", 19090 + n)
        assert bound["DIRECT_HOST"] == ("0.0.0.0", 9096)
        assert advertised["DIRECT_HOST"] == ("127.0.0.1", db.DIRECT_PORTS[n])
        assert bound["DOCKER"] == ("0.0.0.0", 9094)
        assert advertised["DOCKER"] == (f"kafka-{n}", 9094)
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "DOCKER"

        ports = published(compose["services"][f"kafka-{n}"])
        assert ("127.0.0.1", db.CLIENT_PORTS[n], 9092) in ports
        assert ("127.0.0.1", db.DIRECT_PORTS[n], 9096) in ports
        assert len(ports) == 2, "only CLIENT (for the proxy) and DIRECT_HOST are published"


def test_internal_topics_survive_one_node(compose: dict[str, Any]) -> None:
    for n in NODES:
        env = kafka_env(compose, n)
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert env["KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR"] == "2"
        assert env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
        assert env["KAFKA_LOG_CLEANER_BACKOFF_MS"] == "1000"
        assert env["KAFKA_BROKER_SESSION_TIMEOUT_MS"] == "6000"
        assert env["KAFKA_BROKER_HEARTBEAT_INTERVAL_MS"] == "1000"
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_kafka_services_have_healthchecks_and_no_restart_policy(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    for n in NODES:
        # Docker must not bring back a broker the lab killed.
        assert compose["services"][f"kafka-{n}"]["restart"] == "no"


def test_dashboard_wiring_matches_the_backend(compose: dict[str, Any]) -> None:
    dash = compose["services"]["dashboard"]
    env = {k: str(v) for k, v in dash["environment"].items()}
    assert env["LAB_BACKEND"] == "docker"
    layout = db.Layout.from_env(env)
    assert layout.mode == "container"
    assert layout.listen_host == "0.0.0.0"
    for n in NODES:
        kenv = kafka_env(compose, n)
        advertised = listeners(kenv["KAFKA_ADVERTISED_LISTENERS"])
        client_port = listeners(kenv["KAFKA_LISTENERS"])["CLIENT"][1]
        assert layout.upstreams[n] == (f"kafka-{n}", client_port)
        assert layout.direct[n] == "{}:{}".format(*advertised["DOCKER"])
        assert ("127.0.0.1", db.PROXY_PORTS[n], db.PROXY_PORTS[n]) in published(dash)
    assert ("127.0.0.1", 8501, 8501) in published(dash)
    assert "/var/run/docker.sock:/var/run/docker.sock" in dash["volumes"]
    assert any(str(v).startswith("./runs:") for v in dash["volumes"])
    assert dash["command"][:3] == ["streamlit", "run", "app.py"]


def test_no_literal_password(compose: dict[str, Any]) -> None:
    secret_key = re.compile(r"PASSWORD|SECRET|TOKEN", re.IGNORECASE)
    placeholder = re.compile(r"^\$\{[A-Z0-9_]+:-[^}]*\}$")
    found = 0
    for name, service in compose["services"].items():
        env = service.get("environment") or {}
        for key, value in env.items():
            if secret_key.search(key):
                found += 1
                assert placeholder.match(str(value)), f"{name}.{key} is a literal, not ${{VAR:-x}}"
    assert found, "the postgres password should be set from the environment"
    pg = compose["services"]["postgres"]
    assert pg["environment"]["POSTGRES_PASSWORD"] == "${LAB_POSTGRES_PASSWORD:-lab-dev-only}"
    assert pg["image"] == "postgres:16-alpine"
    example = (paths.REPO_ROOT / "lab.env.example").read_text()
    assert re.search(r"^LAB_POSTGRES_PASSWORD=", example, re.MULTILINE)
    assert "--env-file lab.env" in example


# ---- the backend without an engine ---------------------------------------------------------
def test_no_engine_is_one_actionable_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(DockerUnavailableError) as caught:
        db.DockerCluster()
    message = str(caught.value)
    assert "\n" not in message
    assert host in message
    assert "Start Docker Desktop or the docker service" in message
    assert "local backend" in message
    for noise in ("Traceback", "Error while fetching", "FileNotFoundError", "('Connection"):
        assert noise not in message


def test_denied_engine_says_docker_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(**_: Any) -> Any:
        raise docker.errors.DockerException(
            "Error while fetching server API version: ('Connection aborted.', "
            "PermissionError(13, 'Permission denied'))"
        )

    monkeypatch.setattr(db.docker, "from_env", denied)
    with pytest.raises(DockerUnavailableError, match="docker group") as caught:
        db.DockerCluster()
    assert "PermissionError" not in str(caught.value)


def fake_docker(tmp_path: Path, compose_ok: bool = True) -> Path:
    """A `docker` command that records its arguments, with or without the compose plugin."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{tmp_path}/docker-calls"\n'
        f'if [ "$1" = compose ] && [ "{int(compose_ok)}" = 0 ]; then\n'
        '  echo "docker: unknown command: docker compose" >&2; exit 1\n'
        "fi\n"
        "exit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_missing_compose_plugin_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path, compose_ok=False)))
    with pytest.raises(MissingToolError, match="`docker compose` plugin is missing"):
        db.compose_command()


# ---- the backend against a fake engine -----------------------------------------------------
class FakeContainer:
    def __init__(self, service: str, status: str = "running", refuse_paused_kill: bool = False):
        self.name = f"{db.PROJECT}-{service}-1"
        self.labels = {
            "com.docker.compose.project": db.PROJECT,
            "com.docker.compose.service": service,
            "com.docker.compose.oneoff": "False",
        }
        self.status = status
        self.refuse_paused_kill = refuse_paused_kill
        self.calls: list[str] = []

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        self.calls.append("kill")
        if self.status == "paused" and self.refuse_paused_kill:
            raise docker.errors.APIError("Container is paused, unpause it first")
        if self.status not in ("running", "paused"):
            raise docker.errors.APIError("Container is not running")
        self.status = "exited"

    def pause(self) -> None:
        self.calls.append("pause")
        self.status = "paused"

    def unpause(self) -> None:
        self.calls.append("unpause")
        self.status = "running"

    def start(self) -> None:
        self.calls.append("start")
        self.status = "running"

    def logs(self, tail: int = 100) -> bytes:
        return b"[2025] ERROR something broke (kafka.Kafka)\n"


class FakeContainers:
    def __init__(self, items: list[FakeContainer]) -> None:
        self.items = items

    def list(self, all: bool = False, filters: dict[str, Any] | None = None) -> list[Any]:
        wanted = (filters or {}).get("label", "")
        key, _, value = wanted.partition("=")
        return [c for c in self.items if not key or c.labels.get(key) == value]


class FakeClient:
    def __init__(self, items: list[FakeContainer]) -> None:
        self.containers = FakeContainers(items)


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path / "state"))
    for var in (db.ENV_UPSTREAMS, db.ENV_DIRECT, db.ENV_LISTEN_HOST):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "state"


def make_cluster(*statuses: str, **kwargs: Any) -> tuple[db.DockerCluster, list[FakeContainer]]:
    items = [FakeContainer(f"kafka-{n}", s, **kwargs) for n, s in zip(NODES, statuses, strict=True)]
    other = FakeContainer("postgres")
    return db.DockerCluster(client=FakeClient([*items, other])), items  # type: ignore[arg-type]


def test_host_layout(state_dir: Path) -> None:
    cluster, _ = make_cluster("running", "running", "running")
    assert cluster.direct_bootstrap == "127.0.0.1:39091,127.0.0.1:39092,127.0.0.1:39093"
    assert cluster.proxied_bootstrap == "127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093"
    assert cluster.layout.routes() == [
        "1:127.0.0.1:19091:127.0.0.1:29091",
        "2:127.0.0.1:19092:127.0.0.1:29092",
        "3:127.0.0.1:19093:127.0.0.1:29093",
    ]


def test_container_layout_from_env() -> None:
    layout = db.Layout.from_env(
        {
            db.ENV_UPSTREAMS: "1=kafka-1:9092,2=kafka-2:9092,3=kafka-3:9092",
            db.ENV_LISTEN_HOST: "0.0.0.0",
            db.ENV_DIRECT: "kafka-1:9094,kafka-2:9094,kafka-3:9094",
        }
    )
    assert layout.routes()[0] == "1:0.0.0.0:19091:kafka-1:9092"
    assert db.Layout.from_json(layout.to_json()) == layout
    with pytest.raises(ClusterError, match="NODE=HOST:PORT"):
        db.parse_upstreams("kafka-1:9092")
    with pytest.raises(ClusterError, match="exactly once"):
        db.parse_upstreams("1=kafka-1:9092,2=kafka-2:9092")


def test_node_states_follow_container_status(state_dir: Path) -> None:
    cluster, _ = make_cluster("running", "paused", "exited")
    states = {n.node_id: n.state for n in cluster.nodes()}
    assert states == {1: NodeState.RUNNING, 2: NodeState.PAUSED, 3: NodeState.DOWN}
    assert cluster.nodes()[0].container == "kafka-failure-lab-kafka-1-1"
    assert db.node_state(None) == NodeState.DOWN


def test_kill_pause_resume(state_dir: Path) -> None:
    cluster, items = make_cluster("running", "running", "running")
    cluster.pause_node(2)
    assert items[1].status == "paused"
    cluster.resume_node(2)
    assert items[1].status == "running"
    cluster.kill_node(1)
    assert items[0].status == "exited" and items[0].calls == ["kill"]
    with pytest.raises(ClusterError, match="Node 1 is down; restart it first"):
        cluster.pause_node(1)
    cluster.kill_node(1)  # already down: nothing to do
    assert items[0].calls == ["kill"]
    with pytest.raises(ClusterError, match="no node 7"):
        cluster.kill_node(7)


def test_kill_of_a_frozen_node_on_an_engine_that_refuses(state_dir: Path) -> None:
    cluster, items = make_cluster("paused", "running", "running", refuse_paused_kill=True)
    cluster.kill_node(1)
    assert items[0].calls == ["kill", "unpause", "kill"]
    assert items[0].status == "exited"


def test_restart_starts_the_container_and_waits_on_the_node_itself(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, items = make_cluster("exited", "running", "running")
    waited: list[tuple[str, set[int]]] = []
    monkeypatch.setattr(
        db.admin, "wait_for_brokers", lambda b, e, timeout: waited.append((b, set(e)))
    )
    cluster.restart_node(1, timeout=5)
    assert items[0].calls == ["start"]
    assert waited == [("127.0.0.1:39091", {1}), (cluster.proxied_bootstrap, {1})]


def test_start_and_stop_run_compose_with_argument_lists(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", f"{fake_docker(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    cluster, items = make_cluster("running", "paused", "running")
    monkeypatch.setattr(db.admin, "wait_for_brokers", lambda b, e, timeout: None)
    monkeypatch.setattr(db, "free_ports", lambda count: [45678])
    # The fixed proxy ports may be taken on this machine (a real compose stack): not this
    # test's concern, which is the compose command lines.
    monkeypatch.setattr(db, "require_free", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        db,
        "start_proxy_process",
        lambda routes, port, root, owner_pid=None: ProxyInfo("127.0.0.1", port, "ev", pid=None),
    )
    cluster.start(timeout=5)
    assert items[1].status == "running", "start thaws a node an earlier session left paused"
    assert db.DockerCluster.exists()
    again = db.DockerCluster.attach(client=FakeClient(items))  # type: ignore[arg-type]
    assert again.proxy == ProxyInfo("127.0.0.1", 45678, "ev", pid=None)
    assert again.direct_bootstrap == cluster.direct_bootstrap

    cluster.stop()
    assert not db.DockerCluster.exists()
    assert all(c.status == "exited" for c in items)
    calls = (tmp_path / "docker-calls").read_text().splitlines()
    compose = f"compose -p kafka-failure-lab -f {db.COMPOSE_FILE}"
    assert f"{compose} up -d kafka-1 kafka-2 kafka-3" in calls
    assert f"{compose} rm --stop --force --volumes kafka-1 kafka-2 kafka-3" in calls
    with pytest.raises(ClusterNotRunningError):
        db.DockerCluster.attach(client=FakeClient(items))  # type: ignore[arg-type]
