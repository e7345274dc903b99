"""Shared fixtures: real Kafka clusters started by the test session itself.

Every test session gets its own state folder, so the tests never touch a cluster that a
person started with `python -m engine cluster up`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="lab-tests-"))
os.environ.setdefault("LAB_STATE_DIR", str(_SESSION_DIR / "state"))
os.environ.setdefault("LAB_RUNS_DIR", str(_SESSION_DIR / "runs"))
# AppTest runs app.py in this process: only the Metrics page's tests should start Spark.
os.environ.setdefault("LAB_SPARK_AUTOSTART", "0")
# AppTest leaves server.address unset, which is Streamlit's "every interface", a room; the
# pages are tested as `./lab dashboard` serves them by default, on loopback (the room's own
# tests bind 0.0.0.0 themselves).
from streamlit import config  # noqa: E402

config.set_option("server.address", "127.0.0.1")


@pytest.fixture(scope="session")
def cluster1() -> Iterator:
    """A 1-node embedded cluster shared by the whole session."""
    from engine.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster("test-1node", node_count=1)
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster3() -> Iterator:
    """A 3-node embedded cluster; tests that hurt a node bring it back before they end."""
    from engine.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster("test-3node", node_count=3)
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def docker_env() -> Iterator:
    """A Docker engine with Compose: the machine's own, or a dockerd this session starts.

    Skipped, with the reason, where none answers and none can be started (not root, no
    docker.io); under CI (CI set) that is a failure, since CI must run the Docker tests.
    """
    from engine.base.errors import LabError
    from engine.cluster.docker_backend import compose_command
    from tests.dockerenv import open_docker_env

    env, why = open_docker_env()
    if env is not None:
        try:
            compose_command()
        except LabError as exc:
            env.close()
            env, why = None, str(exc)
    if env is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the Docker tests, but {why}")
        pytest.skip(str(why))
    try:
        yield env
    finally:
        env.close()


@pytest.fixture
def proxy(cluster1):
    """The 1-node cluster's fault proxy, cleared before and after each test."""
    control = cluster1.proxy_control()
    control.clear()
    yield control
    control.clear()
