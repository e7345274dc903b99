"""The docker backend: the docker-compose.yml cluster (three KRaft nodes), behind the fault proxy.

The brokers run in containers from the official `apache/kafka` image; the lab starts and
removes them with `docker compose` and hurts them through the Docker engine: a kill is
SIGKILL to the container, a pause is the cgroup freezer (`docker pause`). Each node's
CLIENT listener advertises the fault proxy's port 1909N, so clients always go through the
proxy, which the lab runs as a local process (see docker-compose.yml for the listeners).

The proxy runs in one of two places:

- on the host (the default): it listens on 127.0.0.1:1909N and forwards to the CLIENT
  listener published at 127.0.0.1:2909N; admin and checkers use DIRECT_HOST, 127.0.0.1:2919N;
- in the dashboard container, when LAB_DOCKER_PROXY_UPSTREAMS is set (docker-compose.yml
  sets it): it listens on LAB_PROXY_LISTEN_HOST, forwards to kafka-N:9092 over the compose
  network, and admin uses LAB_DOCKER_DIRECT_BOOTSTRAP (kafka-N:9094).

The proxy's pid and control port are kept in `.lab/docker/cluster.json`, so a cluster
started by one process can be found, hurt and stopped by another (`DockerCluster.attach()`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
import requests
from docker.models.containers import Container

from engine.base import paths, settings
from engine.base.errors import (
    ClusterError,
    ClusterNotRunningError,
    DockerUnavailableError,
    MissingImageError,
    MissingToolError,
    PortInUseError,
)
from engine.cluster.base import (
    Cluster,
    NodeInfo,
    NodeState,
    ProxyInfo,
    load_coordinators_at_start,
    write_json_atomic,
)
from engine.cluster.pids import _signal_group, _wait_gone, pid_alive
from engine.cluster.ports import LOOPBACK, free_ports, require_free
from engine.cluster.proxy_process import route_args, start_proxy_process
from engine.kafka import admin

PROJECT = "kafka-failure-lab"  # docker-compose.yml's top-level `name:`
COMPOSE_FILE = paths.REPO_ROOT / "docker-compose.yml"
NODE_IDS = (1, 2, 3)
SERVICES = {n: f"kafka-{n}" for n in NODE_IDS}
STATE_SUBDIR = "docker"
STATE_FILE = "cluster.json"

# Fixed host ports (docker-compose.yml publishes and advertises exactly these).
PROXY_PORTS = {n: 19090 + n for n in NODE_IDS}  # the fault proxy; advertised by CLIENT
CLIENT_PORTS = {n: 29090 + n for n in NODE_IDS}  # CLIENT, published for the host's proxy
DIRECT_PORTS = {n: 29190 + n for n in NODE_IDS}  # DIRECT_HOST, published and advertised

ENV_UPSTREAMS = settings.DOCKER_PROXY_UPSTREAMS.name
ENV_DIRECT = settings.DOCKER_DIRECT_BOOTSTRAP.name
ENV_LISTEN_HOST = settings.PROXY_LISTEN_HOST.name
FREEZE_ATTEMPTS = 5  # `docker pause` tries before its "unable to freeze" is final
ENV_KAFKA_IMAGE = settings.KAFKA_IMAGE.name  # docker-compose.yml's image variable for the brokers

_LABEL_PROJECT = "com.docker.compose.project"
_LABEL_SERVICE = "com.docker.compose.service"
_LABEL_ONEOFF = "com.docker.compose.oneoff"
_DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
_LOCAL_HINT = "or use the default local backend (LAB_BACKEND=local)"

T = TypeVar("T")


# ---- the Docker engine and the compose CLI --------------------------------------------------
def docker_host() -> str:
    """Where the Docker SDK looks for the engine (DOCKER_HOST, else the standard socket)."""
    return os.environ.get("DOCKER_HOST") or _DEFAULT_DOCKER_HOST


def _engine_problem(exc: BaseException) -> DockerUnavailableError:
    """One actionable line for an engine that does not answer or refuses us (no traceback)."""
    host = docker_host()
    text = f"{exc!r} {exc}".lower()
    if "permission denied" in text or "permissionerror" in text:
        return DockerUnavailableError(
            f"The Docker engine at {host} denies this user access. Add yourself to the docker "
            "group (`sudo usermod -aG docker $USER`, then log out and in again), "
            f"{_LOCAL_HINT}."
        )
    if "filenotfounderror" in text or "no such file" in text:
        why = "no socket there"
    elif "refused" in text:
        why = "connection refused"
    elif "timed out" in text or "timeout" in text:
        why = "timed out"
    else:
        why = "no answer"
    return DockerUnavailableError(
        f"No Docker engine answers at {host} ({why}). Start Docker Desktop or the docker "
        f"service (`sudo systemctl start docker`), {_LOCAL_HINT}."
    )


def connect_engine() -> docker.DockerClient:
    """A client of a Docker engine that answers, or DockerUnavailableError saying what to do."""
    try:
        client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise _engine_problem(exc) from exc
    return client


@dataclass(frozen=True)
class ComposeTool:
    """How to run Docker Compose here: the `docker compose` plugin or a standalone binary."""

    argv: tuple[str, ...]  # ("docker", "compose") or ("docker-compose",)
    version: str
    # Compose v1 (Debian's docker-compose 1.29) rejects the top-level `name:` of the compose
    # spec; it is given the file without that line on stdin, and the project by `-p`.
    legacy: bool

    @property
    def shown(self) -> str:
        return " ".join([Path(self.argv[0]).name, *self.argv[1:]])


def _probe(argv: list[str]) -> tuple[bool, str]:
    """Run a compose `version` command: (it answered, its output or why it did not)."""
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (probe.stdout or probe.stderr).strip()
    return probe.returncode == 0, text.splitlines()[-1] if text else f"exit {probe.returncode}"


def compose_command() -> ComposeTool:
    """The `docker compose` plugin, else a standalone `docker-compose` (v2 or v1.29).

    MissingToolError, naming what was looked for and why each was not usable, when neither.
    """
    why: list[str] = []
    docker_bin = shutil.which("docker")
    if docker_bin is None:
        why.append("no `docker` command on PATH")
    else:
        ok, out = _probe([docker_bin, "compose", "version", "--short"])
        if ok:
            return ComposeTool((docker_bin, "compose"), out.lstrip("v"), legacy=False)
        why.append(f"the `docker compose` plugin is missing ({out[:120]})")
    standalone = shutil.which("docker-compose")
    if standalone is None:
        why.append("no standalone `docker-compose` on PATH")
    else:
        ok, out = _probe([standalone, "version", "--short"])
        if ok:
            version = out.lstrip("v")
            return ComposeTool((standalone,), version, legacy=version.startswith("1."))
        why.append(f"`docker-compose version` failed ({out[:120]})")
    raise MissingToolError(
        "Docker Compose was not found: " + "; ".join(why) + ". Install the compose plugin "
        "(Docker Desktop includes it; on Linux the docker-compose-plugin package) or a "
        f"standalone docker-compose (Debian: apt-get install docker-compose), {_LOCAL_HINT}."
    )


def compose_file_for_v1(text: str) -> str:
    """The compose file without its top-level `name:`, which Compose v1 refuses."""
    return re.sub(r"(?m)^name:.*\n", "", text)


def default_image(compose_text: str, variable: str) -> str | None:
    """The default of `${VARIABLE:-default}` in a compose file, or None if it is not used."""
    found = re.search(r"\$\{" + re.escape(variable) + r":-([^}]+)\}", compose_text)
    return found.group(1) if found else None


def run_compose(
    compose_file: Path, args: list[str], timeout: float, env: dict[str, str] | None = None
) -> None:
    """Run `docker compose -p PROJECT -f FILE ARGS...` (an argument list, never a shell),
    with `env` added to this process's environment (the variables the file interpolates).

    Compose v1 gets the file on stdin without `name:`, and its folder as the project's.
    """
    tool = compose_command()
    if tool.legacy:
        # Compose v1: the file on stdin without `name:`; relative paths from its folder.
        files = ["-f", "-", "--project-directory", str(compose_file.parent)]
        stdin = compose_file_for_v1(compose_file.read_text())
    else:
        files, stdin = ["-f", str(compose_file)], None
    cmd = [*tool.argv, "-p", PROJECT, *files, *args]
    shown = f"{tool.shown} " + " ".join(args)
    try:
        result = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=compose_file.parent,
            check=False,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(
            f"`{shown}` did not finish within {timeout:.0f}s. If it is pulling images, "
            f"run `{tool.shown} -f {compose_file} pull` first."
        ) from exc
    if result.returncode == 0:
        return
    output = (result.stderr or result.stdout).strip()
    lowered = output.lower()
    if "permission denied" in lowered and "docker" in lowered:
        raise _engine_problem(PermissionError(output))
    if "port is already allocated" in lowered or "address already in use" in lowered:
        raise PortInUseError(
            f"`{shown}` failed: a port the brokers publish (2909N, 2919N) is taken by "
            f"another process. Free it and start again. Docker said: {output[-300:]}"
        )
    raise ClusterError(f"`{shown}` failed (exit {result.returncode}): {output[-500:]}")


def parse_upstreams(spec: str) -> dict[int, tuple[str, int]]:
    """Parse LAB_DOCKER_PROXY_UPSTREAMS: `1=kafka-1:9092,2=kafka-2:9092,3=kafka-3:9092`."""
    upstreams: dict[int, tuple[str, int]] = {}
    try:
        for item in filter(None, (part.strip() for part in spec.split(","))):
            node, address = item.split("=", 1)
            host, port = address.rsplit(":", 1)
            upstreams[int(node)] = (host.strip(), int(port))
    except ValueError as exc:
        raise ClusterError(
            f"{ENV_UPSTREAMS}={spec!r} is malformed: want NODE=HOST:PORT for each node, comma "
            "separated, e.g. 1=kafka-1:9092,2=kafka-2:9092,3=kafka-3:9092."
        ) from exc
    if set(upstreams) != set(NODE_IDS):
        raise ClusterError(
            f"{ENV_UPSTREAMS}={spec!r} must name nodes {list(NODE_IDS)} exactly once each."
        )
    return upstreams


def parse_direct_bootstrap(spec: str) -> dict[int, str]:
    """Node id -> direct address from LAB_DOCKER_DIRECT_BOOTSTRAP, listed in node order 1..3."""
    addresses = [a.strip() for a in spec.split(",") if a.strip()]
    if len(addresses) != len(NODE_IDS) or any(":" not in a for a in addresses):
        raise ClusterError(
            f"{ENV_DIRECT}={spec!r} must list the {len(NODE_IDS)} brokers' direct addresses "
            "in node order, e.g. kafka-1:9094,kafka-2:9094,kafka-3:9094."
        )
    return dict(zip(NODE_IDS, addresses, strict=True))


def node_state(status: str | None) -> NodeState:
    """A container's status as a node state: running, paused, or down (anything else)."""
    if status == "running":
        return NodeState.RUNNING
    if status == "paused":
        return NodeState.PAUSED
    return NodeState.DOWN  # exited, dead, created, restarting, removing, or no container


@dataclass
class Layout:
    """Where the proxy listens and forwards to, and where admin reaches the brokers."""

    mode: str  # "host" or "container"
    listen_host: str
    upstreams: dict[int, tuple[str, int]]
    direct: dict[int, str]

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Layout:
        env = dict(os.environ if env is None else env)
        if env.get(ENV_UPSTREAMS):
            mode = "container"
            upstreams = parse_upstreams(env[ENV_UPSTREAMS])
            direct_default = ",".join(f"{SERVICES[n]}:9094" for n in NODE_IDS)
            listen_default = "0.0.0.0"
        else:
            mode = "host"
            upstreams = {n: (LOOPBACK, CLIENT_PORTS[n]) for n in NODE_IDS}
            direct_default = ",".join(f"{LOOPBACK}:{DIRECT_PORTS[n]}" for n in NODE_IDS)
            listen_default = LOOPBACK
        return cls(
            mode=mode,
            listen_host=env.get(ENV_LISTEN_HOST) or listen_default,
            upstreams=upstreams,
            direct=parse_direct_bootstrap(env.get(ENV_DIRECT) or direct_default),
        )

    def routes(self) -> list[str]:
        """The proxy's --route arguments: NODE:LISTEN_HOST:LISTEN_PORT:UPSTREAM_HOST:PORT."""
        return [
            f"{n}:{self.listen_host}:{PROXY_PORTS[n]}:{host}:{port}"
            for n, (host, port) in sorted(self.upstreams.items())
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "listen_host": self.listen_host,
            "upstreams": {str(n): f"{h}:{p}" for n, (h, p) in self.upstreams.items()},
            "direct": {str(n): a for n, a in self.direct.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Layout:
        upstreams = {}
        for n, address in data["upstreams"].items():
            host, port = address.rsplit(":", 1)
            upstreams[int(n)] = (host, int(port))
        return cls(
            mode=data["mode"],
            listen_host=data["listen_host"],
            upstreams=upstreams,
            direct={int(n): a for n, a in data["direct"].items()},
        )


# ---- the cluster ----------------------------------------------------------------------------
class DockerCluster(Cluster):
    """The docker-compose.yml brokers, started, hurt and removed by the lab."""

    backend = "docker"
    supports_broker_faults = True

    def __init__(
        self,
        *,
        compose_file: Path | str | None = None,
        owner_pid: int | None = None,
        client: docker.DockerClient | None = None,
        layout: Layout | None = None,
    ) -> None:
        # Fail here, with one clear line, rather than on the first fault.
        self._client = client if client is not None else connect_engine()
        self.compose_file = Path(compose_file) if compose_file else COMPOSE_FILE
        self.owner_pid = owner_pid
        self.layout = layout if layout is not None else Layout.from_env()
        self._proxy: ProxyInfo | None = None
        # The version the brokers run; one attached to says the one it was started with.
        self._kafka_version = paths.kafka_version()
        # Called with each start-up step (the dashboard shows them in the sidebar).
        self.on_progress: Callable[[str], None] | None = None

    # ---- persistence -----------------------------------------------------------------------
    @staticmethod
    def state_root() -> Path:
        return paths.state_dir() / STATE_SUBDIR

    @property
    def root(self) -> Path:
        return self.state_root()

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    def _save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "backend": self.backend,
            "project": PROJECT,
            "compose_file": str(self.compose_file),
            "kafka_version": self._kafka_version,
            "owner_pid": self.owner_pid,
            "layout": self.layout.to_json(),
            "proxy": asdict(self._proxy) if self._proxy else None,
            "saved_at": time.time(),
        }
        write_json_atomic(self.state_file, data)

    @classmethod
    def exists(cls) -> bool:
        return (cls.state_root() / STATE_FILE).exists()

    @classmethod
    def attach(cls, *, client: docker.DockerClient | None = None) -> DockerCluster:
        """A handle on the docker cluster started earlier (by this or another process)."""
        state_file = cls.state_root() / STATE_FILE
        try:
            data = json.loads(state_file.read_text())
            layout = Layout.from_json(data["layout"])
        except FileNotFoundError as exc:
            raise ClusterNotRunningError(
                "No docker cluster is running. Start it first with the docker backend "
                "(LAB_BACKEND=docker)."
            ) from exc
        except (json.JSONDecodeError, KeyError, ValueError, OSError) as exc:
            raise ClusterError(
                f"The state file {state_file} is unreadable ({exc}). Stop the docker cluster "
                "to clean up, then start it again."
            ) from exc
        cluster = cls(
            compose_file=data.get("compose_file"),
            owner_pid=data.get("owner_pid"),
            client=client,
            layout=layout,
        )
        cluster._proxy = ProxyInfo(**data["proxy"]) if data.get("proxy") else None
        cluster._kafka_version = data.get("kafka_version") or paths.pom_kafka_version()
        return cluster

    @property
    def kafka_version(self) -> str:
        return self._kafka_version

    # ---- addresses -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return PROJECT

    @property
    def direct_bootstrap(self) -> str:
        return ",".join(self.layout.direct[n] for n in NODE_IDS)

    @property
    def proxied_bootstrap(self) -> str:
        # In the container too: the proxy listens there, and the brokers advertise these.
        return ",".join(f"{LOOPBACK}:{PROXY_PORTS[n]}" for n in NODE_IDS)

    @property
    def proxy(self) -> ProxyInfo | None:
        return self._proxy

    @property
    def node_ids(self) -> list[int]:
        return list(NODE_IDS)

    def nodes(self) -> list[NodeInfo]:
        containers = self._containers()
        infos = []
        for n in NODE_IDS:
            container = containers.get(n)
            infos.append(
                NodeInfo(
                    node_id=n,
                    state=node_state(container.status if container else None),
                    direct_address=self.layout.direct[n],
                    proxied_address=f"{LOOPBACK}:{PROXY_PORTS[n]}",
                    container=container.name if container else None,
                )
            )
        return infos

    def is_running(self) -> bool:
        proxy_up = bool(self._proxy and pid_alive(self._proxy.pid))
        return proxy_up or any(n.state != NodeState.DOWN for n in self.nodes())

    # ---- containers ------------------------------------------------------------------------
    def _engine(self, what: str, call: Callable[[], T]) -> T:
        """Run one Docker SDK call; turn its failures into errors the lab can show."""
        try:
            return call()
        except docker.errors.NotFound as exc:
            raise ClusterError(
                f"Could not {what}: the container is gone. Start the docker cluster again."
            ) from exc
        except docker.errors.APIError as exc:
            detail = exc.explanation or str(exc)
            if "permission denied" in str(detail).lower():
                raise _engine_problem(exc) from exc
            raise ClusterError(f"Docker refused to {what}: {detail}") from exc
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            raise _engine_problem(exc) from exc

    def _containers(self) -> dict[int, Container]:
        """The broker containers of this compose project, by node id (missing ones absent)."""
        found = self._engine(
            "list the broker containers",
            lambda: self._client.containers.list(
                all=True, filters={"label": f"{_LABEL_PROJECT}={PROJECT}"}
            ),
        )
        by_node: dict[int, Container] = {}
        for container in found:
            labels = container.labels or {}
            if labels.get(_LABEL_ONEOFF, "False") == "True":
                continue  # a `docker compose run` container, not the service's own
            for n, service in SERVICES.items():
                if labels.get(_LABEL_SERVICE) == service:
                    by_node.setdefault(n, container)
        return by_node

    def container(self, node_id: int) -> Container:
        if node_id not in NODE_IDS:
            raise ClusterError(
                f"There is no node {node_id}; this cluster has nodes {list(NODE_IDS)}."
            )
        container = self._containers().get(node_id)
        if container is None:
            raise ClusterError(
                f"Node {node_id} has no container ({SERVICES[node_id]} of compose project "
                f"{PROJECT}). Start the docker cluster first."
            )
        return container

    def _status(self, container: Container) -> str:
        self._engine(f"inspect {container.name}", container.reload)
        return str(container.status)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        """Start the brokers with docker compose, then the proxy; wait until all are brokers.

        Broker containers this compose project already has (an earlier run that was never
        stopped, or `docker compose up` of the whole file) are taken over: compose starts the
        stopped ones, a paused one is thawed, and their topics stay.
        """
        self._refuse_if_running()
        self._clean_leftovers()
        for n in NODE_IDS:
            require_free(
                PROXY_PORTS[n],
                f"the fault proxy for node {n}; is the lab's dashboard container running? "
                "It runs its own proxy",
                host=self.layout.listen_host,
            )
        leftover = sorted(self._containers())
        if leftover:
            self._progress(
                f"Taking over the broker containers of compose project {PROJECT} left from "
                f"before (nodes {', '.join(map(str, leftover))})."
            )
        self.require_image()
        up = ["up", "-d"]
        if other := self._leftover_images(leftover) - {self.kafka_image}:
            # Compose recreates them with the new image but keeps their anonymous data
            # volumes; a data directory is not forward-compatible (a 4.4 one does not start
            # 4.1), so a cluster of another version starts empty.
            self._progress(
                f"The containers left from before run {', '.join(sorted(other))}: replacing "
                f"them, with empty data, by {self.kafka_image}."
            )
            up.append("--renew-anon-volumes")
        self._progress("Starting the broker containers (docker compose up)…")
        # An image pull on first use can take minutes; readiness gets its own `timeout`.
        self._compose([*up, *SERVICES.values()], timeout=max(timeout, 900.0))
        # A node an earlier session left frozen would answer nothing: thaw it.
        for container in self._containers().values():
            if self._status(container) == "paused":
                self._engine(f"unpause {container.name}", container.unpause)
        try:
            self._proxy = start_proxy_process(
                route_args(self.layout.routes()),
                free_ports(1)[0],
                self.root,
                owner_pid=self.owner_pid,
            )
            self._save()
            self._progress("Waiting for the three brokers to register…")
            self._wait_ready(set(NODE_IDS), timeout)
            load_coordinators_at_start(self.direct_bootstrap, self._progress)
        except BaseException:
            # The containers stay, so that their logs can be read; the next start reuses them.
            self._stop_proxy()
            self.state_file.unlink(missing_ok=True)
            raise

    def _progress(self, step: str) -> None:
        if self.on_progress is not None:
            self.on_progress(step)

    @property
    def kafka_image(self) -> str:
        """The brokers' image: LAB_KAFKA_IMAGE, else the official image of the cluster's
        Kafka version (the compose file's default is that of kafka/pom.xml's)."""
        return settings.KAFKA_IMAGE.get() or f"apache/kafka:{self._kafka_version}"

    def _leftover_images(self, leftover: list[int]) -> set[str]:
        """The images the broker containers left from before were made from."""
        containers = self._containers()
        return {
            image
            for n in leftover
            if (image := getattr(containers[n], "attrs", {}).get("Config", {}).get("Image"))
        }

    def require_image(self) -> None:
        """The brokers' image is in the engine, or pulled now; else one line on how to get it."""
        image = self.kafka_image
        try:
            self._client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            raise _engine_problem(exc) from exc
        self._progress(f"Pulling {image}…")
        try:
            self._client.images.pull(image)
            return
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            detail = getattr(exc, "explanation", None) or str(exc)
            reason = " ".join(str(detail).split())[-160:]
        raise MissingImageError(
            f"The Docker engine has no image {image} and could not pull it ({reason}). Pull it "
            f"where a registry answers (`docker pull {image}`), or build a stand-in from the "
            f"pinned Kafka jars with `./lab images` and set the {ENV_KAFKA_IMAGE} it prints."
        )

    def _refuse_if_running(self) -> None:
        if not self.state_file.exists():
            return
        try:
            other = DockerCluster.attach(client=self._client)
        except ClusterError:
            return
        if other._proxy and pid_alive(other._proxy.pid):
            raise ClusterError(
                "The docker cluster is already running (its fault proxy has pid "
                f"{other._proxy.pid}). Use it, or stop it first."
            )

    def _clean_leftovers(self) -> None:
        """Forget what a crashed earlier run left: a stray proxy and its state file."""
        if self.state_file.exists():
            with contextlib.suppress(ClusterError):
                DockerCluster.attach(client=self._client)._stop_proxy()
            self.state_file.unlink(missing_ok=True)

    def _compose(self, args: list[str], timeout: float) -> None:
        # The compose file's image is ${LAB_KAFKA_IMAGE:-apache/kafka:POM_VERSION}: given
        # here, the brokers run the cluster's version, whatever the caller's environment.
        run_compose(self.compose_file, args, timeout, env={ENV_KAFKA_IMAGE: self.kafka_image})

    def _wait_ready(self, expected: set[int], timeout: float) -> None:
        """Wait until the expected nodes are registered brokers, directly and via the proxy."""
        if len(expected) == 1:
            # The node's own address: a fresh client must get its metadata from that node,
            # so a registration left over from before a kill does not count as ready.
            bootstrap = self.layout.direct[next(iter(expected))]
        else:
            bootstrap = self.direct_bootstrap
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_exited(expected)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ClusterError(
                    f"The docker cluster did not become ready within {timeout:.0f}s. See "
                    f"`docker compose -p {PROJECT} logs "
                    + " ".join(SERVICES[n] for n in sorted(expected))
                    + "`."
                )
            try:
                admin.wait_for_brokers(bootstrap, expected, timeout=min(3.0, remaining))
                break
            except TimeoutError:
                continue
        # The proxied path must work too: clients under test only ever use it.
        remaining = max(5.0, deadline - time.monotonic())
        try:
            admin.wait_for_brokers(self.proxied_bootstrap, expected, timeout=remaining)
        except TimeoutError as exc:
            raise ClusterError(
                f"The brokers are up but not reachable through the fault proxy ({exc}). "
                f"See {self.root / 'proxy.log'}."
            ) from exc

    def _raise_if_exited(self, expected: set[int]) -> None:
        containers = self._containers()
        for n in sorted(expected):
            container = containers.get(n)
            if container is None:
                raise ClusterError(f"Node {n}'s container ({SERVICES[n]}) disappeared.")
            if container.status in ("exited", "dead"):
                raise ClusterError(
                    f"Node {n} ({container.name}) exited during start-up. Last error: "
                    f"{self._last_error(container) or 'none logged'}. Full log: "
                    f"`docker logs {container.name}`."
                )

    def node_log_since(self, node_id: int, since: float) -> list[str]:
        """The container's log (the broker's stdout) from `since` on."""
        try:
            raw = self.container(node_id).logs(since=int(since))
        except (docker.errors.DockerException, requests.RequestException, ClusterError):
            return []
        return raw.decode(errors="replace").splitlines()

    def _last_error(self, container: Container) -> str:
        try:
            raw = container.logs(tail=200)
        except (docker.errors.DockerException, requests.RequestException):
            return ""
        lines = raw.decode(errors="replace").splitlines()
        errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
        chosen = errors or lines
        return chosen[-1].strip()[-400:] if chosen else ""

    def stop(self) -> None:
        """Stop the proxy and remove the broker containers with their data (anonymous volumes).

        Only the three broker services: the dashboard and Postgres, if compose runs them,
        stay up (`docker compose down` would take the dashboard that called it with it).
        """
        self._stop_proxy()
        # The data is thrown away, so a clean shutdown saves nothing: kill, then remove.
        for container in self._containers().values():
            status = self._status(container)
            if status == "paused":
                self._engine(f"unpause {container.name}", container.unpause)
                status = "running"
            if status in ("running", "restarting"):
                # If it stopped by itself meanwhile, fine: `rm --stop` below makes sure.
                with contextlib.suppress(ClusterError):
                    self._engine(f"kill {container.name}", container.kill)
        # `-v`, not `--volumes`: Compose v1 knows only the short form (and exits 0 on the other).
        self._compose(["rm", "--stop", "--force", "-v", *SERVICES.values()], timeout=120)
        # With no other service of the project left (no dashboard, no Postgres), the project's
        # network and named volumes go too: `cluster down` leaves nothing of the lab behind.
        others = self._engine(
            "list the project's containers",
            lambda: self._client.containers.list(
                all=True, filters={"label": f"{_LABEL_PROJECT}={PROJECT}"}
            ),
        )
        if not others:
            self._compose(["down", "-v", "--remove-orphans"], timeout=120)
        self.state_file.unlink(missing_ok=True)

    def _stop_proxy(self) -> None:
        if self._proxy and self._proxy.pid and pid_alive(self._proxy.pid):
            _signal_group(self._proxy.pid, signal.SIGKILL)
            _wait_gone(self._proxy.pid, timeout=10)
        self._proxy = None

    # ---- broker faults ---------------------------------------------------------------------
    def kill_node(self, node_id: int) -> None:
        """SIGKILL the node's container: no clean shutdown, no goodbye to the controller."""
        container = self.container(node_id)
        status = self._status(container)
        if status not in ("running", "paused", "restarting"):
            return  # already down
        try:
            self._engine(f"kill {container.name}", container.kill)
        except ClusterError:
            if self._status(container) != "paused":
                raise
            # Older engines refuse to kill a frozen container: thaw it, then kill at once.
            self._engine(f"unpause {container.name}", container.unpause)
            self._engine(f"kill {container.name}", container.kill)
        self._wait_status(container, lambda s: s not in ("running", "paused"), "stop", 30.0)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """`docker stop`: SIGTERM to the broker (a controlled shutdown), SIGKILL after
        `timeout` seconds."""
        container = self.container(node_id)
        if self._status(container) not in ("running", "restarting"):
            return
        self._engine(f"stop {container.name}", lambda: container.stop(timeout=int(timeout)))
        self._wait_status(container, lambda s: s not in ("running", "paused"), "stop", 30.0)

    def pause_node(self, node_id: int) -> None:
        """Freeze the node (cgroup freezer): its sockets stay open but it answers nothing."""
        container = self._require_up(node_id)
        if container.status == "paused":
            return
        # runc gives up ("unable to freeze") when a process keeps the cgroup FREEZING for too
        # long, which a busy JVM on a loaded machine does now and then; it has thawed the
        # container again by then, so asking again is safe.
        for attempt in range(FREEZE_ATTEMPTS):
            try:
                self._engine(f"pause {container.name}", container.pause)
                return
            except ClusterError as exc:
                if "unable to freeze" not in str(exc) or attempt == FREEZE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)

    def resume_node(self, node_id: int) -> None:
        container = self._require_up(node_id)
        if container.status == "paused":
            self._engine(f"unpause {container.name}", container.unpause)

    def restart_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start the node's container again on its old data (killing it first if it runs)."""
        container = self.container(node_id)
        if self._status(container) in ("running", "paused", "restarting"):
            self.kill_node(node_id)
        self._engine(f"start {container.name}", container.start)
        self._wait_ready({node_id}, timeout)

    def _require_up(self, node_id: int) -> Container:
        container = self.container(node_id)
        if self._status(container) not in ("running", "paused"):
            raise ClusterError(f"Node {node_id} is down; restart it first.")
        return container

    def _wait_status(
        self, container: Container, done: Callable[[str], bool], what: str, timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while not done(self._status(container)):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{container.name} did not {what} within {timeout:.0f}s "
                    f"(it is {container.status})."
                )
            time.sleep(0.1)
