"""Clear, actionable errors for a missing Java or Maven, a busy port, no running cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from engine.base import paths, tools
from engine.base.errors import ClusterError, MissingToolError, PortInUseError
from engine.cluster import make_cluster
from engine.cluster.embedded import EmbeddedNode, server_properties
from engine.cluster.ports import require_free
from engine.kafka import jars


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("garbage", None),
    ],
)
def test_parse_java_version(text, major):
    assert tools.parse_java_version(text) == major


def test_missing_java_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    hint = r"Java was not found.*Install a JDK 17, 21 or 25.*default-jdk-headless"
    with pytest.raises(MissingToolError, match=hint):
        tools.find_java()


def test_old_java_is_refused_with_the_version_found(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(MissingToolError, match=r"Java 8 was found.*needs Java 17 or newer"):
        tools.find_java()


def test_missing_maven_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))  # no jars cached here
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MissingToolError, match=r"Maven is needed once.*Install Maven"):
        jars.ensure_kafka_jars()


def test_cli_reports_a_missing_java_in_one_line_without_traceback(tmp_path):
    env = {**os.environ, "PATH": "/nonexistent", "LAB_CACHE_DIR": str(tmp_path)}
    env.pop("JAVA_HOME", None)
    result = subprocess.run(
        [sys.executable, "-m", "engine", "setup"],
        capture_output=True,
        text=True,
        env=env,
        cwd=paths.REPO_ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: Java was not found")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_busy_port_is_named():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(PortInUseError, match=rf"Port {port} .*already in use"):
            require_free(port, "dashboard")


def test_unknown_backend_and_node_count_are_refused():
    with pytest.raises(ClusterError, match="Unknown backend 'kubernetes'"):
        make_cluster("kubernetes")
    with pytest.raises(ClusterError, match="1 or 3 nodes"):
        make_cluster("local", nodes=2)
    with pytest.raises(ClusterError, match="needs --bootstrap"):
        make_cluster("external")


def test_cli_status_without_cluster(tmp_path):
    env = {**os.environ, "LAB_STATE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "engine", "cluster", "status"],
        capture_output=True,
        text=True,
        env=env,
        cwd=paths.REPO_ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert "No cluster is running. Start one with `python -m engine cluster up`." in result.stderr


def test_three_node_properties_replicate_internal_topics():
    node = EmbeddedNode(2, 1, 2, 3, 4, "/tmp/x")
    props = server_properties(node, "1@127.0.0.1:3,2@127.0.0.1:3,3@127.0.0.1:3", 3)
    assert "offsets.topic.replication.factor=3\n" in props
    assert "transaction.state.log.replication.factor=3\n" in props
    assert "transaction.state.log.min.isr=2\n" in props
    assert "advertised.listeners=CLIENT://127.0.0.1:4,DIRECT://127.0.0.1:2\n" in props
    single = server_properties(node, "2@127.0.0.1:3", 1)
    assert "transaction.state.log.min.isr=1\n" in single


def test_cluster_ids_are_22_chars_and_never_look_like_an_option():
    from engine.cluster.embedded import new_cluster_id

    ids = {new_cluster_id() for _ in range(5000)}
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_docker_backend_refuses_a_node_count_it_cannot_run():
    # docker-compose.yml has three brokers; asked for one, the backend says so (no engine needed).
    with pytest.raises(ClusterError) as caught:
        make_cluster("docker", nodes=1)
    assert str(caught.value) == (
        "The docker backend runs the 3 nodes of docker-compose.yml, not 1; use --nodes 3, or "
        "the local backend for 1."
    )


def test_cli_refuses_docker_with_one_node_in_one_line(tmp_path):
    env = {**os.environ, "LAB_STATE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "engine", "cluster", "up", "--backend", "docker", "--nodes", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=paths.REPO_ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: The docker backend runs the 3 nodes of docker-compose.yml, not 1; use --nodes "
        "3, or the local backend for 1."
    ]
    assert "Starting" not in result.stderr


@pytest.mark.parametrize(("answered", "lines"), [(True, 1), (False, 2)])
def test_coordinators_that_do_not_answer_at_the_start_are_said(monkeypatch, answered, lines):
    """The start goes on either way; when Kafka's coordinators did not answer in time, the
    progress says that the first run will wait for them (the contrast: they answered)."""
    from engine.cluster import base

    asked: list[tuple[str, float]] = []

    def load(bootstrap: str, timeout: float) -> bool:
        asked.append((bootstrap, timeout))
        return answered

    monkeypatch.setattr(base.admin, "load_coordinators", load)
    steps: list[str] = []
    assert base.load_coordinators_at_start("127.0.0.1:9", steps.append, timeout=7) is answered
    assert asked == [("127.0.0.1:9", 7)]
    assert len(steps) == lines
    assert steps[0] == "Loading the group and transaction coordinators"
    if not answered:
        assert steps[1] == (
            "The group and transaction coordinators did not answer within 7 s; "
            "the first run will wait for them"
        )
