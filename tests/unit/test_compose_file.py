"""docker-compose.yml and the docker backend, checked without a Docker engine.

The compose file is parsed as YAML and held to what the lab relies on (the pinned Kafka
version, loopback-only ports, the listener layout the fault proxy needs, the internal topics'
replication, no credentials). The backend is driven against a fake Docker client and a fake
`docker` command, so its argument lists, node states and faults are checked here too; the
real thing is tests/integration/test_docker_backend.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import yaml

from engine.base import paths
from engine.base.errors import (
    ClusterError,
    ClusterNotRunningError,
    DockerUnavailableError,
    MissingImageError,
    MissingToolError,
)
from engine.cluster import docker_backend as db
from engine.cluster.base import NodeState, ProxyInfo

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
    # The official image by default; LAB_KAFKA_IMAGE may name a stand-in (./lab images).
    official = f"apache/kafka:{paths.pom_kafka_version()}"
    for n in NODES:
        assert compose["services"][f"kafka-{n}"]["image"] == f"${{LAB_KAFKA_IMAGE:-{official}}}"
    assert db.default_image(COMPOSE.read_text(), db.ENV_KAFKA_IMAGE) == official
    # The dashboard's engine runs this file too: given neither variable, it resolves the
    # brokers' default image from kafka/pom.xml's version; given them, the same ones.
    env = compose["services"]["dashboard"]["environment"]
    assert env["LAB_KAFKA_IMAGE"] == "${LAB_KAFKA_IMAGE:-}"
    assert env["LAB_KAFKA_VERSION"] == "${LAB_KAFKA_VERSION:-}"
    assert env["LAB_POSTGRES_IMAGE"] == compose["services"]["postgres"]["image"]


def test_the_dashboard_image_takes_its_bases_as_build_arguments(compose: dict[str, Any]) -> None:
    build = compose["services"]["dashboard"]["build"]
    assert build["args"] == {
        "PYTHON_IMAGE": "${LAB_PYTHON_IMAGE:-python:3.11-slim}",
        "DOCKER_CLI_IMAGE": "${LAB_DOCKER_CLI_IMAGE:-docker:28-cli}",
    }
    dockerfile = (paths.REPO_ROOT / "Dockerfile").read_text()
    # The same defaults in the Dockerfile, declared before the FROM lines that use them.
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in dockerfile
    assert "ARG DOCKER_CLI_IMAGE=docker:28-cli" in dockerfile
    froms = re.findall(r"(?m)^FROM (\S+)", dockerfile)
    assert froms == ["${DOCKER_CLI_IMAGE}", "${PYTHON_IMAGE}"]


def test_every_published_port_binds_loopback_only(compose: dict[str, Any]) -> None:
    seen = []
    for name, service in compose["services"].items():
        for host_ip, host_port, _ in published(service):
            assert host_ip == "127.0.0.1", f"{name} publishes {host_port} on {host_ip or 'all'}"
            seen.append(host_port)
    assert len(seen) == len(set(seen)), "two services publish the same host port"


def test_no_published_port_is_in_the_ephemeral_range(compose: dict[str, Any]) -> None:
    """Linux lends ports from 32768 up (ip_local_port_range) to outgoing connections: a
    fixed host port there is taken now and then by any client on the machine, and the
    container then fails to start ("bind: address already in use"; seen in CI on 39092)."""
    low = 32768
    range_file = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if range_file.exists():
        low = min(low, int(range_file.read_text().split()[0]))
    for name, service in compose["services"].items():
        for _, host_port, _ in published(service):
            assert host_port < low, f"{name} publishes {host_port}, a port Linux lends out"


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
    # It listens on 0.0.0.0 in its container, but is published on loopback only: the room
    # logic must see where it is reached, or it would refuse to serve without a key.
    assert env["LAB_PUBLISHED_ADDRESS"] == "127.0.0.1"
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
    assert pg["image"] == "${LAB_POSTGRES_IMAGE:-postgres:16-alpine}"
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
        # The image compose would interpolate into the brokers' services.
        f'echo "${{LAB_KAFKA_IMAGE:-}}" >> "{tmp_path}/docker-images"\n'
        f'if [ "$1" = compose ] && [ "{int(compose_ok)}" = 0 ]; then\n'
        '  echo "docker: unknown command: docker compose" >&2; exit 1\n'
        "fi\n"
        'if [ "$2" = version ]; then echo 2.40.3; fi\n'
        "exit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def fake_standalone_compose(tmp_path: Path, version: str) -> Path:
    """A standalone `docker-compose` of a version; it records its arguments and its stdin."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "docker-compose"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = version ]; then echo ' + version + "; exit 0; fi\n"
        f'echo "$@" >> "{tmp_path}/compose-calls"\n'
        f'cat > "{tmp_path}/compose-stdin"\n'
        "exit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_compose_plugin_is_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_standalone_compose(tmp_path, "1.29.2")
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path)))
    tool = db.compose_command()
    assert tool.argv == (str(tmp_path / "bin" / "docker"), "compose")
    assert not tool.legacy and tool.shown == "docker compose"


@pytest.mark.parametrize(("version", "legacy"), [("1.29.2", True), ("v2.40.3", False)])
def test_a_standalone_docker_compose_is_found_without_the_plugin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str, legacy: bool
) -> None:
    fake_docker(tmp_path, compose_ok=False)
    monkeypatch.setenv("PATH", str(fake_standalone_compose(tmp_path, version)))
    tool = db.compose_command()
    assert tool.argv == (str(tmp_path / "bin" / "docker-compose"),)
    assert tool.legacy is legacy and tool.version == version.lstrip("v")


def test_missing_compose_names_both_kinds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path, compose_ok=False)))
    with pytest.raises(MissingToolError) as caught:
        db.compose_command()
    message = str(caught.value)
    assert "\n" not in message
    assert "the `docker compose` plugin is missing (docker: unknown command" in message
    assert "no standalone `docker-compose` on PATH" in message
    assert "apt-get install docker-compose" in message
    # Neither docker nor docker-compose: both named as absent.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MissingToolError, match="no `docker` command on PATH; no standalone"):
        db.compose_command()


def test_compose_v1_gets_the_file_without_its_name_on_stdin(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_docker(tmp_path, compose_ok=False)
    monkeypatch.setenv("PATH", f"{fake_standalone_compose(tmp_path, '1.29.2')}{os.pathsep}/bin")
    cluster, _ = make_cluster("exited", "exited", "exited")
    cluster._compose(["up", "-d", "kafka-1"], timeout=30)
    call = (tmp_path / "compose-calls").read_text().split()
    assert call == [
        "-p", db.PROJECT, "-f", "-", "--project-directory", str(COMPOSE.parent),
        "up", "-d", "kafka-1",
    ]  # fmt: skip
    given = (tmp_path / "compose-stdin").read_text()
    assert "name: kafka-failure-lab" not in given  # Compose v1 refuses the key
    assert given == COMPOSE.read_text().replace("name: kafka-failure-lab\n", "")


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
        self.freeze_failures = 0  # how many pauses fail as runc's freezer does under load
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
        if self.freeze_failures:
            self.freeze_failures -= 1
            raise docker.errors.APIError(
                "500 Server Error",
                explanation="OCI runtime pause failed: unable to freeze: unknown",
            )
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


class FakeImages:
    """An engine's images: `present` ones are found; pulling anything fails (no registry)."""

    def __init__(self, present: set[str]) -> None:
        self.present = present
        self.pulled: list[str] = []

    def get(self, name: str) -> object:
        if name not in self.present:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return object()

    def pull(self, name: str, **_: Any) -> object:
        self.pulled.append(name)
        raise docker.errors.APIError(
            "500 Server Error: Internal Server Error",
            explanation='Get "https://registry-1.docker.io/v2/": dial tcp: lookup '
            "registry-1.docker.io: no such host",
        )


class FakeClient:
    def __init__(self, items: list[FakeContainer], images: set[str] | None = None) -> None:
        self.containers = FakeContainers(items)
        self.images = FakeImages(
            {f"apache/kafka:{paths.pom_kafka_version()}"} if images is None else images
        )


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path / "state"))
    # LAB_KAFKA_IMAGE too: the Docker tests of the same session set it to their stand-in.
    for var in (db.ENV_UPSTREAMS, db.ENV_DIRECT, db.ENV_LISTEN_HOST, db.ENV_KAFKA_IMAGE):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "state"


def make_cluster(
    *statuses: str, images: set[str] | None = None, **kwargs: Any
) -> tuple[db.DockerCluster, list[FakeContainer]]:
    items = [FakeContainer(f"kafka-{n}", s, **kwargs) for n, s in zip(NODES, statuses, strict=True)]
    other = FakeContainer("postgres")
    client = FakeClient([*items, other], images)
    return db.DockerCluster(client=client), items  # type: ignore[arg-type]


def test_an_engine_without_the_image_says_how_to_pull_or_build_it(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(db.ENV_KAFKA_IMAGE, raising=False)
    cluster, _ = make_cluster("exited", "exited", "exited", images=set())
    with pytest.raises(MissingImageError) as caught:
        cluster.require_image()
    message = str(caught.value)
    official = f"apache/kafka:{paths.pom_kafka_version()}"
    assert cluster._client.images.pulled == [official], "it tries to pull first"
    assert "\n" not in message and "Traceback" not in message
    assert f"no image {official} and could not pull it" in message
    assert "no such host" in message
    assert f"`docker pull {official}`" in message
    assert "`./lab images`" in message and db.ENV_KAFKA_IMAGE in message
    # A stand-in named by the variable is what is looked for, and found.
    monkeypatch.setenv(db.ENV_KAFKA_IMAGE, "kafka-failure-lab/kafka-standin:x")
    cluster._client.images.present.add("kafka-failure-lab/kafka-standin:x")
    cluster.require_image()


def test_leftover_broker_containers_are_taken_over_and_said(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", f"{fake_docker(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    cluster, items = make_cluster("running", "running", "paused")
    steps: list[str] = []
    cluster.on_progress = steps.append
    monkeypatch.setattr(db.admin, "wait_for_brokers", lambda b, e, timeout: None)
    monkeypatch.setattr(db.admin, "load_coordinators", lambda bootstrap, timeout: True)
    monkeypatch.setattr(db, "free_ports", lambda count: [45679])
    monkeypatch.setattr(
        db,
        "start_proxy_process",
        lambda routes, port, root, owner_pid=None: ProxyInfo("127.0.0.1", port, "ev", pid=None),
    )
    cluster.start(timeout=5)
    assert steps[0] == (
        f"Taking over the broker containers of compose project {db.PROJECT} left from before "
        "(nodes 1, 2, 3)."
    )
    assert items[2].calls == ["unpause"], "a frozen leftover is thawed"


def test_host_layout(state_dir: Path) -> None:
    cluster, _ = make_cluster("running", "running", "running")
    assert cluster.direct_bootstrap == "127.0.0.1:29191,127.0.0.1:29192,127.0.0.1:29193"
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


def test_a_pause_the_freezer_gives_up_on_is_asked_again(state_dir: Path) -> None:
    cluster, items = make_cluster("running", "running", "running")
    items[0].freeze_failures = 2
    cluster.pause_node(1)
    assert items[0].calls == ["pause"] * 3 and items[0].status == "paused"
    items[1].freeze_failures = db.FREEZE_ATTEMPTS
    with pytest.raises(ClusterError, match="unable to freeze"):
        cluster.pause_node(2)
    assert items[1].status == "running"


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
    assert waited == [("127.0.0.1:29191", {1}), (cluster.proxied_bootstrap, {1})]


def no_brokers_to_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake `docker compose` starts nothing: no broker to wait for, no proxy process, and
    proxy port 45678. The fixed proxy ports may be taken on this machine (a real compose
    stack): not these tests' concern, which is the compose command lines."""
    monkeypatch.setattr(db.admin, "wait_for_brokers", lambda b, e, timeout: None)
    monkeypatch.setattr(db.admin, "load_coordinators", lambda bootstrap, timeout: True)
    monkeypatch.setattr(db, "free_ports", lambda count: [45678])
    monkeypatch.setattr(db, "require_free", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        db,
        "start_proxy_process",
        lambda routes, port, root, owner_pid=None: ProxyInfo("127.0.0.1", port, "ev", pid=None),
    )


def test_start_and_stop_run_compose_with_argument_lists(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", f"{fake_docker(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    cluster, items = make_cluster("running", "paused", "running")
    no_brokers_to_wait_for(monkeypatch)
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
    assert f"{compose} rm --stop --force -v kafka-1 kafka-2 kafka-3" in calls
    with pytest.raises(ClusterNotRunningError):
        db.DockerCluster.attach(client=FakeClient(items))  # type: ignore[arg-type]


def test_brokers_run_the_chosen_version_and_replace_containers_of_another(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """LAB_KAFKA_VERSION=4.1.2: compose is given apache/kafka:4.1.2 whatever the compose
    file's default; containers left from a 4.4.0 cluster are recreated with fresh anonymous
    volumes (a newer data directory is not readable by an older Kafka, nor wanted by a
    newer one's fresh cluster), and the state file remembers 4.1.2 for other processes."""
    monkeypatch.setenv("PATH", f"{fake_docker(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LAB_KAFKA_VERSION", "4.1.2")
    # Running: the fake `docker compose up` starts nothing.
    cluster, items = make_cluster("running", "running", "running", images={"apache/kafka:4.1.2"})
    for item in items:
        item.attrs = {"Config": {"Image": f"apache/kafka:{paths.pom_kafka_version()}"}}
    steps: list[str] = []
    cluster.on_progress = steps.append
    no_brokers_to_wait_for(monkeypatch)
    cluster.start(timeout=5)
    calls = (tmp_path / "docker-calls").read_text().splitlines()
    up = [c for c in calls if " up " in c]
    assert up == [
        f"compose -p kafka-failure-lab -f {db.COMPOSE_FILE} up -d --renew-anon-volumes "
        "kafka-1 kafka-2 kafka-3"
    ]
    images = (tmp_path / "docker-images").read_text().splitlines()
    assert images[calls.index(up[0])] == "apache/kafka:4.1.2"
    assert any("run apache/kafka:4.4.0: replacing them, with empty data" in s for s in steps)
    monkeypatch.delenv("LAB_KAFKA_VERSION")
    again = db.DockerCluster.attach(client=FakeClient(items))  # type: ignore[arg-type]
    assert again.kafka_version == "4.1.2" and again.kafka_image == "apache/kafka:4.1.2"
    # Containers of the same image are taken over with their data, as before.
    cluster.stop()
    fresh, items = make_cluster("running", "running", "running")
    for item in items:
        item.attrs = {"Config": {"Image": f"apache/kafka:{paths.pom_kafka_version()}"}}
    fresh.start(timeout=5)
    last_up = [c for c in (tmp_path / "docker-calls").read_text().splitlines() if " up " in c]
    assert last_up[-1].endswith(" up -d kafka-1 kafka-2 kafka-3")


# ---- the Kafka stand-in (containers/kafka) against the compose file --------------------------
STANDIN = paths.REPO_ROOT / "containers" / "kafka"


@pytest.fixture(scope="module")
def kafka_classes() -> dict[str, bytes]:
    """The pinned Kafka jars' own classes (kafka*.jar), by path in the jar."""
    from engine.kafka import jars

    classes: dict[str, bytes] = {}
    for jar in Path(jars.kafka_classpath()).parent.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as zf:
            for name in zf.namelist():
                if name.endswith(".class"):
                    classes[name] = zf.read(name)
    return classes


def wrapper_property(variable: str) -> str:
    """KafkaDockerWrapper's rule: KAFKA_LOG_DIRS -> log.dirs (`__` -> `_`, `___` -> `-`)."""
    key = variable.removeprefix("KAFKA_").lower().replace("_", ".")
    return key.replace("...", "-").replace("..", "_")


def test_the_kafka_standin_handles_every_variable_the_compose_file_sets(
    compose: dict[str, Any], kafka_classes: dict[str, bytes]
) -> None:
    wrapper = kafka_classes["kafka/docker/KafkaDockerWrapper$.class"]
    # The variables the wrapper leaves out of server.properties, read from the pinned class
    # itself: the JVM's options and logging, which the start scripts must read instead.
    constants = kafka_classes["kafka/docker/Constants$.class"]
    not_properties = {m.decode() for m in re.findall(rb"KAFKA_[A-Z0-9_]+", constants)}
    assert "KAFKA_HEAP_OPTS" in not_properties
    scripts = "\n".join(
        p.read_text() for p in [STANDIN / "run", *sorted((STANDIN / "bin").iterdir())]
    )
    every_class = b"\n".join(kafka_classes.values())
    for n in NODES:
        for variable, value in kafka_env(compose, n).items():
            if variable == "CLUSTER_ID":
                assert b"CLUSTER_ID" in wrapper  # it formats the storage with it
                assert "CLUSTER_ID" in (STANDIN / "run").read_text()
            elif variable in not_properties:
                assert re.search(r"\$\{?" + variable + r"\b", scripts), (
                    f"{variable} is for the JVM, but no script of the stand-in reads it"
                )
            else:
                assert variable.startswith("KAFKA_"), f"the image ignores {variable}={value}"
                key = wrapper_property(variable)
                # A real broker setting: its name is a literal in Kafka's own classes.
                assert key.encode() in every_class, f"{variable} -> {key}: no such setting"


def test_the_kafka_standin_has_the_paths_the_compose_file_and_backend_use(
    compose: dict[str, Any], kafka_classes: dict[str, bytes]
) -> None:
    from engine.logs.layout import _DockerLogDirs

    dockerfile = (STANDIN / "Dockerfile").read_text()
    volumes = json.loads(re.search(r"(?m)^VOLUME (\[.*\])$", dockerfile).group(1))
    log_dir = kafka_env(compose, 1)["KAFKA_LOG_DIRS"]
    # The log dir is a volume, so a killed and restarted container keeps its log.
    assert log_dir in volumes and log_dir == _DockerLogDirs.DATA
    assert re.search(r'(?m)^CMD \["/etc/kafka/docker/run"\]$', dockerfile)
    assert "COPY run /etc/kafka/docker/run" in dockerfile
    assert "COPY bin/ /opt/kafka/bin/" in dockerfile and "COPY libs/ /opt/kafka/libs/" in dockerfile

    healthcheck = compose["x-kafka"]["healthcheck"]["test"][-1]
    tools = set(re.findall(r"/opt/kafka/bin/([\w.-]+)", healthcheck))
    tools.add(Path(_DockerLogDirs.DUMP_SCRIPT).name)
    assert tools == {"kafka-cluster.sh", "kafka-dump-log.sh"}
    for tool in [*tools, "kafka-run-class.sh", "kafka-server-start.sh", "kafka-storage.sh"]:
        script = STANDIN / "bin" / tool
        assert script.stat().st_mode & stat.S_IXUSR, f"{tool} is not executable"
        # Each wrapper runs a class that the pinned jars have (kafka-dump-log.sh names two:
        # the class moved in Kafka 4.3, and the script picks the one its jars hold).
        named = re.findall(r"(?:kafka-run-class.sh\" |class=)([\w.]+)", script.read_text())
        assert not named or any(
            cls.replace(".", "/") + ".class" in kafka_classes for cls in named
        ), f"{tool}: none of {named}"

    run = (STANDIN / "run").read_text()
    assert "kafka.docker.KafkaDockerWrapper setup" in run
    wrapper = kafka_classes["kafka/docker/KafkaDockerWrapper$.class"]
    for flag in re.findall(r"(--[a-z-]+-dir)\b", run):
        assert flag.encode() in wrapper, f"KafkaDockerWrapper has no {flag}"
    # A restarted container's log dir is already formatted; the stand-in must go on.
    assert 'grep -qi "already formatted"' in run
    for name in ("log4j2.yaml", "tools-log4j2.yaml", "server.properties"):
        assert name.encode() in kafka_classes["kafka/docker/Constants$.class"]
        assert (STANDIN / "config" / name).is_file()
