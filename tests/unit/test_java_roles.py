"""The Java roles are built against the same Kafka version as the cluster runs."""

import re

from engine import java_roles, paths


def test_the_java_roles_pin_the_clusters_kafka_version():
    pinned = re.search(r"<kafka\.version>([^<]+)<", java_roles.JAVA_POM.read_text())
    assert pinned is not None
    assert pinned.group(1) == paths.pom_kafka_version()


def test_an_edited_source_asks_for_a_new_build(tmp_path, monkeypatch):
    source = tmp_path / "src" / "main" / "java" / "lab" / "roles" / "A.java"
    source.parent.mkdir(parents=True)
    (tmp_path / "pom.xml").write_text("<project/>")
    source.write_text("class A {}")
    monkeypatch.setattr(java_roles, "JAVA_DIR", tmp_path)
    monkeypatch.setattr(java_roles, "JAVA_POM", tmp_path / "pom.xml")
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / ".built-from").write_text(java_roles.sources_hash())
    assert java_roles.java_roles_ready(libs)
    source.write_text("class A { int changed; }")
    assert not java_roles.java_roles_ready(libs)
