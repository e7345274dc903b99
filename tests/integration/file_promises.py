"""What every scenario run must show, whichever test module ran it.

test_scenarios runs most scenario files; a few run in the module that checks their own
evidence (test_streams, test_replication_truths, test_lost_coordinator_answers), once each,
and call the same checks here, so no scenario is run twice for them. test_docker_backend
checks its runs' counts against kcat with the same function.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from engine.run import record
from engine.run.runner import schedule_of
from engine.scenarios.scenario import Scenario
from engine.teach.lesson import list_lessons, load_lesson
from tests.kafkatools import kcat_values


def kcat_ids(bootstrap: str, topic: str, isolation: str) -> list[int]:
    return [json.loads(v)["id"] for v in kcat_values(bootstrap, topic, isolation=isolation)]


def assert_counts_match_kcat(cluster: Any, scenario: Scenario, output: dict[str, Any]) -> None:
    """Each level's delivered and duplicate counts are what kcat reads from the brokers, at
    the level's isolation; no more is lost than kcat finds missing."""
    ledger = set(range(scenario.workload.messages))
    for level, result in output["results"].items():
        ids = [
            i
            for i in kcat_ids(cluster.direct_bootstrap, result["sink_topic"], result["isolation"])
            if i in ledger
        ]
        copies = Counter(ids)
        assert result["delivered"] == len(copies), f"{level}: delivered differs from kcat"
        assert result["duplicates"] == len(ids) - len(copies), f"{level}: duplicates differ"
        assert result["lost"] <= len(ledger - set(copies))
        assert result["duplicates"] + result["delivered"] == len(ids)


def assert_lessons_hold(name: str, results: dict[str, Any]) -> None:
    """Every lesson step on scenario `name` runs its file as it is (pages/lesson.py): on this
    real run of the file, the step's answer holds and no claim of its explanation breaks."""
    for lesson, path in list_lessons().items():
        for step in load_lesson(path).steps:
            if step.scenario == name:
                broken = [c.describe() for c in step.contradicted(results)]
                assert not broken, (lesson, name, broken)


def assert_as_its_file_says(scenario: Scenario, cluster: Any, output: dict[str, Any]) -> None:
    """The run meets its file's `expect` block and its lessons, its counts equal kcat's
    reading of each sink at the level's isolation, and the recorded run holds the same
    results."""
    assert set(output["results"]) == set(scenario.levels)
    unmet = scenario.unmet_expectations(output["results"])
    assert not unmet, (scenario.name, unmet)
    assert_lessons_hold(scenario.name, output["results"])
    assert_counts_match_kcat(cluster, scenario, output)

    if schedule_of(scenario) == "shared-faults":
        assert_one_strike_for_all(output["results"])
        if scenario.watch_isr:  # each level's partition read apart, into its own history
            for level, result in output["results"].items():
                readings = [f for f in result["faults"] if f.get("kind") == "isr"]
                assert len(readings) >= 2, (level, readings)
        if scenario.watch_elr:  # one run of Kafka's topic tool read every level's topic
            for level, result in output["results"].items():
                elr = [f for f in result["faults"] if f.get("kind") == "elr" and not f.get("final")]
                assert elr, (level, result["faults"])

    recorded = record.load_run(output["run_id"])
    assert recorded.meta["status"] == "complete"
    assert recorded.results == json.loads(json.dumps(output["results"]))
    for level in scenario.levels:
        assert len(recorded.levels[level].verdicts) == scenario.workload.messages


# What a run reads of each level's own partition (engine.run.replica_watches, the replication
# evidence at its end): readings of one topic each, at their own times, not strikes.
READINGS = {"isr", "elr", "broker-log"}


def assert_one_strike_for_all(results: dict[str, dict]) -> None:
    """Shared faults: the levels began together, and each fault is one event, recorded with
    the same time and the same nodes in every level's history."""
    strikes = {
        level: [
            (f["t"], f["kind"], f.get("node"), tuple(f.get("nodes") or ()))
            for f in result["faults"]
            if f.get("source") != "proxy" and f.get("kind") not in READINGS
        ]
        for level, result in results.items()
    }
    first = next(iter(strikes.values()))
    assert first, "no fault was recorded"
    assert all(s == first for s in strikes.values()), strikes
    assert len({result["started_at"] for result in results.values()}) == 1
    evidence = [" ".join(r["explain"]["evidence"]) for r in results.values()]
    assert all(
        "struck them all at once" in e and "The lab placed the partition" in e for e in evidence
    )
