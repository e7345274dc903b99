"""The Kafka Streams processor (java/.../StreamsProcessor.java) on a real broker: streams-crash
and streams-zombie.

One run of the scenario: the same Kafka Streams application at processing.guarantee
at_least_once and exactly_once_v2, its JVM killed (SIGKILL) right after its 12th result was
acknowledged, before Kafka Streams committed. Each check is made on both levels, and shown
to hold on the one it is about and to fail on the other, so that none passes by accident.
Every count is also made by kcat, an independent client, reading the same output topic.
Each scenario runs once in the whole suite, here, with Spark following it: its metrics must
equal the checker's and the batch job's (tests/metrics/followed.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine.base import settings
from engine.kafka import jars
from engine.model.history import merge
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios import streams
from engine.scenarios.scenario import KafkaFrom, Scenario, load_scenario, scenarios_dir
from tests.integration.file_promises import assert_as_its_file_says
from tests.kafkatools import kcat_values
from tests.metrics.followed import run_judged_three_ways

pytestmark = pytest.mark.kafka

# Run here once each, judged three ways (tests/metrics/followed.py), and not again in
# test_scenarios: test_the_streams_scenarios_behave_as_their_files_say checks what it would.
STREAMS_SCENARIOS = ("streams-crash", "streams-zombie")
ALOS, EOS = "streams-at-least-once", "streams-exactly-once"


def judged_run(name: str, cluster: Any) -> tuple[Scenario, dict[str, Any]]:
    """The scenario and its run's output, Spark following the run; its metrics agree with
    the checker's."""
    path = scenarios_dir() / f"{name}.yaml"
    scenario = load_scenario(path)
    return scenario, run_judged_three_ways(scenario, cluster, path.read_text()).output


@pytest.fixture(scope="module")
def crash_run(cluster1) -> dict[str, Any]:
    scenario, output = judged_run("streams-crash", cluster1)
    folder = record.run_folder(output["run_id"])
    levels = {}
    for level, result in output["results"].items():
        values = kcat_values(
            cluster1.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
        )
        levels[level] = {
            "result": result,
            "kcat": streams.results_of(values),
            "folder": record.level_folder(folder, level),
        }
    return {"scenario": scenario, "output": output, "levels": levels}


@pytest.mark.parametrize("run", ["crash_run", "zombie_run"])
def test_the_streams_scenarios_behave_as_their_files_say(run, request, cluster1):
    """What test_scenarios checks of every other scenario file (its expect block, kcat's
    counts, the recorded run); Spark's metrics were checked as the fixture judged the run."""
    ran = request.getfixturevalue(run)
    assert_as_its_file_says(ran["scenario"], cluster1, ran["output"])


def kcat_duplicates(results: list[dict[str, Any]]) -> int:
    copies = Counter(r["id"] for r in results)
    return sum(n - 1 for n in copies.values())


def over_counted(results: list[dict[str, Any]], ledger: list[int]) -> dict[int, tuple]:
    """Accounts whose last counted number of payments is more than they made."""
    wrong = streams.miscounted(streams.payments_made(ledger), streams.counted(results))
    return {a: (c, m) for a, (c, m) in wrong.items() if c.count > m.count}


def history(level_folder: Path, instance: str) -> list[dict[str, Any]]:
    return merge([record.process_history(level_folder, instance)])


def test_streams_crash_at_least_once_repeats_exactly_once_does_not(crash_run):
    scenario, levels = crash_run["scenario"], crash_run["levels"]
    ledger = list(range(scenario.workload.messages))
    assert not scenario.unmet_expectations(crash_run["output"]["results"])

    def repeats(level: str) -> bool:
        return kcat_duplicates(levels[level]["kcat"]) >= 1

    def overcounts(level: str) -> bool:
        return bool(over_counted(levels[level]["kcat"], ledger))

    assert repeats(ALOS) and not repeats(EOS)
    assert overcounts(ALOS) and not overcounts(EOS)
    # exactly_once_v2: every account's count and sum exact, as kcat reads them.
    assert streams.counted(levels[EOS]["kcat"]) == streams.payments_made(ledger)
    assert streams.counted(levels[ALOS]["kcat"]) != streams.payments_made(ledger)


def test_the_engine_counts_equal_kcats(crash_run):
    for level, data in crash_run["levels"].items():
        result, results = data["result"], data["kcat"]
        ids = [r["id"] for r in results]
        assert result["duplicates"] == kcat_duplicates(results), level
        assert result["delivered"] == len(set(ids)), level
        assert result["lost"] == 0 == len(set(range(30)) - set(ids)), level


@pytest.mark.parametrize("run", ["crash_run", "zombie_run"])
def test_a_read_uncommitted_reader_of_exactly_once_v2_counts_what_kcat_does(run, request, cluster1):
    """exactly_once_v2 is exact for read_committed readers: kcat at read_uncommitted (the Java
    consumer's default isolation) reads the aborted transactions' results too, and the
    level's read_uncommitted counts equal kcat's; at read_committed kcat sees no duplicate."""
    result = request.getfixturevalue(run)["levels"][EOS]["result"]
    values = kcat_values(
        cluster1.direct_bootstrap, result["sink_topic"], isolation="read_uncommitted"
    )
    everything = streams.results_of(values)
    committed = request.getfixturevalue(run)["levels"][EOS]["kcat"]
    assert result["read_uncommitted_duplicates"] == kcat_duplicates(everything)
    assert result["read_uncommitted_aborted"] == len(everything) - len(committed)
    assert kcat_duplicates(committed) == result["duplicates"] == 0
    # The at_least_once level reads at read_uncommitted itself: no other reader to count.
    assert (
        "read_uncommitted_duplicates" not in request.getfixturevalue(run)["levels"][ALOS]["result"]
    )


def test_the_what_if_reader_at_read_uncommitted_counts_the_aborted_results(cluster1):
    """The Kafka Streams lesson's what-if (lessons/kafka-streams.yaml): streams-crash again,
    its downstream consumer really configured at read_uncommitted. The run's exactly_once_v2
    counts are kcat's at read_uncommitted, the aborted results among them, and the
    what-if's explanation holds: no claim of it is contradicted by this run."""
    from engine.teach.lesson import list_lessons, load_lesson

    step = load_lesson(list_lessons()["kafka-streams"]).steps[0]
    assert step.what_if is not None and step.scenario == "streams-crash"
    scenario = step.what_if_scenario()
    output = run_scenario(scenario, cluster1, levels=[EOS])
    result = output["results"][EOS]
    assert result["isolation"] == "read_uncommitted"
    assert "read_uncommitted" in result["label"] and "application's choice" in result["label"]
    config = json.loads((record.run_folder(output["run_id"]) / record.CONFIG).read_text())
    assert config["levels"][EOS]["consumer"]["isolation.level"] == "read_uncommitted"
    everything = streams.results_of(
        kcat_values(cluster1.direct_bootstrap, result["sink_topic"], isolation="read_uncommitted")
    )
    committed = streams.results_of(
        kcat_values(cluster1.direct_bootstrap, result["sink_topic"], isolation="read_committed")
    )
    assert result["duplicates"] == kcat_duplicates(everything) >= 1
    assert result["aborted_visible"] == len(everything) - len(committed) >= 1
    assert kcat_duplicates(committed) == 0 and result["lost"] == 0
    assert step.what_if.contradicted(output["results"]) == []
    said = step.what_if_explanation(output["results"])
    assert f"Duplicates = {result['duplicates']}, from {result['aborted_visible']} records" in said


def test_the_crash_lands_after_the_12th_acknowledged_result_before_a_commit(crash_run):
    for level, data in crash_run["levels"].items():
        first = history(data["folder"], "processor")
        assert first[-1]["ev"] == "failpoint_reached", level
        assert first[-1]["at"]["ev"] == "output_acked", level
        acked = [e for e in first if e["ev"] == "output_acked"]
        assert len(acked) == 12, level
        # Nothing the 12th result's input offset covers was committed by the first instance.
        committed = [e["offsets"].get("0", 0) for e in first if e["ev"] == "committed"]
        consumed = {e["id"]: e["offset"] for e in first if e["ev"] == "consumed"}
        assert all(c <= consumed[acked[-1]["id"]] for c in committed), level
        if level == ALOS:
            assert not committed, "at_least_once commits every 30 s: nothing before the crash"


def test_the_replacement_restores_the_changelog_and_starts_from_its_counts(crash_run):
    """at_least_once restores every count the first instance made (12 or more, uncommitted);
    exactly_once_v2 restores only what its committed transactions hold."""
    restored_counts = {}
    for level, data in crash_run["levels"].items():
        second = history(data["folder"], "processor#2")
        restored = [e for e in second if e["ev"] == "restored"]
        assert restored and restored[0]["records"] >= 1, level
        opened = next(e for e in second if e["ev"] == "store_opened")
        restored_counts[level] = sum(a["count"] for a in opened["accounts"].values())
        first = history(data["folder"], "processor")
        committed = [e["offsets"].get("0", 0) for e in first if e["ev"] == "committed"]
        if level == EOS:
            # The store starts from exactly the payments whose offsets were committed.
            assert restored_counts[level] == (committed[-1] if committed else 0), level
    assert restored_counts[ALOS] >= 12
    assert restored_counts[EOS] < 12


def test_the_level_settings_are_what_kafka_streams_4_1_2_applies(crash_run):
    """The role records Kafka Streams' effective settings: the page's words rest on them."""
    starts = {
        level: history(data["folder"], "processor")[0]
        for level, data in crash_run["levels"].items()
    }
    assert starts[ALOS]["processing_guarantee"] == "at_least_once"
    assert starts[ALOS]["commit_interval_ms"] == 30000
    assert starts[EOS]["processing_guarantee"] == "exactly_once_v2"
    assert starts[EOS]["commit_interval_ms"] == 100
    eos_producer = starts[EOS]["producer_config"]
    assert eos_producer["enable.idempotence"] == "true"
    assert eos_producer["transaction.timeout.ms"] == "10000"
    assert eos_producer["delivery.timeout.ms"] == str(2147483647)
    assert starts[ALOS]["producer_config"]["linger.ms"] == "100"
    assert json.dumps(starts)  # plain JSON, as the run folder keeps it


def test_the_state_stores_counts_read_from_the_history_equal_kcats(crash_run):
    """The store as its last instance left it (its restore plus what it read, from the run's
    history) against the counts the results carry as kcat reads them, and against the truth."""
    recorded = record.load_run(crash_run["output"]["run_id"])
    ledger = list(range(30))
    matches_truth = {}
    for level, data in crash_run["levels"].items():
        store = streams.store_at_end(recorded.levels[level].history)
        assert store == streams.counted(data["kcat"]), level
        matches_truth[level] = not streams.miscounted(streams.payments_made(ledger), store)
    assert matches_truth == {ALOS: False, EOS: True}


def test_each_result_carries_the_account_and_amount_the_truth_derives(crash_run):
    """The Java role and engine/scenarios/streams.py derive a payment's account and amount alike."""
    for level, data in crash_run["levels"].items():
        for value in data["kcat"]:
            assert value["account"] == streams.account_of(value["id"]), level
            assert value["amount"] == streams.amount_of(value["id"]), level


@pytest.fixture(scope="module")
def zombie_run(cluster1) -> dict[str, Any]:
    scenario, output = judged_run("streams-zombie", cluster1)
    folder = record.run_folder(output["run_id"])
    levels = {
        level: {
            "result": result,
            "kcat": streams.results_of(
                kcat_values(
                    cluster1.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
                )
            ),
            "folder": record.level_folder(folder, level),
        }
        for level, result in output["results"].items()
    }
    return {"scenario": scenario, "output": output, "levels": levels}


def test_streams_zombie_is_fenced_and_repeats_only_at_least_once(zombie_run):
    scenario, levels = zombie_run["scenario"], zombie_run["levels"]
    ledger = list(range(scenario.workload.messages))
    assert not scenario.unmet_expectations(zombie_run["output"]["results"])

    def repeats(level: str) -> bool:
        return kcat_duplicates(levels[level]["kcat"]) >= 1

    assert repeats(ALOS) and not repeats(EOS)
    assert streams.counted(levels[EOS]["kcat"]) == streams.payments_made(ledger)
    for level, data in levels.items():
        zombie = history(data["folder"], "processor")
        woke = [e for e in zombie if e["ev"] == "failpoint_reached"]
        fenced = [e for e in zombie if e["ev"] == "fenced"]
        assert woke and fenced, level  # it froze at its point, woke, and was refused
        result = data["result"]
        # Refused by its group at either setting; at exactly_once_v2 its epoch refused a
        # write or a call of its transaction too.
        assert result["commits_refused"] >= 1, level
        epoch = result["writes_refused"] + result["txn_calls_refused"]
        assert (epoch >= 1) == (level == EOS), (level, epoch)
        assert data["result"]["duplicates"] == kcat_duplicates(data["kcat"]), level


# Kafka Streams 4.1.2, the release before the lab's default moved to 4.4.0: its exactly_once_v2
# replacement keeps the store a killed instance left (KAFKA-20685), where 4.3+ wipes it.
OLDER = "4.1.2"


def store_verdicts(level_folder: Path) -> list[str]:
    """What Kafka Streams made of the account-totals store the replacement found on disk (its
    own log lines, as the role records them: engine/scenarios/streams.py store_check_words)."""
    return [
        e["verdict"]
        for e in history(level_folder, "processor#2")
        if e["ev"] == "store_checked" and e["store"] == "account-totals"
    ]


def said_of_the_store(result: dict[str, Any]) -> list[str]:
    return [line for line in result["explain"]["evidence"] if "checkpoint file" in line
            or "wiped the store" in line]  # fmt: skip


def test_from_kafka_streams_4_3_the_exactly_once_replacement_wipes_the_store_on_disk(
    crash_run, cluster1
):
    """At exactly_once_v2 the replacement finds the killed instance's RocksDB store with no
    committed offset in it and wipes it; at at_least_once it keeps it. Kafka Streams' own
    version (the role's start event) is the cluster's, and the card says what happened."""
    if KafkaFrom(version="4.3", why="KIP-1035: RocksDB keeps its offsets").refuses(
        cluster1.kafka_version
    ):
        pytest.skip(f"Kafka {cluster1.kafka_version}: the older side is the test below")
    levels = crash_run["levels"]
    started = history(levels[EOS]["folder"], "processor#2")[0]
    assert started["kafka_streams_version"] == cluster1.kafka_version
    # Wiped, then the task made anew, its empty store with no offset at all.
    assert store_verdicts(levels[EOS]["folder"]) == ["wiped", "no_checkpoint"]
    assert "wiped" not in store_verdicts(levels[ALOS]["folder"])
    [said] = said_of_the_store(levels[EOS]["result"])
    assert f"Kafka Streams {cluster1.kafka_version}" in said and "KIP-1035" in said
    assert said_of_the_store(levels[ALOS]["result"]) == []


def test_kafka_streams_4_1_2_keeps_the_killed_instances_store_at_exactly_once(
    cluster1, monkeypatch
):
    """The same level on a Kafka 4.1.2 cluster with the Java roles built on Kafka Streams
    4.1.2: the replacement trusts the checkpoint file the first instance wrote when its
    restore ended ("initialized from checkpoint with offset null") and keeps the store, and
    the card names the bug (KAFKA-20685). The counts are still right in this run."""
    from engine.cluster.embedded import EmbeddedCluster

    if cluster1.kafka_version == OLDER:
        pytest.skip("this suite runs Kafka 4.1.2 (LAB_KAFKA_VERSION): it is the older side here")
    monkeypatch.setenv(settings.KAFKA_VERSION.name, OLDER)
    jars.ensure_kafka_jars(version=OLDER)
    older = EmbeddedCluster(f"test-streams-{OLDER}", node_count=1)
    older.start(timeout=180)
    try:
        output = run_scenario(load_scenario(scenarios_dir() / "streams-crash.yaml"), older,
                              levels=[EOS])  # fmt: skip
    finally:
        older.stop()
    folder = record.level_folder(record.run_folder(output["run_id"]), EOS)
    assert history(folder, "processor#2")[0]["kafka_streams_version"] == OLDER
    assert store_verdicts(folder) == ["from_checkpoint"]
    result = output["results"][EOS]
    [said] = said_of_the_store(result)
    assert f"Kafka Streams {OLDER}" in said and "KAFKA-20685" in said
    assert result["duplicates"] == 0 and result["lost"] == 0
