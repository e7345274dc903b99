"""A new Java role is a Java class and one Python file (issue 63, item 6), shown end to end.

The made-up role (tests/integration/new_role/): JavaSink.java, a sink on the Java consumer,
and java_sink_demo.py, its declaration in the role registry. The test adds the class to a
copy of java/ (built by Maven as the lab builds its Java roles, into a folder of its own) and
the declaration to the registry's path, and edits nothing else. ack-loss, renamed to the
scenario the role serves, then runs on a real broker: the Java class plays every level's
sink, and the levels are judged from its history as from the Python sink's. The contrast:
the same scenario under its own name keeps the Python sink.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

import engine.roles
from engine.model.levels import LEVELS as ALL
from engine.proc import java_roles
from engine.roles.registry import role_for, roles
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import Scenario, list_scenarios, load_scenario
from tests.kafkatools import kcat_values

pytestmark = pytest.mark.kafka

HERE = Path(__file__).parent / "new_role"
LEVELS = ["at-least-once", "exactly-once"]


@pytest.fixture
def java_sink_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    java = tmp_path / "java"
    shutil.copytree(java_roles.JAVA_DIR / "src", java / "src")
    shutil.copy(java_roles.JAVA_POM, java / "pom.xml")
    (java / "src/main/java/lab/demo").mkdir()
    shutil.copy(HERE / "JavaSink.java", java / "src/main/java/lab/demo/JavaSink.java")
    monkeypatch.setattr(java_roles, "JAVA_DIR", java)
    monkeypatch.setattr(java_roles, "JAVA_POM", java / "pom.xml")
    monkeypatch.setattr(java_roles, "builds_dir", lambda: tmp_path / "builds")
    python = tmp_path / "roles"
    python.mkdir()
    shutil.copy(HERE / "java_sink_demo.py", python / "java_sink_demo.py")
    monkeypatch.setattr(engine.roles, "__path__", [*engine.roles.__path__, str(python)])
    roles.cache_clear()
    yield roles()["java-sink-demo"]
    roles.cache_clear()


def renamed(scenario: Scenario, name: str) -> Scenario:
    return Scenario.model_validate({**scenario.model_dump(exclude_unset=True), "name": name})


def test_a_java_class_and_a_python_file_make_a_role_that_plays_its_part(java_sink_role, cluster1):
    ack_loss = load_scenario(list_scenarios()["ack-loss"])
    demo = renamed(ack_loss, "java-sink-demo")
    for level in LEVELS:
        assert role_for("sink", demo, ALL[level]) is java_sink_role
        assert role_for("sink", ack_loss, ALL[level]).name == "sink"  # the contrast
    output = run_scenario(demo, cluster1, levels=LEVELS)
    folder = record.run_folder(output["run_id"])
    for level in LEVELS:
        result = output["results"][level]
        history = [
            json.loads(line)
            for line in (record.process_history(record.level_folder(folder, level), "sink"))
            .read_text()
            .splitlines()
        ]
        started = next(e for e in history if e["ev"] == "start")
        assert started["client"] == "kafka-clients"  # the Java class wrote it
        assert started["isolation"] == result["isolation"]
        # Judged from the Java sink's history, the counts are kcat's count of the topic.
        ids = Counter(
            json.loads(v)["id"]
            for v in kcat_values(
                cluster1.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
            )
        )
        assert result["duplicates"] == sum(n - 1 for n in ids.values()), level
        assert result["lost"] == len(set(range(ack_loss.workload.messages)) - set(ids)), level
        assert sum(1 for e in history if e["ev"] == "consumed") == sum(ids.values()), level
    # ack-loss's lesson holds with the Java sink: a duplicate at at-least-once, none beyond.
    assert output["results"]["at-least-once"]["duplicates"] >= 1
    assert output["results"]["exactly-once"]["duplicates"] == 0
