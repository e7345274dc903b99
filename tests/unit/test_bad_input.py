"""Bad input gets one actionable line, a non-zero exit code, no traceback, and loses nothing.

Each test here is a row of docs/troubleshooting.md's table ("When something is wrong").
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base import paths
from engine.base.errors import KafkaFetchError, LabError
from engine.kafka import jars
from engine.run import record


def engine_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=paths.REPO_ROOT,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_malformed_scenario_file_on_the_command_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntitle: Bad\nworkload: {messages: -1}\n")
    assert_one_line_error(engine_cli("run", str(bad)), str(bad), "workload.messages")
    bad.write_text("name: bad\ntitle: [\n")
    assert_one_line_error(engine_cli("run", str(bad)), "not valid YAML")
    bad.write_text("name: bad\ntitle: Bad\nlevels: [at-most-twice]\n")
    assert_one_line_error(engine_cli("run", str(bad)), "unknown level 'at-most-twice'")
    bad.write_text("name: bad\ntitle: Bad\nfaults: [{kind: meteor}]\n")
    assert_one_line_error(engine_cli("run", str(bad)), "faults.0.kind")


def test_the_command_line_refuses_a_fault_that_can_never_fire(tmp_path):
    """What the Failure lab refuses before a run (Scenario.cannot_teach), `engine run` too,
    before it starts or asks any cluster."""
    text = (paths.REPO_ROOT / "scenarios/consumer-crash.yaml").read_text()
    never = tmp_path / "never.yaml"
    never.write_text(text.replace("messages: 30", "messages: 3", 1))
    assert "messages: 3\n" in never.read_text()
    assert_one_line_error(engine_cli("run", str(never)), "it would never happen")


def write_run(root: Path, run_id: str, result: dict) -> Path:
    folder = root / run_id
    (folder / "levels").mkdir(parents=True)
    (folder / "run.json").write_text(
        json.dumps({"run_id": run_id, "scenario": "s", "status": "complete", "started_at": 1})
    )
    (folder / "result.json").write_text(json.dumps({"results": result}))
    (folder / "scenario.yaml").write_text("name: s\n")
    return folder


def test_unknown_run_id(tmp_path):
    env = {"LAB_RUNS_DIR": str(tmp_path)}
    assert_one_line_error(
        engine_cli("show", "no-such-run", env=env), "There is no run 'no-such-run'"
    )
    assert_one_line_error(engine_cli("show", "../etc", env=env), "is not a run id")


def test_corrupt_run_folder_is_named_and_other_runs_still_load(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    write_run(tmp_path, "good-run", {})
    broken = write_run(tmp_path, "broken-run", {"at-least-once": {}})  # no level files
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "run.json").write_text("{not json")
    with pytest.raises(record.CorruptRunError, match="broken-run is damaged"):
        record.load_run("broken-run")
    assert record.load_run("good-run").meta["run_id"] == "good-run"
    statuses = {r["run_id"]: r["status"] for r in record.list_runs()}
    assert statuses["garbled"] == "damaged" and statuses["good-run"] == "complete"
    assert broken.exists(), "a damaged run is reported, never deleted"
    assert_one_line_error(
        engine_cli("show", "broken-run", env={"LAB_RUNS_DIR": str(tmp_path)}), "is damaged"
    )


def test_a_full_disk_while_recording_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text('{"status": "running"}')
    original = Path.write_text

    def full_disk(self: Path, *args, **kwargs):
        if self.name.endswith(".tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(LabError, match=r"No space left on device.*Free some disk space"):
        record._write_json(target, {"status": "complete"})
    assert json.loads(target.read_text()) == {"status": "running"}
    assert not (tmp_path / "run.json.tmp").exists()


def test_a_kafka_version_that_cannot_be_fetched(tmp_path, monkeypatch):
    pom = tmp_path / "pom.xml"
    pom.write_text(
        paths.KAFKA_POM.read_text().replace(
            f"<kafka.version>{paths.pom_kafka_version()}</kafka.version>",
            "<kafka.version>0.0.0-does-not-exist</kafka.version>",
        )
    )
    monkeypatch.setattr(paths, "KAFKA_POM", pom)
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LAB_KAFKA_VERSION", raising=False)
    paths.pom_kafka_version.cache_clear()
    try:
        with pytest.raises(KafkaFetchError, match="could not be fetched from Maven Central"):
            jars.ensure_kafka_jars(offline=True)  # offline: the answer is fast and certain
    finally:
        paths.pom_kafka_version.cache_clear()


def test_a_chosen_kafka_version_that_cannot_be_fetched_names_the_setting(tmp_path, monkeypatch):
    """LAB_KAFKA_VERSION names a release Maven does not have: one line, naming the setting,
    the flag and the default (Maven is given the version: the pom's is not asked for)."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LAB_KAFKA_VERSION", "4.99.0")
    with pytest.raises(KafkaFetchError) as caught:
        jars.ensure_kafka_jars(offline=True)
    message = str(caught.value)
    assert "Kafka 4.99.0 could not be fetched from Maven Central" in message
    assert "LAB_KAFKA_VERSION or --kafka-version" in message
    assert f"unset it for {paths.pom_kafka_version()}" in message
    assert "\n" not in message
    assert not (tmp_path / "cache" / "kafka" / "4.99.0" / "libs" / ".complete").exists()


def test_a_bad_kafka_version_on_the_command_line(tmp_path):
    """A malformed or too old version, as a flag or a variable: one line before anything
    starts (no cluster, no Maven), naming where it came from."""
    env = {"LAB_STATE_DIR": str(tmp_path / "state"), "LAB_CACHE_DIR": str(tmp_path / "cache")}
    assert_one_line_error(
        engine_cli("cluster", "up", "--kafka-version", "4.4", env=env),
        "--kafka-version='4.4' is not a Kafka release",
    )
    assert_one_line_error(
        engine_cli("run", "scenarios/ack-loss.yaml", "--kafka-version", "3.9.1", env=env),
        "--kafka-version=3.9.1: the lab runs Kafka 4.0 or newer",
        "KIP-653",
    )
    assert_one_line_error(
        engine_cli("preflight", env={**env, "LAB_KAFKA_VERSION": "latest"}),
        "LAB_KAFKA_VERSION='latest' is not a Kafka release",
    )
    assert not (tmp_path / "state").exists() and not (tmp_path / "cache").exists()


def test_a_busy_dashboard_port_is_named_before_streamlit_starts():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_line_error(
            engine_cli("preflight", "--port", str(port)),
            f"Port {port} on 127.0.0.1 (the dashboard) is already in use",
        )


def test_a_failed_maven_build_is_told_by_its_own_error_lines_not_its_advice():
    """Maven ends a failure with advice ("[Help 1]", "Re-run Maven..."): the lab's message
    quotes the lines that say what failed (a compile error here), and Maven's last lines
    only when it printed no [ERROR] line."""
    from engine.base.tools import maven_errors

    output = "\n".join(
        [
            "[INFO] Scanning for projects...",
            "[ERROR] COMPILATION ERROR :",
            "[ERROR] /x/Worker.java:[12,8] cannot find symbol",
            "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin",
            "[ERROR] -> [Help 1]",
            "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.",
            "[ERROR] Re-run Maven using the -X switch to enable full debug logging.",
            "[ERROR] For more information about the errors and possible solutions, please read",
            "[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/MojoFailureException",
        ]
    )
    said = maven_errors(output)
    assert said.startswith("COMPILATION ERROR : /x/Worker.java:[12,8] cannot find symbol")
    assert "Help" not in said and "Re-run" not in said and "For more" not in said
    assert maven_errors("line 1\nline 2\nline 3\nline 4") == "line 2 line 3 line 4"
