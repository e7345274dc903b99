"""The Java roles are built against the same Kafka version as the cluster runs."""

import re

from engine.base import paths
from engine.proc import java_roles


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


def test_roles_started_at_once_after_an_edit_build_the_java_roles_once(tmp_path, monkeypatch):
    """Two levels start their Java roles at the same moment: one Maven build, the other waits
    for it and uses it (before, both built the same folder at once and one build broke)."""
    import threading
    import time

    monkeypatch.setattr(java_roles, "builds_dir", lambda: tmp_path / "builds")
    monkeypatch.setattr(java_roles.shutil, "which", lambda name: f"/usr/bin/{name}")
    builds = []

    def maven_into(pom, output, *, stamp, marker, **_):
        builds.append(stamp)
        time.sleep(0.3)  # a build takes a while: the other caller arrives meanwhile
        output[1].mkdir(parents=True, exist_ok=True)
        (output[1] / marker).write_text(stamp)
        return output[1]

    monkeypatch.setattr(java_roles, "maven_into", maven_into)
    found = []
    starters = [
        threading.Thread(target=lambda: found.append(java_roles.ensure_java_roles()))
        for _ in range(3)
    ]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join(10)
    assert builds == [java_roles.sources_hash()]
    assert found == [java_roles.libs_dir()] * 3
