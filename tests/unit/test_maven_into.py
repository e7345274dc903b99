"""The one way the lab fetches a pom's jars: a half-finished copy is never used."""

from __future__ import annotations

import pytest

from engine.base import tools
from engine.base.errors import KafkaFetchError


def test_a_complete_copy_is_reused_and_a_half_finished_one_fetched_again(tmp_path, monkeypatch):
    folder = tmp_path / "libs"
    folder.mkdir()
    (folder / "left-over.jar").write_text("from an interrupted fetch")  # no marker
    calls = []

    def fake_package(pom, output, **_):
        calls.append(pom)
        output[1].mkdir(parents=True)
        (output[1] / "kafka-1.jar").write_text("jar")

    monkeypatch.setattr(tools, "maven_package", fake_package)
    fetch = dict(stamp="1", expect="kafka-*.jar", what="Kafka 1")
    assert tools.maven_into(tmp_path / "pom.xml", ("p", folder), **fetch) == folder
    assert not (folder / "left-over.jar").exists() and (folder / ".complete").read_text() == "1"
    tools.maven_into(tmp_path / "pom.xml", ("p", folder), **fetch)
    assert len(calls) == 1  # complete: not fetched again
    tools.maven_into(tmp_path / "pom.xml", ("p", folder), **{**fetch, "stamp": "2"})
    assert len(calls) == 2  # another version (or sources hash): fetched again


def test_maven_finishing_without_the_jar_leaves_no_marker(tmp_path, monkeypatch):
    """The contrast: nothing is marked complete that does not hold what was asked for."""
    folder = tmp_path / "libs"
    monkeypatch.setattr(tools, "maven_package", lambda pom, output, **_: output[1].mkdir())
    with pytest.raises(KafkaFetchError, match="holds no kafka-"):
        tools.maven_into(tmp_path / "pom.xml", ("p", folder), stamp="1", expect="kafka-*", what="K")
    assert not (folder / ".complete").exists()
