"""The Java producer (lab.producer.JavaProducer, kafka-clients at the lab's Kafka version) under
a lost ack, on a real broker, beside librdkafka: the same scenario file, the same checker,
kcat's counts.

Each check is also shown failing on the case it contrasts with (the same predicate on the
other level or the other client), so none passes for want of a fault.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from typing import Any

import pytest

from engine.base.paths import REPO_ROOT
from engine.kafka import admin
from engine.model.history import read_jsonl
from engine.model.java_client import JAVA_PRODUCER_MAIN, to_java
from engine.model.levels import LEVELS
from engine.proc.java_roles import ensure_java_roles, java_command
from engine.proc.processes import RoleProcess
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario, with_client
from tests.kafkatools import kcat_values

pytestmark = pytest.mark.kafka

ACK_LOSS = REPO_ROOT / "scenarios" / "ack-loss.yaml"
JAVA_LEVELS = ["at-most-once", "at-least-once", "idempotent-only", "exactly-once"]


def ack_loss(cluster: Any, client: str, levels: list[str]) -> dict[str, Any]:
    """ack-loss (the third Produce request's answer dropped after the broker appended it)."""
    scenario = with_client(load_scenario(ACK_LOSS), client)
    return run_scenario(scenario, cluster, levels=levels)


def no_duplicate(result: dict[str, Any]) -> bool:
    return result["duplicates"] == 0 and result["lost"] == 0


def chose_idempotence(result: dict[str, Any]) -> bool:
    return any("chose an idempotent producer" in line for line in result["explain"]["evidence"])


def assert_counts_equal_kcats(cluster: Any, output: dict[str, Any], messages: int = 20) -> None:
    for level, result in output["results"].items():
        values = kcat_values(
            cluster.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
        )
        ids = [i for i in (json.loads(v)["id"] for v in values) if i < messages]
        copies = Counter(ids)
        assert result["delivered"] == len(copies), f"{level}: delivered differs from kcat"
        assert result["duplicates"] == len(ids) - len(copies), f"{level}: duplicates differ"


def producer_start(output: dict[str, Any], level: str) -> dict[str, Any]:
    folder = record.level_folder(record.run_folder(output["run_id"]), level)
    return next(e for e in read_jsonl(folder / "producer.jsonl") if e["ev"] == "start")


@pytest.fixture(scope="module")
def java_ack_loss(cluster1) -> dict[str, Any]:
    ensure_java_roles()
    return ack_loss(cluster1, "java", JAVA_LEVELS)


@pytest.fixture(scope="module")
def defaults_runs(cluster1) -> dict[str, dict[str, Any]]:
    ensure_java_roles()
    return {
        client: ack_loss(cluster1, client, ["client-defaults"]) for client in ("librdkafka", "java")
    }


def test_java_at_least_once_duplicates_a_lost_ack_and_the_idempotent_levels_do_not(
    cluster1, java_ack_loss
):
    results = java_ack_loss["results"]
    assert results["at-least-once"]["duplicates"] == 1
    assert not no_duplicate(results["at-least-once"])  # the contrast: the check fails here
    for level in ("idempotent-only", "exactly-once"):
        assert no_duplicate(results[level]), level
    # Without retries the stored message is reported failed (acked 19 of 20), not resent.
    assert results["at-most-once"]["duplicates"] == 0
    assert results["at-most-once"]["acked"] == 19
    assert results["at-least-once"]["acked"] == 20
    assert_counts_equal_kcats(cluster1, java_ack_loss)


def test_the_java_role_writes_the_python_roles_events(cluster1, java_ack_loss):
    """One send per id and one ack or fail per send: what the checker reads; values shaped
    as engine/base/values.py's value_maker makes them."""
    folder = record.level_folder(record.run_folder(java_ack_loss["run_id"]), "at-least-once")
    events = read_jsonl(folder / "producer.jsonl")
    assert [e["id"] for e in events if e["ev"] == "send"] == list(range(20))
    assert sorted(e["id"] for e in events if e["ev"] == "ack") == list(range(20))
    assert events[0]["ev"] == "start" and events[-1]["ev"] == "done"
    assert events[0]["client"] == "java"
    result = java_ack_loss["results"]["at-least-once"]
    values = [json.loads(v) for v in kcat_values(cluster1.direct_bootstrap, result["sink_topic"])]
    assert len(values) == 21  # 20 and the duplicate
    for value in values:
        assert list(value) == ["id", "created_at", "run", "level", "by"]
        assert (value["run"], value["level"], value["by"]) == (
            java_ack_loss["run_id"],
            "at-least-once",
            "producer",
        )


def test_with_each_clients_defaults_librdkafka_duplicates_and_java_does_not(
    cluster1, defaults_runs
):
    librdkafka = defaults_runs["librdkafka"]["results"]["client-defaults"]
    java = defaults_runs["java"]["results"]["client-defaults"]
    assert librdkafka["duplicates"] >= 1 and librdkafka["lost"] == 0
    assert no_duplicate(java)
    assert not no_duplicate(librdkafka)  # the contrast: the same check fails on librdkafka
    # The card says where the defaults part ways, from the Java run's own evidence only.
    assert chose_idempotence(java) and not chose_idempotence(librdkafka)
    assert java["producer_config"] == {} and librdkafka["producer_config"] == {}
    for output in defaults_runs.values():
        assert_counts_equal_kcats(cluster1, output)


def test_the_java_client_reports_what_its_defaults_really_are(defaults_runs, java_ack_loss):
    """kafka-clients (the lab's version) resolved its defaults to an idempotent producer with
    acks=all; told enable.idempotence=false (at-least-once), it is not."""
    effective = producer_start(defaults_runs["java"], "client-defaults")["effective"]
    assert effective["enable.idempotence"] is True
    assert effective["acks"] in ("all", "-1")
    told = producer_start(java_ack_loss, "at-least-once")["effective"]
    assert told["enable.idempotence"] is False
    # librdkafka's role was handed nothing beyond its names either.
    given = producer_start(defaults_runs["librdkafka"], "client-defaults")["config"]
    assert "enable.idempotence" not in given and "acks" not in given


JAVA_SCENARIOS = {
    name: path
    for name, path in list_scenarios().items()
    if (s := load_scenario(path)).pipeline == "producer" and s.nodes == 1
}


@pytest.mark.parametrize("name", sorted(JAVA_SCENARIOS))
def test_each_one_node_producer_scenario_meets_its_file_on_the_java_client(name, cluster1):
    """The same file, faults and expectations, the producer on the Java client: crashes,
    transactions (aborted, timed out and restarted), lost answers; counts equal kcat's."""
    ensure_java_roles()
    scenario = with_client(load_scenario(JAVA_SCENARIOS[name]), "java")
    output = run_scenario(scenario, cluster1)
    assert not (unmet := scenario.unmet_expectations(output["results"])), (name, unmet)
    assert_counts_equal_kcats(cluster1, output, scenario.workload.messages)
    for level in scenario.levels:
        assert producer_start(output, level)["client"] == "java"


def test_sigterm_ends_the_java_producer_cleanly_and_at_once(cluster1, tmp_path):
    """As the Python role: SIGTERM finishes the current message, flushes, writes `done`."""
    ensure_java_roles()
    topic = "lab.java-producer-sigterm"
    admin.create_topic(cluster1.direct_bootstrap, topic)
    history = tmp_path / "producer.jsonl"
    spec = {
        "bootstrap": cluster1.direct_bootstrap,
        "client_id": "java-sigterm",
        "topic": topic,
        "ids": list(range(1000)),
        "partitions": 1,
        "outbox": None,
        "rate": 20.0,
        "batch": False,
        "config": to_java(LEVELS["at-least-once"].producer).config,
        "transactional": None,
        "name": "producer",
        "history": str(history),
        "run_id": "sigterm",
        "level": "at-least-once",
    }
    process = RoleProcess("producer", JAVA_PRODUCER_MAIN, history, spec, java=True)
    process.start(tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(e["ev"] == "ack" for e in read_jsonl(history)) < 5:
        time.sleep(0.1)
    began = time.monotonic()
    process.stop(timeout=10)
    assert time.monotonic() - began < 5
    events = read_jsonl(history)
    assert events[-1]["ev"] == "done" and events[-1]["unflushed"] == 0
    sent = [e["id"] for e in events if e["ev"] == "send"]
    assert 5 <= len(sent) < 1000
    assert sorted(e["id"] for e in events if e["ev"] == "ack") == sent


def resolve_java(*settings: str) -> dict[str, Any]:
    """What the lab's kafka-clients resolves for these settings, asked of the role itself."""
    command = java_command(JAVA_PRODUCER_MAIN, "--resolve", *settings)
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_java_clients_defaults_and_when_it_drops_idempotence():
    """KIP-679's defaults, and what engine/model/levels.py says of them, on the pinned client."""
    defaults = resolve_java()["effective"]
    assert defaults["enable.idempotence"] is True and defaults["acks"] == "-1"
    assert defaults["linger.ms"] == 5  # 4.0's default (the roles set linger.ms themselves)
    # Not named, idempotence gives way to acks=1 or retries=0 without an error...
    assert resolve_java("acks=1")["effective"]["enable.idempotence"] is False
    assert resolve_java("retries=0")["effective"]["enable.idempotence"] is False
    # ...but an in-flight limit above 5 is refused, and so is idempotence named with acks=1.
    assert "at most 5" in resolve_java("max.in.flight.requests.per.connection=6")["error"]
    assert "acks" in resolve_java("acks=1", "enable.idempotence=true")["error"]
    # The contrast: an in-flight limit of 5 keeps it.
    five = resolve_java("max.in.flight.requests.per.connection=5")["effective"]
    assert five["enable.idempotence"] is True


def test_the_command_lines_client_choice_runs_the_java_producer(cluster1):
    """`engine run FILE --client java`, as the README shows it; its run records the client.
    The contrast is the same command's librdkafka run above: one duplicate, not none."""
    import sys

    done = subprocess.run(
        [
            sys.executable, "-m", "engine", "run", "scenarios/ack-loss.yaml", "--json",
            "--client", "java", "--guarantee", "client-defaults",
        ],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    output = json.loads(done.stdout)
    result = output["results"]["client-defaults"]
    assert result["duplicates"] == 0 and result["lost"] == 0
    assert producer_start(output, "client-defaults")["client"] == "java"
    assert "client: java" in record.load_run(output["run_id"]).scenario_text
