"""When every replica of a partition dies: what Kafka does, checked on three real nodes.

Each scenario runs once on the 3-node cluster. Its counts must equal kcat's reading of the
same topic, and its evidence must come from Kafka: the leader and ISR from metadata, the
eligible leader replicas from Kafka's topic tool, and the brokers' own log lines.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.integration.file_promises import assert_lessons_hold
from tests.kafkatools import kcat_values
from tests.metrics.followed import Judged, assert_three_ways_agree, run_judged_three_ways

pytestmark = pytest.mark.kafka

REPLICATION_SCENARIOS = (
    "all-replicas-down",
    "unclean-election",
    "leader-disk-lost",
    "leader-moves",
)


def _judged(name: str, cluster: Any, *, trust_the_follower: bool = False) -> Judged:
    """Run `name` (Spark following it: tests/metrics/followed.py); check kcat's counts."""
    path = list_scenarios()[name]
    scenario = load_scenario(path)
    judged = run_judged_three_ways(
        scenario, cluster, path.read_text(), trust_the_follower=trust_the_follower
    )
    output = judged.output
    for result in output["results"].values():
        # The counts equal an independent client's reading of the same topic.
        topic = result["sink_topic"]
        ids = [json.loads(v)["id"] for v in kcat_values(cluster.direct_bootstrap, topic)]
        assert result["delivered"] == len(Counter(ids))
        assert result["duplicates"] == len(ids) - len(Counter(ids))
        assert result["lost"] == scenario.workload.messages - len(Counter(ids))
    assert not (unmet := scenario.unmet_expectations(output["results"])), (name, unmet)
    assert_lessons_hold(name, output["results"])
    return judged


def _run_levels(name: str, cluster: Any) -> dict[str, dict[str, Any]]:
    return _judged(name, cluster).output["results"]


def _run(name: str, cluster: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    result = _run_levels(name, cluster)["at-least-once"]
    return result, result["faults"]


def _kinds(faults: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in faults if f.get("kind") == kind and f.get("source") != "proxy"]


def test_with_unclean_election_off_the_partition_waits_offline_for_its_last_leader(cluster3):
    result, faults = _run("all-replicas-down", cluster3)
    leader = _kinds(faults, "kill-leader")[0]["node"]
    follower_back = _kinds(faults, "node-ready")[0]
    assert follower_back["node"] == _kinds(faults, "kill-follower")[0]["node"]
    # After the follower was back, the cluster reported the partition without a leader...
    offline = [f for f in _kinds(faults, "isr") if f["leader"] == -1]
    assert offline and offline[0]["t"] > follower_back["t"]
    # ...and Kafka's tool named the dead leader as the one that may lead it again.
    assert any(leader in f["elr"] or leader in f["last_known_elr"] for f in _kinds(faults, "elr"))
    # It did: nothing acknowledged was lost.
    assert result["lost"] == 0 and result["acked"] == 20


def test_with_unclean_election_on_the_stale_follower_leads_and_acknowledged_data_is_lost(cluster3):
    result, faults = _run("unclean-election", cluster3)
    leader = _kinds(faults, "kill-leader")[0]["node"]
    follower = _kinds(faults, "kill-follower")[0]["node"]
    alone = [f for f in _kinds(faults, "isr") if f["isr"] == [leader]]
    assert alone, "the leader was never alone in the ISR"
    # The cluster's metadata, or Kafka's topic tool, reported the follower leading.
    assert any(f["leader"] == follower for f in _kinds(faults, "isr") + _kinds(faults, "elr"))
    lines = [(f["node"], f["line"]) for f in _kinds(faults, "broker-log")]
    assert any(f"leader: {leader} -> {follower}" in line and "UNCLEAN" in line for _, line in lines)
    # The old leader cut its own log back to the new leader's when it returned.
    assert any(node == leader and "Truncating to offset" in line for node, line in lines)
    assert result["lost"] >= 1 and result["acked"] == 20
    assert "unclean leader election" in " ".join(result["explain"]["why"])


def test_a_last_leader_back_with_an_empty_disk_leads_and_the_follower_truncates_to_it(cluster3):
    judged = _judged("leader-disk-lost", cluster3, trust_the_follower=True)
    result = judged.output["results"]["at-least-once"]
    faults = result["faults"]
    leader = _kinds(faults, "kill-leader")[0]["node"]
    follower = _kinds(faults, "kill-follower")[0]["node"]
    assert _kinds(faults, "wipe-partition")[0]["node"] == leader
    # The cluster reported the high watermark back at 0 under the same leader.
    went_back = [f for f in _kinds(faults, "isr")[1:] if f["high_watermark"] == 0]
    readings = [(f["leader"], f["isr"], f["high_watermark"]) for f in _kinds(faults, "isr")]
    assert any(f["leader"] == leader for f in went_back), readings
    lines = [(f["node"], f["line"]) for f in _kinds(faults, "broker-log")]
    assert any(node == follower and "Truncating to offset 0" in line for node, line in lines)
    # Every acknowledged message is gone, the ones both replicas held included.
    assert result["lost"] == 20 and result["acked"] == 20

    # Spark's streaming queries had read the 20 before the disk was lost, and kept them: a
    # copy that counted them would show no loss. The leader's epoch says a leader changed,
    # which is why the lab refuses that copy (RunFollower.leader_changes); trusted here
    # anyway, it disagrees with Kafka, the batch job and the checker.
    assert judged.leader_changes
    followed = judged.streamed["results"]["at-least-once"]
    assert (followed["delivered"], followed["lost"]) == (20, 0)
    assert judged.batch["results"]["at-least-once"]["lost"] == 20
    with pytest.raises(AssertionError):
        assert_three_ways_agree(judged)


def test_a_leader_that_shuts_down_cleanly_answers_not_leader_and_the_retry_stores_once(cluster3):
    """NOT_LEADER_OR_FOLLOWER, beside retry-reorder's REQUEST_TIMED_OUT: several requests are
    in flight and all are answered so at once, and the retries lose nothing. The order holds
    at idempotent-only; at at-least-once a write the new leader had already copied may be
    stored twice, and a second copy may follow later ids, so only loss is asserted there."""
    for level, result in _run_levels("leader-moves", cluster3).items():
        faults = result["faults"]
        leader = _kinds(faults, "stop-leader")[0]["node"]
        answers = [
            f for f in faults if f.get("source") == "proxy" and f.get("kind") == "produce_error"
        ]
        assert answers and {a["error"] for a in answers} == {"NOT_LEADER_OR_FOLLOWER"}, level
        # The old leader answers first; the new one may answer the same for a moment, before
        # it has applied its election (seen in CI: its second request on a new connection).
        assert answers[0]["node"] == leader, level
        new_leaders = {f["leader"] for f in _kinds(faults, "isr")} - {leader}
        assert {a["node"] for a in answers} <= {leader} | new_leaders, level
        # Several requests were in flight (batch: true) and were answered together: by the
        # old leader (5 or 6 in 17 of 18 runs kept from the test sessions), or, when the old leader
        # had one request in flight as it stopped leading, by the new one before it had
        # applied its election (1 and 6 in the 18th).
        together = Counter(a["node"] for a in answers)
        assert max(together.values()) >= 2, (level, together)
        assert result["lost"] == 0, level
        if level == "idempotent-only":
            assert (result["duplicates"], result["reordered"]) == (0, 0), level
        assert any(f["leader"] != leader for f in _kinds(faults, "isr")), level
        # Truncation is logged only when the old leader held writes it had not replicated.
        lines = [(f["node"], f["line"]) for f in _kinds(faults, "broker-log")]
        assert all(node == leader for node, line in lines if "Truncating" in line)
        evidence = " ".join(result["explain"]["evidence"])
        assert "no longer leads the partition" in evidence
