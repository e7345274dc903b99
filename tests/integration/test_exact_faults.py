"""Faults at exact program points give exact counts, on a real cluster, at several settings.

The processor stops itself in the commit gap of its second batch and the nemesis SIGKILLs
it there (engine.proc.failpoints). That batch is then lost at at-most-once (offsets committed, no
output written) and written twice at at-least-once (outputs acknowledged, offsets not
committed), whatever the batch size, partitions and processing time. The batch is the one
the fault point names in the history, so each count is checked against it exactly, and
against kcat.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from engine.model.levels import LEVELS, PROCESSOR_CONSUMER
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.kafkatools import kcat_values

pytestmark = pytest.mark.kafka


def with_workload(name: str, **workload) -> object:
    scenario = load_scenario(list_scenarios()[name])
    return scenario.model_copy(
        update={"workload": scenario.workload.model_copy(update=workload), "expect": {}}
    )


def stopped_batch(run_id: str, level: str) -> list[int]:
    """The ids of the batch that the fault point stopped the processor in, from the history."""
    history = record.load_run(run_id).levels[level].history
    reached = [e for e in history if e["ev"] == "failpoint_reached"]
    assert len(reached) == 1, "the first processor stops once, at its fault point"
    assert reached[0]["point"] == "after commit_gap #2"
    signal = [e for e in history if e["ev"] == "nemesis" and e["kind"] in ("crash", "pause")]
    assert signal and signal[0]["t"] >= reached[0]["t"], "the signal came at the point"
    return [i for i in reached[0]["at"]["ids"] if i is not None]


def kcat_copies(cluster, result) -> Counter:
    values = kcat_values(
        cluster.direct_bootstrap, result["sink_topic"], isolation=result["isolation"]
    )
    return Counter(json.loads(v)["id"] for v in values)


@pytest.mark.parametrize(
    ("commit_every", "partitions", "processing_ms"),
    [(1, 1, 0), (2, 3, 10), (5, 1, 40), (10, 3, 0)],
)
def test_a_crash_in_the_commit_gap_loses_or_repeats_exactly_one_batch(
    cluster1, commit_every, partitions, processing_ms
):
    messages = 3 * commit_every + 2
    scenario = with_workload(
        "consumer-crash",
        messages=messages,
        commit_every=commit_every,
        partitions=partitions,
        processing_ms=processing_ms,
    )
    levels = ["at-most-once", "at-least-once", "exactly-once"]
    output = run_scenario(scenario, cluster1, levels=levels)
    results = output["results"]
    for level in levels:
        batch = stopped_batch(output["run_id"], level)
        assert 1 <= len(batch) <= commit_every
        if partitions == 1:
            assert len(batch) == commit_every  # the input is all there before the processor
        copies = kcat_copies(cluster1, results[level])
        if level == "at-most-once":
            assert results[level]["lost"] == len(batch)
            assert results[level]["duplicates"] == 0
            assert set(range(messages)) - set(copies) == set(batch), "kcat: the batch is gone"
        elif level == "at-least-once":
            assert results[level]["duplicates"] == len(batch)
            assert results[level]["lost"] == 0
            assert {i for i, n in copies.items() if n > 1} == set(batch), "kcat: twice"
        else:
            assert results[level]["duplicates"] == results[level]["lost"] == 0
            assert set(copies) == set(range(messages)) and max(copies.values()) == 1


def test_a_zombie_is_fenced_by_its_group_and_its_numbers_are_explained(cluster1):
    """Freeze in the commit gap, a replacement with the same group.instance.id, then wake.

    The lab fixes the order (the zombie wakes after the replacement has finished), so the
    counts are exact: at-least-once repeats the frozen batch, at-most-once neither loses nor
    repeats it (the zombie writes it, the replacement never reads it), exactly-once fences.
    """
    scenario = with_workload("zombie", messages=20, commit_every=4, processing_ms=10)
    output = run_scenario(scenario, cluster1)
    results = output["results"]
    run = record.load_run(output["run_id"])
    for level in scenario.levels:
        batch = stopped_batch(output["run_id"], level)
        assert len(batch) == 4
        result = results[level]
        explained = result["explain"]
        if level == "at-least-once":
            assert result["duplicates"] == 4 and result["lost"] == 0
            # Every output landed: the group refused the zombie, no write was refused.
            assert (result["writes_refused"], result["commits_refused"]) == (0, 1)
            fenced = [e for e in run.levels[level].history if e["ev"] == "fenced"]
            assert fenced and fenced[0]["error"] in ("FENCED_INSTANCE_ID", "_FATAL")
            assert fenced[0]["by"] == "group coordinator"
            assert any("At least once allows this" in w for w in explained["why"])
        elif level == "at-most-once":
            assert result["duplicates"] == 0 and result["lost"] == 0
            assert any("After waking, processor wrote ids" in e for e in explained["evidence"])
        else:
            assert result["duplicates"] == 0 and result["lost"] == 0
            # Its outputs were in before it froze: its AddOffsetsToTxn was refused, no write.
            assert (result["writes_refused"], result["txn_calls_refused"]) == (0, 1)
        assert any("frozen (SIGSTOP) at its fault point" in e for e in explained["evidence"])
        # The clients ran with the settings the home page shows, plus names only.
        history = run.levels[level].history
        starts = {e["proc"]: e for e in history if e["ev"] == "start"}
        assert PROCESSOR_CONSUMER.items() <= starts["processor"]["consumer_config"].items()
        assert LEVELS[level].consumer.items() <= starts["sink"]["config"].items()
        assert set(starts["sink"]["config"]) - set(LEVELS[level].consumer) == {
            "bootstrap.servers",
            "client.id",
            "group.id",
        }


# Moments the zombie scenario does not strike at (its own is the second commit gap), each
# with what the exactly-once zombie is refused when it wakes: (writes, transaction calls).
ZOMBIE_MOMENTS = {
    # Between the batch's reads and its transaction: the coordinator refuses AddPartitionsToTxn.
    "consumed": (7, (0, 1)),
    # After its first output of the batch was acknowledged, the rest still to send: the
    # partition leader refuses the next Produce (INVALID_PRODUCER_EPOCH).
    "output_acked": (6, (1, 0)),
}


@pytest.mark.parametrize("event", sorted(ZOMBIE_MOMENTS))
def test_a_zombie_struck_anywhere_counts_what_was_refused(cluster1, event):
    """The zombie frozen at another moment, replaced, woken: each level counts what it was
    refused, by kind. At at-least-once nothing stops its writes (only its group refuses it);
    at exactly-once its epoch refuses a write or a call of its transaction, as the moment
    decides, and the headline says which."""
    count, (writes, calls) = ZOMBIE_MOMENTS[event]
    scenario = load_scenario(list_scenarios()["zombie"])
    when = scenario.faults[0].when.model_copy(update={"event": event, "count": count})
    variant = scenario.model_copy(
        update={
            "faults": [scenario.faults[0].model_copy(update={"when": when})],
            "levels": ["at-least-once", "exactly-once"],
            "expect": {},
        }
    )
    results = run_scenario(variant, cluster1)["results"]
    late = results["at-least-once"]
    assert (late["writes_refused"], late["commits_refused"], late["txn_calls_refused"]) == (
        0,
        1,
        0,
    )
    exact = results["exactly-once"]
    assert (exact["writes_refused"], exact["txn_calls_refused"]) == (writes, calls)
    assert exact["duplicates"] == exact["lost"] == 0
    headline = exact["explain"]["headline"]
    assert ("zombie write fenced" in headline) == bool(writes), headline
    assert ("transaction call refused" in headline) == bool(calls), headline


def test_a_replacement_producer_decides_from_its_outbox_or_from_kafka(cluster1):
    scenario = load_scenario(list_scenarios()["producer-crash"])
    output = run_scenario(scenario, cluster1)
    run = record.load_run(output["run_id"])
    policies = {}
    for level in scenario.levels:
        history = run.levels[level].history
        resumes = [e for e in history if e["ev"] == "resume"]
        assert len(resumes) == 1
        policies[level] = (resumes[0]["policy"], resumes[0]["source"])
        assert any(
            "replacement producer" in c for c in output["results"][level]["explain"]["choices"]
        )
    assert policies["at-most-once"][0] == "never-resend"
    assert policies["at-least-once"][0] == policies["idempotent-only"][0] == "resend-unacked"
    assert policies["exactly-once"] == ("read-committed", "the topic read at read_committed")
