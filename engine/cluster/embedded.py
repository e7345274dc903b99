"""The embedded backend: KRaft combined nodes as local JVM processes, behind the fault proxy.

Each node runs `kafka.Kafka` from the cached jars with a generated server.properties and
three listeners:

- CLIENT  (127.0.0.1:client_port), advertised as the fault proxy's port for that node, so
  every client under test, metadata included, goes through the proxy;
- DIRECT  (127.0.0.1:direct_port), advertised as itself, for inter-broker traffic, admin and
  checkers;
- CONTROLLER (127.0.0.1:controller_port), for the KRaft quorum.

The cluster's state (ports, pids) is written to `.lab/NAME/cluster.json`, so a cluster
started by `python -m engine cluster up` can be found, hurt and stopped by later commands
and by the dashboard.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.base import paths, tools
from engine.base.errors import ClusterError, ClusterNotRunningError, PortInUseError
from engine.cluster.base import (
    Cluster,
    NodeInfo,
    NodeState,
    ProxyInfo,
    load_coordinators_at_start,
    write_json_atomic,
)
from engine.cluster.pids import _signal_group, _wait_for_state, _wait_gone, pid_alive, pid_paused
from engine.cluster.ports import LOOPBACK, free_ports, is_listening
from engine.cluster.proxy_process import route_args, start_proxy_process
from engine.kafka import admin, jars

STATE_FILE = "cluster.json"
DEFAULT_HEAP = "512m"

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""


@dataclass
class EmbeddedNode:
    node_id: int
    client_port: int
    direct_port: int
    controller_port: int
    proxy_port: int
    dir: str
    pid: int | None = None
    paused: bool = False

    @property
    def data_dir(self) -> Path:
        return Path(self.dir) / "data"

    @property
    def properties_file(self) -> Path:
        return Path(self.dir) / "server.properties"

    @property
    def log_file(self) -> Path:
        return Path(self.dir) / "server.log"


def log_stamp(line: str) -> float | None:
    """A server.log line's log4j "[%d]" prefix (local time, milliseconds after a comma) as
    epoch seconds; None for a line without one."""
    if not line.startswith("[") or len(line) < 25:
        return None
    try:
        return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def log_lines_since(lines: list[str], since: float) -> list[str]:
    """The lines from the first one stamped at or after `since`. Unstamped lines go with
    the line before."""
    for index, line in enumerate(lines):
        stamp = log_stamp(line)
        if stamp is not None and stamp >= since:
            return lines[index:]
    return []


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding (22 chars).

    Like Kafka's own Uuid.randomUuid(), it never starts with "-", which a command line would
    read as an option (kafka-storage format -t -abc... fails).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def server_properties(node: EmbeddedNode, voters: str, node_count: int) -> str:
    """The broker+controller configuration for one combined KRaft node."""
    replication = 3 if node_count >= 3 else 1
    min_isr = 2 if node_count >= 3 else 1
    props = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "DIRECT",
        "listeners": (
            f"CLIENT://{LOOPBACK}:{node.client_port},DIRECT://{LOOPBACK}:{node.direct_port},"
            f"CONTROLLER://{LOOPBACK}:{node.controller_port}"
        ),
        # Clients learn the proxy's address from metadata, so they never bypass it.
        "advertised.listeners": (
            f"CLIENT://{LOOPBACK}:{node.proxy_port},DIRECT://{LOOPBACK}:{node.direct_port}"
        ),
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,DIRECT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.data_dir),
        "num.partitions": 1,
        "default.replication.factor": replication,
        "auto.create.topics.enable": "false",
        # Internal topics: RF 3 and min ISR 2 on three nodes, so one node may die safely.
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": 0,
        # A demo wants the cleaner and failure detection to act within seconds.
        "log.cleaner.backoff.ms": 1000,
        "broker.session.timeout.ms": 6000,
        "broker.heartbeat.interval.ms": 1000,
        "log.flush.interval.messages": 9223372036854775807,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class EmbeddedCluster(Cluster):
    """KRaft nodes as local JVM processes, started, hurt and stopped by the lab."""

    backend = "local"
    supports_broker_faults = True

    def __init__(
        self,
        name: str = "default",
        *,
        node_count: int = 1,
        heap: str = DEFAULT_HEAP,
        owner_pid: int | None = None,
        coordinators_at_start: bool = True,
    ) -> None:
        if node_count not in (1, 3):
            raise ClusterError(f"The embedded cluster runs 1 or 3 nodes, not {node_count}.")
        self._name = name
        self.node_count = node_count
        self.heap = heap
        self.owner_pid = owner_pid
        # False leaves the coordinators to the first run that asks (the cluster Kafka gives
        # before any client has asked): for the benchmark and the test that contrast it.
        self.coordinators_at_start = coordinators_at_start
        self.cluster_id: str | None = None
        # Fixed for the cluster's life: a node restarted from another process (whose
        # LAB_KAFKA_VERSION may differ) runs the version its data was formatted by.
        self._kafka_version = paths.kafka_version()
        self._nodes: list[EmbeddedNode] = []
        self._proxy: ProxyInfo | None = None
        # Called with a short sentence at each step of start(), for progress displays.
        self.on_progress: Callable[[str], None] = lambda _step: None

    # ---- persistence -------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return paths.state_dir() / self._name

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    def _save(self) -> None:
        data: dict[str, Any] = {
            "backend": self.backend,
            "name": self._name,
            "cluster_id": self.cluster_id,
            "kafka_version": self._kafka_version,
            "node_count": self.node_count,
            "heap": self.heap,
            "owner_pid": self.owner_pid,
            "nodes": [asdict(n) for n in self._nodes],
            "proxy": asdict(self._proxy) if self._proxy else None,
            "saved_at": time.time(),
        }
        write_json_atomic(self.state_file, data)

    @classmethod
    def attach(cls, name: str = "default") -> EmbeddedCluster:
        """A handle on a cluster started earlier (by this or another process)."""
        state_file = paths.state_dir() / name / STATE_FILE
        try:
            data = json.loads(state_file.read_text())
        except FileNotFoundError as exc:
            raise ClusterNotRunningError(
                f"No embedded cluster named '{name}' is running. Start one with "
                "`python -m engine cluster up`."
            ) from exc
        except (json.JSONDecodeError, OSError) as exc:
            raise ClusterError(
                f"The state file {state_file} is unreadable ({exc}). Run "
                "`python -m engine cluster down` to clean up, then start again."
            ) from exc
        cluster = cls(name, node_count=data["node_count"], heap=data.get("heap", DEFAULT_HEAP))
        cluster.owner_pid = data.get("owner_pid")
        cluster.cluster_id = data["cluster_id"]
        # Every state file names its version; kafka/pom.xml's is what one without it ran.
        cluster._kafka_version = data.get("kafka_version") or paths.pom_kafka_version()
        cluster._nodes = [EmbeddedNode(**n) for n in data["nodes"]]
        cluster._proxy = ProxyInfo(**data["proxy"]) if data.get("proxy") else None
        return cluster

    @classmethod
    def exists(cls, name: str = "default") -> bool:
        return (paths.state_dir() / name / STATE_FILE).exists()

    @classmethod
    def current_id(cls, name: str = "default") -> str | None:
        """The Kafka cluster id in the state file of `name`; None when there is none (stopped)."""
        state_file = paths.state_dir() / name / STATE_FILE
        try:
            return json.loads(state_file.read_text()).get("cluster_id")
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError) as exc:
            raise ClusterError(f"The state file {state_file} is unreadable ({exc}).") from exc

    # ---- addresses ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def direct_bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{n.direct_port}" for n in self._nodes)

    @property
    def proxied_bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{n.proxy_port}" for n in self._nodes)

    @property
    def proxy(self) -> ProxyInfo | None:
        return self._proxy

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self._nodes]

    def node(self, node_id: int) -> EmbeddedNode:
        for n in self._nodes:
            if n.node_id == node_id:
                return n
        raise ClusterError(f"There is no node {node_id}; this cluster has nodes {self.node_ids}.")

    def nodes(self) -> list[NodeInfo]:
        infos = []
        for n in self._nodes:
            if not pid_alive(n.pid):
                state = NodeState.DOWN
            elif pid_paused(n.pid, n.paused):
                state = NodeState.PAUSED
            else:
                state = NodeState.RUNNING
            infos.append(
                NodeInfo(
                    node_id=n.node_id,
                    state=state,
                    direct_address=f"{LOOPBACK}:{n.direct_port}",
                    proxied_address=f"{LOOPBACK}:{n.proxy_port}",
                    pid=n.pid,
                    log_file=str(n.log_file),
                )
            )
        return infos

    @property
    def kafka_version(self) -> str:
        return self._kafka_version

    def is_running(self) -> bool:
        return any(pid_alive(n.pid) for n in self._nodes)

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        """Format storage, start the proxy and the nodes, and wait until all are brokers."""
        self._refuse_if_running()
        self.clean_leftovers()
        self.on_progress("Checking Java and Kafka's jars")
        java = tools.find_java()
        classpath = jars.kafka_classpath(self._kafka_version)
        self.root.mkdir(parents=True, exist_ok=True)
        log4j = self.root / "log4j2.properties"
        log4j.write_text(_LOG4J2)

        ports = free_ports(5 * self.node_count + 1)
        self._nodes = [
            EmbeddedNode(
                node_id=i + 1,
                client_port=ports[5 * i],
                direct_port=ports[5 * i + 1],
                controller_port=ports[5 * i + 2],
                proxy_port=ports[5 * i + 3],
                dir=str(self.root / f"node-{i + 1}"),
            )
            for i in range(self.node_count)
        ]
        control_port = ports[-1]
        voters = ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in self._nodes)
        self.cluster_id = new_cluster_id()
        for n in self._nodes:
            Path(n.dir).mkdir(parents=True, exist_ok=True)
            n.properties_file.write_text(server_properties(n, voters, self.node_count))
        self._save()

        try:
            self.on_progress(f"Formatting storage of {self.node_count} KRaft node(s)")
            with ThreadPoolExecutor(max_workers=self.node_count) as pool:
                list(pool.map(lambda n: self._format(java, classpath, log4j, n), self._nodes))
            self.on_progress("Starting the fault proxy")
            self._start_proxy(control_port)
            self.on_progress(f"Starting {self.node_count} Kafka JVM(s)")
            for n in self._nodes:
                self._spawn_node(java, classpath, log4j, n)
            self._save()
            if self.owner_pid:
                self._start_watchdog()
            self.on_progress("Waiting for the brokers to register")
            self._wait_ready(set(self.node_ids), timeout)
            if self.coordinators_at_start:
                load_coordinators_at_start(self.direct_bootstrap, self.on_progress)
        except BaseException:
            self.stop()
            raise

    def _refuse_if_running(self) -> None:
        if not self.state_file.exists():
            return
        try:
            other = EmbeddedCluster.attach(self._name)
        except ClusterError:
            return
        if other.is_running():
            raise ClusterError(
                f"An embedded cluster named '{self._name}' is already running "
                f"(direct bootstrap {other.direct_bootstrap}). Use it, or stop it first with "
                "`python -m engine cluster down`."
            )

    def clean_leftovers(self) -> None:
        """Remove what a crashed earlier run left: stray processes, state and data folders."""
        if self.state_file.exists():
            try:
                old = EmbeddedCluster.attach(self._name)
                old._kill_all()
            except ClusterError:
                pass
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)

    def _format(self, java: str, classpath: str, log4j: Path, node: EmbeddedNode) -> None:
        cmd = [
            java,
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",  # a short-lived tool starts faster without C2
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            str(self.cluster_id),
            "-c",
            str(node.properties_file),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise ClusterError(
                f"Formatting node {node.node_id}'s storage failed: "
                f"{(result.stderr or result.stdout).strip()[-500:]}"
            )

    def _jvm_command(self, java: str, classpath: str, log4j: Path, node: EmbeddedNode) -> list[str]:
        return [
            java,
            "-Xms128m",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(node.properties_file),
        ]

    def _spawn_node(self, java: str, classpath: str, log4j: Path, node: EmbeddedNode) -> None:
        for port, what in (
            (node.client_port, "client"),
            (node.direct_port, "direct"),
            (node.controller_port, "controller"),
        ):
            if is_listening(port):
                raise PortInUseError(
                    f"Port {port} ({what} listener of node {node.node_id}) was taken by another "
                    "process before the node could bind it. Start the cluster again."
                )
        with node.log_file.open("ab") as log:
            proc = subprocess.Popen(
                self._jvm_command(java, classpath, log4j, node),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: signals reach only this node
                cwd=node.dir,
            )
        node.pid = proc.pid
        node.paused = False

    def _start_proxy(self, control_port: int) -> None:
        routes = [
            f"{n.node_id}:{LOOPBACK}:{n.proxy_port}:{LOOPBACK}:{n.client_port}" for n in self._nodes
        ]
        self._proxy = start_proxy_process(
            route_args(routes), control_port, self.root, owner_pid=self.owner_pid
        )
        self._save()

    def _start_watchdog(self) -> None:
        """Guard against an owner that dies without stopping its cluster (see watchdog.py)."""
        env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)}
        cmd = [
            sys.executable,
            "-m",
            "engine.cluster.watchdog",
            "--owner",
            str(self.owner_pid),
            "--cluster",
            self._name,
            "--cluster-id",
            str(self.cluster_id),
        ]
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )

    def _wait_ready(self, expected: set[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self._nodes:
                if n.node_id in expected and not pid_alive(n.pid):
                    raise self._node_died(n)
            remaining = deadline - time.monotonic()
            try:
                admin.wait_for_brokers(self.direct_bootstrap, expected, timeout=min(3.0, remaining))
                break
            except TimeoutError:
                continue
        else:
            raise ClusterError(
                f"The cluster did not become ready within {timeout:.0f}s. Node logs are in "
                f"{self.root}/node-*/server.log."
            )
        # The proxied path must work too: clients under test only ever use it.
        remaining = max(5.0, deadline - time.monotonic())
        try:
            admin.wait_for_brokers(self.proxied_bootstrap, expected, timeout=remaining)
        except TimeoutError as exc:
            raise ClusterError(
                f"The brokers are up but not reachable through the fault proxy ({exc}). "
                f"See {self.root}/proxy.log."
            ) from exc

    def _node_died(self, node: EmbeddedNode) -> ClusterError:
        tail = ""
        if node.log_file.exists():
            lines = node.log_file.read_text(errors="replace").splitlines()
            errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
            tail = (errors or lines)[-1][-400:] if (errors or lines) else ""
        if "Address already in use" in tail:
            return PortInUseError(
                f"Node {node.node_id} could not bind its port: another process took it. Start "
                "the cluster again; fresh ports are chosen every time."
            )
        return ClusterError(
            f"Node {node.node_id} exited during start-up. Last error: {tail or 'none logged'}. "
            f"Full log: {node.log_file}"
        )

    def stop(self) -> None:
        """Kill every process of the cluster and delete its data; node logs are kept."""
        self._kill_all()
        for n in self._nodes:
            shutil.rmtree(n.data_dir, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    def _kill_all(self) -> None:
        pids = [n.pid for n in self._nodes if n.pid]
        if self._proxy and self._proxy.pid:
            pids.append(self._proxy.pid)
        for pid in pids:
            # The data is thrown away, so there is nothing for a clean shutdown to save.
            _signal_group(pid, signal.SIGKILL)
        for pid in pids:
            _wait_gone(pid, timeout=10)

    # ---- broker faults -----------------------------------------------------------------
    def kill_node(self, node_id: int) -> None:
        """SIGKILL a node: no clean shutdown, no goodbye to the controller."""
        node = self.node(node_id)
        if node.pid and pid_alive(node.pid):
            _signal_group(node.pid, signal.SIGKILL)
            _wait_gone(node.pid, timeout=10)
        node.paused = False
        self._save()

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """SIGTERM a node and wait for it to exit: a controlled shutdown, as a rolling restart
        does. The broker asks the controller to move its partitions' leadership away first."""
        node = self.node(node_id)
        if node.pid and pid_alive(node.pid):
            _signal_group(node.pid, signal.SIGTERM)
            if not _wait_gone(node.pid, timeout=timeout):
                raise ClusterError(
                    f"Node {node_id} did not finish its clean shutdown within {timeout:.0f}s. "
                    f"Its log: {node.log_file}"
                )
        node.paused = False
        self._save()

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP a node: it keeps its sockets open but answers nothing (a zombie broker)."""
        node = self._require_alive(node_id)
        _signal_group(node.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        node.paused = True
        self._save()
        # Signals are delivered asynchronously; report "paused" only once the kernel says so.
        _wait_for_state(node.pid, paused=True)

    def resume_node(self, node_id: int) -> None:
        node = self._require_alive(node_id)
        _signal_group(node.pid, signal.SIGCONT)  # type: ignore[arg-type]
        node.paused = False
        self._save()
        _wait_for_state(node.pid, paused=False)

    def restart_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a node again on its old data and ports (killing it first if it runs)."""
        node = self.node(node_id)
        if node.pid and pid_alive(node.pid):
            self.kill_node(node_id)
        java = tools.find_java()
        log4j = self.root / "log4j2.properties"
        self._spawn_node(java, jars.kafka_classpath(self._kafka_version), log4j, node)
        self._save()
        started = time.monotonic()
        self._wait_ready({node_id}, timeout)
        # The others' metadata may still list the node from before its death (with the
        # metadata quorum down they cannot learn otherwise): ready is when it answers itself.
        try:
            admin.wait_for_brokers(
                f"{LOOPBACK}:{node.direct_port}",
                {node_id},
                timeout=max(5.0, timeout - (time.monotonic() - started)),
            )
        except TimeoutError as exc:
            raise ClusterError(
                f"Node {node_id} did not answer on its own port after its restart ({exc}). "
                f"Its log: {node.log_file}"
            ) from exc

    def wipe_partition(self, node_id: int, topic: str, partition: int) -> None:
        """Delete the partition's directory on a node that is down, as a lost disk would.

        The node's other data (its metadata log, meta.properties) stays, so it comes back as
        the same broker with no copy of this partition.
        """
        node = self.node(node_id)
        if node.pid and pid_alive(node.pid):
            raise ClusterError(
                f"Node {node_id} is running; its data can only be wiped while it is down."
            )
        shutil.rmtree(node.data_dir / f"{topic}-{partition}", ignore_errors=True)

    def node_log_since(self, node_id: int, since: float) -> list[str]:
        """Lines of the node's server.log stamped at or after `since` (log4j's local time)."""
        path = self.node(node_id).log_file
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return log_lines_since(lines, since)

    def _require_alive(self, node_id: int) -> EmbeddedNode:
        node = self.node(node_id)
        if not pid_alive(node.pid):
            raise ClusterError(f"Node {node_id} is down; restart it first.")
        return node
