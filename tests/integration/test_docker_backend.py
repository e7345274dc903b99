"""The docker backend against a real Docker engine: the compose cluster, hurt and healed.

The engine is the machine's own, or a dockerd the session starts (tests/dockerenv.py); the
brokers' image is apache/kafka, or the stand-in built from the pinned jars where it cannot
be pulled. The fixed host ports 1909N, 2909N and 2919N must be free. One cluster serves the
module; its teardown checks that `cluster down` leaves nothing of the compose project.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from engine.cluster.base import NodeState
from engine.kafka import admin
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.dockerenv import project_leftovers
from tests.integration.file_promises import assert_counts_match_kcat

SCENARIOS = list_scenarios()

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(docker_env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from engine.cluster import docker_backend as db

    docker_env.require("kafka")
    with pytest.MonkeyPatch.context() as mp:
        # A state dir of its own, so the test never meets (or removes) a user's cluster state.
        mp.setenv("LAB_STATE_DIR", str(tmp_path_factory.mktemp("lab-state")))
        for var in (db.ENV_UPSTREAMS, db.ENV_DIRECT, db.ENV_LISTEN_HOST):
            mp.delenv(var, raising=False)
        c = db.DockerCluster(owner_pid=os.getpid())
        # Each step of the start timed on its own (from its progress line to the next):
        # docs/backends.md quotes them, the coordinators' step among them.
        steps: list[tuple[str, float]] = []
        c.on_progress = lambda step: steps.append((step, time.monotonic()))
        began = time.monotonic()
        c.start(timeout=300)
        ended = time.monotonic()
        docker_env.timed("DockerCluster.start (3 brokers ready)", ended - began)
        for (step, at), (_, until) in zip(steps, [*steps[1:], ("", ended)], strict=True):
            docker_env.timed(f"DockerCluster.start step: {step}", until - at)
        try:
            yield c
        finally:
            c.stop()
            assert all(n.state == NodeState.DOWN for n in c.nodes())
            assert not Path(c.state_file).exists()
            assert project_leftovers(docker_env.client) == []


def _roundtrip(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Produce `count` messages with acks=all and read them back, all through `bootstrap`."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"m{i}".encode())
    assert producer.flush(60) == 0, "messages left unsent"

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"it-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _wait_state(c, node_id: int, state: NodeState, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if {n.node_id: n.state for n in c.nodes()}[node_id] == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"node {node_id} did not become {state} within {timeout}s")


def test_all_nodes_run_behind_the_proxy(cluster) -> None:
    assert [n.state for n in cluster.nodes()] == [NodeState.RUNNING] * 3
    proxied = admin.describe(cluster.proxied_bootstrap)
    # Metadata read through the proxy names the proxy's ports, so clients never bypass it.
    assert proxied.brokers == {n: f"127.0.0.1:{19090 + n}" for n in (1, 2, 3)}
    direct = admin.describe(cluster.direct_bootstrap)
    assert direct.brokers == {n: f"127.0.0.1:{29190 + n}" for n in (1, 2, 3)}
    assert cluster.proxy_control().ping()


def test_produce_and_consume_through_the_proxy(cluster) -> None:
    topic = f"it-roundtrip-{uuid.uuid4().hex[:8]}"
    admin.create_topic(
        cluster.direct_bootstrap, topic, replication=3, config={"min.insync.replicas": "2"}
    )
    assert sorted(_roundtrip(cluster.proxied_bootstrap, topic, 20)) == sorted(
        f"m{i}".encode() for i in range(20)
    )


def test_kill_and_restart_a_broker(cluster) -> None:
    topic = f"it-kill-{uuid.uuid4().hex[:8]}"
    admin.create_topic(
        cluster.direct_bootstrap, topic, replication=3, config={"min.insync.replicas": "2"}
    )
    victim = cluster.leader_of(topic)
    assert victim in (1, 2, 3)
    cluster.kill_node(victim)
    _wait_state(cluster, victim, NodeState.DOWN)

    # RF 3, min ISR 2: the two survivors elect a new leader and keep accepting acks=all.
    deadline = time.monotonic() + 60
    while cluster.leader_of(topic) in (victim, -1) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.leader_of(topic) not in (victim, -1)
    assert len(_roundtrip(cluster.proxied_bootstrap, topic, 10)) == 10

    cluster.restart_node(victim, timeout=120)
    assert {n.node_id: n.state for n in cluster.nodes()}[victim] == NodeState.RUNNING
    assert victim in admin.describe(cluster.direct_bootstrap).brokers


def test_pause_and_resume_a_broker(cluster) -> None:
    cluster.pause_node(3)
    _wait_state(cluster, 3, NodeState.PAUSED)
    # A frozen broker stops heartbeating; after broker.session.timeout.ms (6 s) it is fenced
    # and leaves the metadata. (A read may pick the frozen node and time out: try again.)
    fenced = False
    deadline = time.monotonic() + 30
    while not fenced and time.monotonic() < deadline:
        view = admin.try_describe(cluster.direct_bootstrap)
        fenced = view is not None and 3 not in view.brokers
        time.sleep(0.5)
    assert fenced, "the paused node was never fenced"

    cluster.resume_node(3)
    _wait_state(cluster, 3, NodeState.RUNNING)
    admin.wait_for_brokers(cluster.direct_bootstrap, {1, 2, 3}, timeout=60)


# ---- what the lab does on the three containers ----------------------------------------------
@pytest.fixture(scope="module")
def postgres_container(docker_env, cluster) -> Iterator[str]:
    """docker-compose.yml's postgres service (official image or Debian stand-in): its DSN."""
    import psycopg

    docker_env.require("postgres")
    cluster._compose(["up", "-d", "postgres"], timeout=600)
    dsn = "postgresql://lab:lab-dev-only@127.0.0.1:25432/lab"  # the compose file's defaults
    deadline = time.monotonic() + 90
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    try:
        yield dsn
    finally:
        cluster._compose(["rm", "--stop", "--force", "-v", "postgres"], timeout=120)


def test_ack_loss_counts_equal_kcats_with_postgres_in_a_container(
    cluster, postgres_container, monkeypatch
) -> None:
    monkeypatch.setenv("LAB_DEDUP_DSN", postgres_container)
    scenario = load_scenario(SCENARIOS["ack-loss"])
    output = run_scenario(scenario, cluster, source_text=SCENARIOS["ack-loss"].read_text())
    assert set(output["results"]) == set(scenario.levels) and "not_run" not in output
    assert not scenario.unmet_expectations(output["results"])
    assert output["results"]["idempotency-key"]["effect_store"] == "postgres"
    assert_counts_match_kcat(cluster, scenario, output)


def test_broker_failover_keeps_its_promises_through_the_docker_sdk(cluster) -> None:
    # pause-follower (cgroup freezer), kill-leader (SIGKILL), resume, restart: each a
    # Docker SDK call on a broker container, as the embedded cluster's are signals; the
    # four levels at once, their partitions on the same two containers.
    scenario = load_scenario(SCENARIOS["broker-failover"])
    output = run_scenario(scenario, cluster, source_text=SCENARIOS["broker-failover"].read_text())
    assert not scenario.unmet_expectations(output["results"]), output["results"]
    kinds = {f["kind"] for r in output["results"].values() for f in r["faults"]}
    assert {"pause-follower", "kill-leader", "resume-nodes", "restart-nodes"} <= kinds
    assert_counts_match_kcat(cluster, scenario, output)
    assert [n.state for n in cluster.nodes()] == [NodeState.RUNNING] * 3


def test_the_batches_view_dumps_a_segment_inside_a_broker_container(cluster) -> None:
    from engine import logs

    topic = f"it-dump-{uuid.uuid4().hex[:8]}"
    admin.create_topic(cluster.direct_bootstrap, topic, replication=3)
    producer = Producer({"bootstrap.servers": cluster.direct_bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush(30)  # one batch each
    dump = logs.dump_log(cluster, topic)
    assert dump.log_dir == f"/var/lib/kafka/data/{topic}-0"  # a path inside the container
    assert dump.files == [f"{dump.log_dir}/00000000000000000000.log"]
    assert [(b.base_offset, b.last_offset) for b in dump.batches] == [(i, i) for i in range(5)]
    assert [r.payload for b in dump.batches for r in b.records] == [f"v{i}" for i in range(5)]
    # Every replica's copy, read in its own container, holds the same batches.
    for node in (1, 2, 3):
        copy = logs.dump_log(cluster, topic, node_id=node)
        assert [b.base_offset for b in copy.batches] == list(range(5))


def test_a_container_stopped_from_outside_shows_as_down_in_the_sidebar(
    cluster, docker_env, monkeypatch
) -> None:
    from streamlit.testing.v1 import AppTest

    from engine.base import paths
    from pages._shared import cluster_service

    name = cluster.container(2).name
    docker_env.client.containers.get(name).stop(timeout=5)  # as `docker stop` would
    _wait_state(cluster, 2, NodeState.DOWN)
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "docker", "name": cluster.name}))
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    cluster_service.clear()  # a new server process: it adopts the running docker cluster
    try:
        at = AppTest.from_file(str(paths.REPO_ROOT / "app.py"), default_timeout=60).run()
        assert not at.exception
        text = "\n".join(m.value for m in at.markdown)
        assert "node 2: down" in text
        assert "node 1: running" in text and "node 3: running" in text
        assert any("docker" in c.value for c in at.caption)
    finally:
        cluster_service.clear()
        pointer.unlink(missing_ok=True)
    cluster.restart_node(2, timeout=120)
    assert [n.state for n in cluster.nodes()] == [NodeState.RUNNING] * 3


def test_an_engine_without_the_image_says_in_one_line_how_to_get_it(cluster, monkeypatch) -> None:
    from engine.base.errors import MissingImageError

    missing = f"kafka-failure-lab/no-such-image:{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LAB_KAFKA_IMAGE", missing)
    with pytest.raises(MissingImageError) as caught:
        cluster.require_image()  # what start() asks before `docker compose up`
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(f"The Docker engine has no image {missing} and could not pull it")
    assert f"`docker pull {missing}`" in message and "`./lab images`" in message
