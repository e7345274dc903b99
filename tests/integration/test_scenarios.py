"""Every scenario file, run on a real cluster, shows the behaviour its file promises.

The promises are the `expect` block of each scenario ("3" exactly, ">=1" at least). Every
level's counts are also checked against kcat reading the same topic at the same isolation
level, so the numbers do not rest on the lab's own reader, and against Spark's metrics, as
its streaming queries read the run and as its batch job reads Kafka after it
(tests/metrics/followed.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import Scenario, list_scenarios, load_scenario
from tests.integration.file_promises import assert_as_its_file_says, kcat_ids
from tests.integration.test_lost_coordinator_answers import LOST_MESSAGE_SCENARIOS
from tests.integration.test_replication_truths import REPLICATION_SCENARIOS
from tests.integration.test_streams import STREAMS_SCENARIOS
from tests.metrics.followed import run_judged_three_ways

pytestmark = pytest.mark.kafka

# Those of test_replication_truths, test_lost_coordinator_answers and test_streams run
# there, once, with their evidence checked too (and tests.integration.file_promises).
RUN_ELSEWHERE = {*REPLICATION_SCENARIOS, *LOST_MESSAGE_SCENARIOS, *STREAMS_SCENARIOS}
SCENARIOS = {name: path for name, path in list_scenarios().items() if name not in RUN_ELSEWHERE}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_behaves_as_its_file_says(name, request):
    scenario = load_scenario(SCENARIOS[name])
    cluster = request.getfixturevalue("cluster3" if scenario.nodes == 3 else "cluster1")
    # Spark follows the run; its metrics, the batch job's and the checker's must agree.
    output = run_judged_three_ways(scenario, cluster, SCENARIOS[name].read_text()).output
    assert_as_its_file_says(scenario, cluster, output)


def run_both(first: Scenario, second: Scenario, cluster: Any) -> tuple[dict, dict]:
    """Two runs of a case and its contrast at the same time, as two dashboard sessions run
    on one cluster: each has its own topics, group and transactional ids. Both wait on
    Kafka's transaction timeouts, so together they take the time of one."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(run_scenario, scenario, cluster) for scenario in (first, second)]
        return runs[0].result(), runs[1].result()


def transaction_timeout_variant(**transactions: object):
    """transaction-timeout with one message per transaction (12 more after the stalled one),
    at exactly-once only; `transactions` overrides the scenario's transactions block."""
    scenario = load_scenario(SCENARIOS["transaction-timeout"])
    workload = scenario.workload.model_copy(update={"commit_every": 1})
    return scenario.model_copy(
        update={
            "workload": workload,
            "levels": ["exactly-once"],
            "transactions": {**scenario.transactions, **transactions},
        }
    )


def test_a_producer_fenced_by_its_transaction_timeout_is_restarted_and_finishes(cluster1):
    """The stalled producer's commit is fenced (the coordinator's epoch bump), and no newer
    instance owns its transactional.id: the application starts a new producer, which sends
    what the topic lacks at read_committed. Every id is stored once, nothing is "never sent".
    The contrast: an application that does not restart (restart_when_fenced false) leaves
    the ids it never sent, said as "never sent", not lost."""
    restarted, stopped = run_both(
        transaction_timeout_variant(),
        transaction_timeout_variant(restart_when_fenced=False),
        cluster1,
    )
    result = restarted["results"]["exactly-once"]
    assert result["fenced"] >= 1
    assert (result["lost"], result["never_sent"], result["duplicates"]) == (0, 0, 0)
    ids = kcat_ids(cluster1.direct_bootstrap, result["sink_topic"], "read_committed")
    assert sorted(ids) == list(range(15))
    assert any("the application started a new producer" in c for c in result["explain"]["choices"])
    assert not any("After waking" in e for e in result["explain"]["evidence"])

    stopped = stopped["results"]["exactly-once"]
    assert stopped["fenced"] >= 1
    assert (stopped["lost"], stopped["never_sent"]) == (0, 15 - stopped["sent"])
    assert stopped["never_sent"] >= 1
    ids = kcat_ids(cluster1.direct_bootstrap, stopped["sink_topic"], "read_committed")
    assert sorted(ids) == list(range(stopped["delivered"]))
    assert any(line.startswith("Never sent:") for line in stopped["explain"]["why"])
    assert not any("promise excludes" in line for line in stopped["explain"]["why"])


def test_a_fenced_zombie_producer_whose_replacement_owns_the_id_stops(cluster1):
    """The stalled producer is replaced at once (a zombie when it wakes): the replacement
    claims the transactional.id, so the zombie, fenced, stops instead of starting a new
    producer that would fence its replacement in turn."""
    scenario = transaction_timeout_variant()
    faults = [f.model_copy(update={"replace": True}) for f in scenario.faults]
    output = run_scenario(scenario.model_copy(update={"faults": faults}), cluster1)
    result = output["results"]["exactly-once"]
    assert (result["lost"], result["never_sent"], result["duplicates"]) == (0, 0, 0)
    ids = kcat_ids(cluster1.direct_bootstrap, result["sink_topic"], "read_committed")
    assert sorted(ids) == list(range(15))
    history = record.load_run(output["run_id"]).levels["exactly-once"].history
    zombie = [e["ev"] for e in history if e.get("proc") == "producer"]
    replacement = [e["ev"] for e in history if e.get("proc") == "producer#2"]
    assert "fenced" in zombie and "restart" not in zombie
    assert "fenced" not in replacement and "done" in replacement


def stalled_processor_variant(**transactions: object):
    """zombie at exactly-once without its replacement: the processor freezes at its second
    commit gap for 20 s, past its 5 s transaction.timeout.ms (and its group session)."""
    scenario = load_scenario(SCENARIOS["zombie"])
    faults = [f.model_copy(update={"replace": False, "duration_s": 20}) for f in scenario.faults]
    return scenario.model_copy(
        update={
            "faults": faults,
            "levels": ["exactly-once"],
            "producer_overrides": {"exactly-once": {"transaction.timeout.ms": 5000}},
            "transactions": {**scenario.transactions, **transactions},
        }
    )


def test_a_processor_fenced_by_its_transaction_timeout_restarts_its_producer(cluster1):
    """Nobody replaced the frozen processor: when it wakes, its transaction was aborted by
    the coordinator (the epoch bumped), so the application starts a new producer and reads
    again from the group's committed offsets; every output once, nothing left unprocessed.
    The contrast: without the restart the processor stops fenced and its remaining inputs
    are "not processed yet"."""
    output, stopped = run_both(
        stalled_processor_variant(), stalled_processor_variant(restart_when_fenced=False), cluster1
    )
    result = output["results"]["exactly-once"]
    assert result["txn_calls_refused"] >= 1 and result["writes_refused"] == 0
    assert (result["lost"], result["not_processed"], result["duplicates"]) == (0, 0, 0)
    ids = kcat_ids(cluster1.direct_bootstrap, result["sink_topic"], "read_committed")
    assert sorted(ids) == list(range(30))
    history = record.load_run(output["run_id"]).levels["exactly-once"].history
    assert "restart" in [e["ev"] for e in history if e.get("proc") == "processor"]
    assert any("committed offsets" in c for c in result["explain"]["choices"])

    result = stopped["results"]["exactly-once"]
    assert result["txn_calls_refused"] >= 1 and result["lost"] == 0
    assert result["not_processed"] >= 1
    assert any(line.startswith("Not processed yet:") for line in result["explain"]["why"])


def test_a_processor_that_dies_without_a_replacement_leaves_work_not_processed_yet(cluster1):
    """consumer-crash without its replacement: the inputs past the group's committed offset
    are "not processed yet" (Kafka holds them), not lost; the outputs equal kcat's."""
    scenario = load_scenario(SCENARIOS["consumer-crash"])
    faults = [f.model_copy(update={"replace": False}) for f in scenario.faults]
    variant = scenario.model_copy(update={"faults": faults, "levels": ["at-least-once"]})
    result = run_scenario(variant, cluster1)["results"]["at-least-once"]
    assert result["lost"] == 0
    # The crash is at the second batch's commit gap: its outputs (ids 5-9) are written, its
    # offsets are not committed, and ids 10-29 were never processed.
    assert result["not_processed"] == 20 and result["delivered"] == 10
    ids = kcat_ids(cluster1.direct_bootstrap, result["sink_topic"], "read_uncommitted")
    assert sorted(set(ids)) == list(range(10))
    assert any(line.startswith("Not processed yet:") for line in result["explain"]["why"])
