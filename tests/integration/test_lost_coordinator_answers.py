"""A lost answer is not a lost request: offset commits and transaction commits, on a broker.

The fault proxy loses the group or transaction coordinator's answer (the coordinator has
handled the request), or the request itself (it never has), and holds the connection
silent, as a network path that stays down would. The processor is killed while it waits,
and where its replacement starts reading, the group's committed offset, shows which of the
two happened. Counts equal kcat's.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from engine.run import record
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.integration.file_promises import assert_lessons_hold
from tests.kafkatools import kcat_values
from tests.metrics.followed import run_judged_three_ways

pytestmark = pytest.mark.kafka

# scenario -> (the proxy's event, where the replacement starts, duplicates)
LOST_MESSAGE_SCENARIOS = {
    "commit-answer-lost": ("offset_commit_response_dropped", 10, 0),
    "commit-request-lost": ("offset_commit_request_dropped", 5, 5),
    "end-txn-answer-lost": ("end_txn_response_dropped", 10, 0),
    "end-txn-request-lost": ("end_txn_request_dropped", 5, 0),
}


@pytest.mark.parametrize("name", sorted(LOST_MESSAGE_SCENARIOS))
def test_the_replacement_starts_where_the_coordinator_says(name, cluster1):
    event, start, duplicates = LOST_MESSAGE_SCENARIOS[name]
    path = list_scenarios()[name]
    scenario = load_scenario(path)
    output = run_judged_three_ways(scenario, cluster1, path.read_text()).output  # Spark agrees
    [(level, result)] = output["results"].items()
    assert not (unmet := scenario.unmet_expectations(output["results"])), (name, unmet)
    assert_lessons_hold(name, output["results"])

    ids = [
        json.loads(v)["id"]
        for v in kcat_values(
            cluster1.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
        )
    ]
    assert result["delivered"] == len(Counter(ids)) == scenario.workload.messages
    assert result["duplicates"] == len(ids) - len(Counter(ids)) == duplicates

    dropped = [f for f in result["faults"] if f.get("source") == "proxy" and f["kind"] == event]
    assert len(dropped) == 1, [f["kind"] for f in result["faults"]]
    history = record.load_run(output["run_id"]).levels[level].history
    first_read = next(e for e in history if e["proc"] == "processor#2" and e["ev"] == "consumed")
    assert first_read["offset"] == start
    assert any("correlation id" in line for line in result["explain"]["evidence"])
