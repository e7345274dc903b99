"""The proxy's rewrite mode in front of a cluster that advertises its own addresses.

cluster1's DIRECT listener stands in for an external cluster: its brokers advertise the DIRECT
address, never a proxy. A proxy started with --bootstrap-upstream must rewrite every address
the clients learn, so all their traffic (and so every fault) goes through it.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from engine.base import tools
from engine.kafka import admin, jars
from engine.proxy.control import ProxyControl, read_events
from tests.kafkatools import kcat_values, produce_one_by_one, read_all, unique

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
MESSAGES = [f"payment-{i:02d}" for i in range(10)]


@dataclass
class ExternalProxy:
    proc: subprocess.Popen
    bootstrap: str
    control: ProxyControl
    events: Path

    def listen_ports(self) -> set[int]:
        status = self.control.status()
        ports = {int(n["listen"].rsplit(":", 1)[1]) for n in status["nodes"].values()}
        return ports | {int(status["bootstrap"]["listen"].rsplit(":", 1)[1])}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode


def start_proxy(upstream: str, events: Path) -> ExternalProxy:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.proxy",
            "--bootstrap-upstream",
            upstream,
            "--listen-host",
            "127.0.0.1",
            "--control",
            "127.0.0.1:0",
            "--events",
            str(events),
            "--parent-pid",
            str(os.getpid()),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise RuntimeError(f"the proxy exited with {proc.returncode} before it was ready")
    ready = json.loads(line)
    host, port = ready["control"].rsplit(":", 1)
    control = ProxyControl(host, int(port), timeout=10.0)
    control.wait_ready(20)
    assert ready["mode"] == "rewrite" and ready["nodes"] == {}
    return ExternalProxy(proc, ready["bootstrap"], control, events)


@pytest.fixture(scope="module")
def external(cluster1, tmp_path_factory) -> Iterator[ExternalProxy]:
    events = tmp_path_factory.mktemp("external-proxy") / "events.jsonl"
    proxy = start_proxy(cluster1.direct_bootstrap, events)
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def ext(external: ExternalProxy) -> Iterator[ExternalProxy]:
    external.control.clear()
    yield external
    external.control.clear()


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def remote_ports_of_this_process() -> set[int]:
    """Remote ports of this process's established TCP sockets (Linux /proc)."""
    gc.collect()  # clients of earlier tests that are garbage by now close their sockets
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in lines:
            cols = row.split()
            if cols[3] == "01" and cols[9] in inodes:  # 01: ESTABLISHED
                ports.add(int(cols[2].rsplit(":", 1)[1], 16))
    return ports


def direct_ports(cluster) -> set[int]:
    return {port_of(a) for a in cluster.direct_bootstrap.split(",")}


# -- (a) metadata names only the proxy ---------------------------------------------------------


def test_metadata_through_the_proxy_names_only_proxy_addresses(cluster1, ext):
    since = time.time() - 1
    client = AdminClient({"bootstrap.servers": ext.bootstrap})
    meta = client.list_topics(timeout=20)
    brokers = {b.id: (b.host, b.port) for b in meta.brokers.values()}
    assert set(brokers) == set(cluster1.node_ids)
    status = ext.control.status()
    for node, (host, port) in brokers.items():
        assert host == "127.0.0.1"
        assert f"{host}:{port}" == status["nodes"][str(node)]["advertised"]
        assert status["nodes"][str(node)]["upstream"] in cluster1.direct_bootstrap.split(",")
    assert not {p for _, p in brokers.values()} & direct_ports(cluster1)
    # DescribeCluster (librdkafka's describe_cluster) is rewritten as well.
    described = client.describe_cluster(request_timeout=20).result(30)
    assert {(n.id, n.host, n.port) for n in described.nodes} == {
        (n, h, p) for n, (h, p) in brokers.items()
    }
    # Every connection this client made goes to a proxy listener.
    remote = remote_ports_of_this_process()
    assert remote & ext.listen_ports(), "the client is connected through the proxy"
    assert not remote & direct_ports(cluster1)
    found = [e for e in read_events(ext.events) if e["kind"] == "broker_discovered"]
    assert sorted(e["node"] for e in found) == sorted(cluster1.node_ids)
    assert all(e["upstream"] in cluster1.direct_bootstrap.split(",") for e in found)
    assert not [e for e in read_events(ext.events, since) if e["kind"] == "rewrite_failed"]


# -- (b) produce and consume (with a consumer group) through the proxy --------------------------


def test_produce_and_group_consume_through_the_proxy(cluster1, ext):
    topic = unique("external")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    producer = Producer({"bootstrap.servers": ext.bootstrap, "acks": "all", "linger.ms": 0})
    for m in MESSAGES:
        producer.produce(topic, m.encode())
    assert producer.flush(30) == 0
    group = unique("group")
    consumer = Consumer(
        {
            "bootstrap.servers": ext.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < len(MESSAGES) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value().decode())
        assert got == MESSAGES
        # The group coordinator (found with FindCoordinator) was reached through the proxy.
        committed = consumer.commit(asynchronous=False)
        assert committed and committed[0].offset == len(MESSAGES)
        assert not remote_ports_of_this_process() & direct_ports(cluster1)
    finally:
        consumer.close()
        producer.flush(5)
    status = ext.control.status()
    assert all(n["connections_accepted"] > 0 for n in status["nodes"].values())
    assert status["bootstrap"]["connections_accepted"] > 0
    stored = read_all(cluster1.direct_bootstrap, topic)
    assert stored == [(0, i, m.encode()) for i, m in enumerate(MESSAGES)]


def run_java_tool(main_class: str, *args: str, stdin: str | None = None) -> str:
    """Run one of Kafka 4.1's command-line tools (the Java client) and return its stdout."""
    out = subprocess.run(
        [tools.find_java(), "-cp", jars.kafka_classpath(), main_class, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout


def test_java_client_through_the_proxy(cluster1, ext):
    """The Java client 4.1 uses Metadata v13, FindCoordinator v6 and DescribeCluster v2."""
    topic = unique("ext-java")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    since = time.time()
    endpoints = run_java_tool(
        "org.apache.kafka.tools.ClusterTool", "list-endpoints", "--bootstrap-server", ext.bootstrap
    )
    status = ext.control.status()
    for node in cluster1.node_ids:
        host, port = status["nodes"][str(node)]["advertised"].rsplit(":", 1)
        assert any(line.split()[:3] == [str(node), host, port] for line in endpoints.splitlines())
    assert not any(str(p) in endpoints for p in direct_ports(cluster1))
    run_java_tool(
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        ext.bootstrap,
        "--topic",
        topic,
        stdin="".join(f"{m}\n" for m in MESSAGES[:3]),
    )
    consumed = run_java_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        ext.bootstrap,
        "--topic",
        topic,
        "--group",
        unique("java-group"),
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "60000",
    )
    assert consumed.split() == MESSAGES[:3]
    assert not [e for e in read_events(ext.events, since) if e["kind"] == "rewrite_failed"]
    assert [v for _, _, v in read_all(cluster1.direct_bootstrap, topic)] == [
        m.encode() for m in MESSAGES[:3]
    ]


# -- (c) a dropped Produce response ------------------------------------------------------------


def run_with_dropped_ack(cluster, ext: ExternalProxy, *, idempotent: bool) -> list[str]:
    topic = unique("ext-ackloss")
    admin.create_topic(cluster.direct_bootstrap, topic)
    client_id = unique("ext-producer")
    since = time.time()
    # The 3rd Produce request from this client is appended, but its response never arrives.
    ext.control.drop_produce_responses(nth=3, client_id_prefix=client_id, after="reset")
    conf = {
        "client.id": client_id,
        "acks": "all",
        "enable.idempotence": idempotent,
        "retries": 5,
        "retry.backoff.ms": 100,
        "max.in.flight.requests.per.connection": 1,
    }
    outcomes = produce_one_by_one(ext.bootstrap, topic, MESSAGES, conf)
    assert outcomes == ["ok"] * len(MESSAGES), "every message is acknowledged in the end"
    drops = [
        e
        for e in read_events(ext.events, since_ts=since)
        if e["kind"] == "produce_response_dropped" and e.get("client_id") == client_id
    ]
    assert len(drops) == 1
    assert drops[0]["node"] in cluster.node_ids, "dropped on a broker's own connection"
    stored = [v.decode() for _, _, v in read_all(cluster.direct_bootstrap, topic)]
    assert kcat_values(cluster.direct_bootstrap, topic) == stored
    return stored


def test_dropped_ack_without_idempotence_makes_one_duplicate(cluster1, ext):
    stored = run_with_dropped_ack(cluster1, ext, idempotent=False)
    counts = Counter(stored)
    assert len(stored) == len(MESSAGES) + 1
    assert counts["payment-02"] == 2
    assert all(counts[m] == 1 for m in MESSAGES if m != "payment-02")


def test_dropped_ack_with_idempotence_makes_none(cluster1, ext):
    assert run_with_dropped_ack(cluster1, ext, idempotent=True) == MESSAGES


# -- latency, blackhole and reset act on the discovered nodes ----------------------------------


def test_latency_blackhole_and_reset_on_discovered_nodes(cluster1, ext):
    topic = unique("ext-faults")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    leader = admin.partition_leader(cluster1.direct_bootstrap, topic, 0)
    producer = Producer({"bootstrap.servers": ext.bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    assert producer.flush(30) == 0

    ext.control.set_latency(400, node=leader)
    began = time.monotonic()
    producer.produce(topic, b"slow")
    assert producer.flush(30) == 0
    assert time.monotonic() - began >= 0.8, "400 ms each way on the leader's connection"
    ext.control.set_latency(0, node=leader)

    since = time.time()
    ext.control.blackhole(2.0, node=leader)
    began = time.monotonic()
    producer.produce(topic, b"through")
    assert producer.flush(30) == 0
    assert time.monotonic() - began >= 1.5

    assert ext.control.reset_connections(node=leader) >= 1
    producer.produce(topic, b"after-reset")
    assert producer.flush(30) == 0
    events = read_events(ext.events, since_ts=since)
    assert {"blackhole_start", "blackhole_end", "connection_reset"} <= {e["kind"] for e in events}
    assert all(e["node"] == leader for e in events if e["kind"] == "connection_reset")
    values = [v for _, _, v in read_all(cluster1.direct_bootstrap, topic)]
    assert values == [b"warm-up", b"slow", b"through", b"after-reset"]


# -- (d) SIGTERM -------------------------------------------------------------------------------


def test_proxy_process_exits_on_sigterm(cluster1, tmp_path):
    proxy = start_proxy(cluster1.direct_bootstrap, tmp_path / "events.jsonl")
    try:
        client = AdminClient({"bootstrap.servers": proxy.bootstrap})
        assert client.list_topics(timeout=20).brokers  # listeners and connections are open
        assert proxy.control.status()["nodes"]
        assert proxy.stop() == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port_of(proxy.bootstrap)), timeout=2).close()
    finally:
        if proxy.proc.poll() is None:
            proxy.proc.kill()
            proxy.proc.wait()
