"""Kafka's version as a setting: LAB_KAFKA_VERSION or `--kafka-version`, checked, given to
Maven, remembered by each cluster, and refused where a running cluster has another.

No Kafka and no network here: Maven is a fake that records its arguments, clusters are
state files and stand-ins.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.base import paths, tools
from engine.base.errors import ClusterError, KafkaFetchError, KafkaVersionError
from engine.cluster import require_same_version
from engine.cluster.embedded import EmbeddedCluster
from engine.cluster.service import ClusterService
from engine.commands import cli
from engine.kafka import jars
from engine.proc import java_roles

VAR = "LAB_KAFKA_VERSION"


@pytest.fixture
def no_version(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    # Set first, so that monkeypatch restores "unset" after a test whose code (the CLI)
    # wrote os.environ itself.
    monkeypatch.setenv(VAR, "")
    monkeypatch.delenv(VAR)
    return monkeypatch


def test_unset_or_empty_is_the_poms_version(no_version: pytest.MonkeyPatch) -> None:
    assert paths.kafka_version() == paths.pom_kafka_version() == "4.4.0"
    no_version.setenv(VAR, "")
    assert paths.kafka_version() == paths.pom_kafka_version()


def test_a_set_version_is_read_each_time_not_cached(no_version: pytest.MonkeyPatch) -> None:
    no_version.setenv(VAR, "4.1.2")
    assert paths.kafka_version() == "4.1.2"
    no_version.setenv(VAR, " 4.2.0 ")  # as a shell might leave it
    assert paths.kafka_version() == "4.2.0"
    assert paths.kafka_libs_dir() == paths.cache_dir() / "kafka" / "4.2.0" / "libs"
    assert java_roles.builds_dir() == paths.cache_dir() / "java-roles" / "4.2.0"


@pytest.mark.parametrize("text", ["4.4", "4.4.0.1", "v4.4.0", "4.4.0-rc1", "latest", "4.x.0"])
def test_anything_but_a_release_number_is_refused(text: str) -> None:
    with pytest.raises(KafkaVersionError) as caught:
        paths.check_kafka_version(text)
    message = str(caught.value)
    assert message.startswith(f"LAB_KAFKA_VERSION={text!r} is not a Kafka release")
    assert "like 4.4.0" in message and f"unset it for {paths.pom_kafka_version()}" in message


@pytest.mark.parametrize("text", ["3.9.1", "2.8.0", "0.11.0"])
def test_a_release_before_4_0_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(KafkaVersionError) as caught:
        paths.check_kafka_version(text, "--kafka-version")
    message = str(caught.value)
    assert message.startswith(f"--kafka-version={text}: the lab runs Kafka 4.0 or newer")
    assert "Log4j 2" in message and "KIP-653" in message and "4.0.0 or newer" in message


@pytest.mark.parametrize("text", ["4.0.0", "4.1.2", "4.4.0", "5.0.0", "10.12.3"])
def test_releases_from_4_0_are_accepted(text: str) -> None:
    assert paths.check_kafka_version(text) == text


def test_the_flag_sets_the_variable_for_the_command_and_what_it_starts(
    no_version: pytest.MonkeyPatch,
) -> None:
    argv = ["run", "scenarios/ack-loss.yaml", "--kafka-version", "4.1.2"]
    args = cli.build_parser().parse_args(argv)
    cli.apply_kafka_version(args)
    assert os.environ[VAR] == "4.1.2" and paths.kafka_version() == "4.1.2"
    for argv in (
        ["dashboard", "--kafka-version", "4.3.0"],
        ["cluster", "up", "--kafka-version", "4.3.0"],
        ["setup", "--kafka-version", "4.3.0"],
        ["preflight", "--kafka-version", "4.3.0"],
    ):
        assert cli.build_parser().parse_args(argv).kafka_version == "4.3.0", argv


def test_without_the_flag_the_variable_stays_and_is_checked(
    no_version: pytest.MonkeyPatch,
) -> None:
    no_version.setenv(VAR, "4.2.0")
    cli.apply_kafka_version(cli.build_parser().parse_args(["cluster", "up"]))
    assert os.environ[VAR] == "4.2.0"
    no_version.setenv(VAR, "4.2")
    with pytest.raises(KafkaVersionError, match=re.escape("LAB_KAFKA_VERSION='4.2'")):
        cli.apply_kafka_version(cli.build_parser().parse_args(["cluster", "up"]))
    # A command that starts nothing does not care: `runs` lists recorded runs of any version.
    cli.apply_kafka_version(cli.build_parser().parse_args(["runs"]))


def test_a_bad_flag_leaves_the_environment_alone(no_version: pytest.MonkeyPatch) -> None:
    args = cli.build_parser().parse_args(["cluster", "up", "--kafka-version", "3.9.1"])
    with pytest.raises(KafkaVersionError, match=re.escape("--kafka-version=3.9.1")):
        cli.apply_kafka_version(args)
    assert VAR not in os.environ


def fake_mvn(tmp_path: Path) -> Path:
    """An `mvn` that records its arguments and copies nothing (so the fetch fails after)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/mvn-calls"\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_maven_is_given_the_version_for_kafkas_jars_and_the_java_roles(
    tmp_path: Path, no_version: pytest.MonkeyPatch
) -> None:
    no_version.setenv("PATH", f"{fake_mvn(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    no_version.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    no_version.setenv(VAR, "4.1.2")
    no_version.setattr(tools, "find_java", lambda: "java")
    with pytest.raises(KafkaFetchError, match=re.escape("holds no kafka_2.13-4.1.2.jar")):
        jars.ensure_kafka_jars()
    with pytest.raises(KafkaFetchError, match=re.escape("holds no lab-roles-1.jar")):
        java_roles.ensure_java_roles()
    kafka_call, roles_call = (tmp_path / "mvn-calls").read_text().splitlines()
    libs = tmp_path / "cache" / "kafka" / "4.1.2" / "libs"
    assert f"-f {paths.KAFKA_POM} -Dkafka.libs={libs} -Dkafka.version=4.1.2 package" in kafka_call
    assert f"-f {java_roles.JAVA_POM} " in roles_call and "-Dkafka.version=4.1.2" in roles_call
    assert str(tmp_path / "cache" / "java-roles" / "4.1.2") in roles_call


def write_embedded_state(root: Path, name: str, version: str | None) -> None:
    state = {
        "backend": "local",
        "name": name,
        "cluster_id": "x",
        "node_count": 1,
        "nodes": [],
        "proxy": None,
        **({"kafka_version": version} if version else {}),
    }
    (root / name).mkdir(parents=True)
    (root / name / "cluster.json").write_text(json.dumps(state))


def test_a_cluster_keeps_the_version_it_was_started_with(
    tmp_path: Path, no_version: pytest.MonkeyPatch
) -> None:
    no_version.setenv("LAB_STATE_DIR", str(tmp_path))
    write_embedded_state(tmp_path, "new", "4.1.2")
    write_embedded_state(tmp_path, "old", None)  # a state file from before the setting
    assert EmbeddedCluster.attach("new").kafka_version == "4.1.2"
    assert EmbeddedCluster.attach("old").kafka_version == paths.pom_kafka_version()
    no_version.setenv(VAR, "4.1.2")
    assert EmbeddedCluster("fresh").kafka_version == "4.1.2"


def test_a_running_cluster_of_another_version_is_refused_with_what_to_do(
    tmp_path: Path, no_version: pytest.MonkeyPatch
) -> None:
    no_version.setenv("LAB_STATE_DIR", str(tmp_path))
    write_embedded_state(tmp_path, "default", "4.1.2")
    running = EmbeddedCluster.attach("default")
    with pytest.raises(ClusterError) as caught:
        require_same_version(running)
    assert str(caught.value) == (
        "The running local cluster is Kafka 4.1.2, and this command runs Kafka "
        f"{paths.pom_kafka_version()}: give --kafka-version 4.1.2 (or LAB_KAFKA_VERSION=4.1.2) "
        "to use it, or stop it first (`./lab engine cluster down`)."
    )
    no_version.setenv(VAR, "4.1.2")
    require_same_version(running)


class VersionedCluster:
    backend = "local"
    node_ids = (1,)
    kafka_version = "4.1.2"

    def status(self, timeout: float = 3.0) -> SimpleNamespace:
        return SimpleNamespace(reachable=True)


def test_the_dashboard_does_not_adopt_a_cluster_of_another_version(
    no_version: pytest.MonkeyPatch,
) -> None:
    service = ClusterService()
    no_version.setattr("engine.cluster.service.current_cluster", VersionedCluster)
    assert service.find_running(), "found (and refused), so no second cluster is started"
    assert service.cluster is None and service.state == "failed"
    assert service.error and "is Kafka 4.1.2, and this command runs Kafka 4.4.0" in service.error
    no_version.setenv(VAR, "4.1.2")
    service = ClusterService()
    assert service.find_running() and service.state == "ready"
    assert isinstance(service.cluster, VersionedCluster)
