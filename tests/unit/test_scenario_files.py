"""Scenario files validate, and bad ones fail with the file, the field and the reason."""

from __future__ import annotations

import pytest

from engine.base.errors import LabError
from engine.scenarios.scenario import ScenarioError, list_scenarios, load_scenario, parse_scenario

VALID = """
name: demo
title: Demo
workload: {messages: 5}
faults:
  - kind: drop-produce-response
    nth: 1
"""

SHARED = """
name: demo
title: Demo
nodes: 3
replication: 3
shared_faults: true
faults:
  - kind: kill-leader
    when: {at_s: 1}
"""


def test_every_shipped_scenario_validates():
    names = set(list_scenarios())
    assert {
        "ack-loss",
        "network-blip",
        "producer-crash",
        "consumer-crash",
        "commit-before-process",
        "zombie",
        "broker-failover",
        "aborted-transaction",
        "auto-commit-loss",
        "auto-commit-duplicates",
        "transaction-timeout",
        "isr-shrink",
    } <= names
    for path in list_scenarios().values():
        scenario = load_scenario(path)
        assert scenario.name == path.stem
        assert set(scenario.expect) <= set(scenario.levels)


def test_a_valid_scenario_parses():
    scenario = parse_scenario(VALID, "demo.yaml")
    assert scenario.workload.messages == 5
    assert scenario.levels == ["at-most-once", "at-least-once", "exactly-once"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\ntitle: [unclosed", "demo.yaml: not valid YAML at line 2"),
        ("- a\n- b\n", "demo.yaml: a scenario is a YAML mapping"),
        (VALID + "levels: [at-most-twice]\n", "levels: unknown level 'at-most-twice'"),
        (
            VALID.replace("messages: 5", "messages: -3"),
            "workload.messages: Input should be greater than 0",
        ),
        (
            VALID.replace("drop-produce-response", "flood"),
            "faults.0.kind: unknown fault kind 'flood'; known kinds: blackhole, crash,",
        ),
        # Each kind takes only its own parameters (engine/faults/NAME.py declares them).
        (
            VALID.replace("drop-produce-response", "crash"),
            "faults.0: crash does not take nth (it takes: replace, resend_unacked, target)",
        ),
        (
            VALID.replace("drop-produce-response", "kill-leader"),
            "faults.0: kill-leader does not take nth (it takes: no parameter besides when and "
            "delay_s)",
        ),
        (
            VALID.replace("drop-produce-response\n    nth: 1", "wipe-partition\n    target: x"),
            "faults.0: wipe-partition takes target: leader or target: follower",
        ),
        # Where a kind is available: a follower needs a second node.
        (
            VALID.replace("drop-produce-response\n    nth: 1", "kill-follower"),
            "demo.yaml: faults.0: kill-follower cannot run here: it needs at least 2 nodes",
        ),
        (VALID + "colour: blue\n", "colour: Extra inputs are not permitted"),
        (VALID.replace("name: demo", "name: Demo Run!"), "name: use lower-case letters"),
        (VALID + "nodes: 1\nreplication: 3\n", "replication 3 needs at least that many nodes"),
        (VALID + "auto_commit: {interval_ms: 1000}\n", "auto_commit is the processor's"),
        (
            VALID + "replicas_avoid_controller: true\n",
            "replicas_avoid_controller places 2 replicas",
        ),
        (
            VALID + "pipeline: processor\nauto_commit: {interval_ms: 1000}\n",
            "and exactly-once commits inside its transaction",
        ),
        (
            VALID + "pipeline: processor\nlevels: [at-least-once]\nauto_commit: {interval_ms: 5}\n",
            "auto_commit.interval_ms: Input should be greater than or equal to 100",
        ),
        (VALID + "shared_faults: true\n", "shared_faults places one leader"),
        (
            VALID + "nodes: 3\nreplication: 3\nshared_faults: true\n",
            "'drop-produce-response' must be a broker fault",
        ),
        (
            SHARED + "  - kind: restart-nodes\n    when: {process: proxy, event: x}\n",
            "'restart-nodes' must be a broker fault with when: {at_s: ...} or when: {process: "
            "producer, ...}",
        ),
        (SHARED + "watch_offsets: true\n", "leave out watch_offsets"),
        (
            SHARED.replace("replication: 3", "replication: 2")
            + "replicas_avoid_controller: true\n",
            "and replicas_avoid_controller",
        ),
        (SHARED + "watch_isr: true\nwatch_elr: true\n", None),
        (SHARED + "pipeline: processor\n", "shared_faults is for pipeline: producer"),
    ],
)
def test_bad_scenarios_name_file_field_and_reason(text, message):
    if message is None:  # the contrast: the same file with a field that is allowed
        parse_scenario(text, "demo.yaml")
        return
    with pytest.raises(ScenarioError) as error:
        parse_scenario(text, "demo.yaml")
    assert str(error.value).startswith("demo.yaml: ")
    assert message in str(error.value)
    assert "Traceback" not in str(error.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.yaml")


def test_unmet_expectations_names_each_broken_promise():
    scenario = load_scenario(list_scenarios()["ack-loss"])
    scenario = scenario.model_copy(
        update={
            "expect": {"at-least-once": {"duplicates": ">=1", "lost": "0", "delivered": "<=20"}}
        }
    )
    good = {"at-least-once": {"duplicates": 1, "lost": 0, "delivered": 20}}
    assert scenario.unmet_expectations(good) == []
    bad = {"at-least-once": {"duplicates": 0, "lost": 2, "delivered": 21}}
    assert scenario.unmet_expectations(bad) == [
        "at-least-once: duplicates = 0, expected >=1",
        "at-least-once: lost = 2, expected 0",
        "at-least-once: delivered = 21, expected <=20",
    ]


def test_every_scenario_says_what_it_teaches_for_each_level_it_runs():
    for name, path in list_scenarios().items():
        scenario = load_scenario(path)
        assert set(scenario.teaches) == set(scenario.levels), name


def test_settings_that_cannot_reach_the_fault_are_refused_with_the_reason():
    crash = load_scenario(list_scenarios()["consumer-crash"])
    assert crash.cannot_teach() is None

    def at(scenario, **workload):
        return scenario.model_copy(
            update={"workload": scenario.workload.model_copy(update=workload)}
        )

    # The crash is in the second batch: 5 messages at 5 per commit make one batch.
    reason = at(crash, messages=5, commit_every=5).cannot_teach()
    assert reason is not None and "Use at least 6 messages" in reason
    assert at(crash, messages=6, commit_every=5).cannot_teach() is None
    # The third Produce request's answer is lost: two messages make two requests.
    ack_loss = load_scenario(list_scenarios()["ack-loss"])
    assert "Use more messages" in (at(ack_loss, messages=2).cannot_teach() or "")
    # Transaction 2 is aborted: 25 messages in transactions of 25 make one.
    aborted = load_scenario(list_scenarios()["aborted-transaction"])
    assert "nothing would be aborted" in (at(aborted, commit_every=25).cannot_teach() or "")
    assert at(aborted, commit_every=20).cannot_teach() is None
    # The producer stalls in its third transaction: 15 messages at 10 per transaction make two.
    stall = load_scenario(list_scenarios()["transaction-timeout"])
    reason = at(stall, commit_every=10).cannot_teach() or ""
    assert "writes 2 transaction(s)" in reason and "Use at least 21 messages" in reason
    assert at(stall, commit_every=5).cannot_teach() is None
    # The second OffsetCommit (EndTxn) is lost: 20 messages at 20 per commit send one.
    for name, request in (
        ("commit-request-lost", "OffsetCommit"),
        ("end-txn-answer-lost", "EndTxn"),
    ):
        lost = load_scenario(list_scenarios()[name])
        reason = at(lost, commit_every=20).cannot_teach() or ""
        assert f"loses {request} request 2" in reason and "Use at least 21 messages" in reason
        assert at(lost, commit_every=10).cannot_teach() is None


def test_a_malformed_teaches_bound_names_the_field():
    with pytest.raises(ScenarioError, match=r"at-least-once.duplicates: 'many' is not a count"):
        parse_scenario(
            "name: x\ntitle: X\nteaches: {at-least-once: {duplicates: many}}\n", "x.yaml"
        )


def test_how_the_levels_share_time():
    from engine.run.runner import schedule_of

    scenarios = list_scenarios()
    ack_loss = load_scenario(scenarios["ack-loss"])
    failover = load_scenario(scenarios["broker-failover"])
    leader_moves = load_scenario(scenarios["leader-moves"])
    assert schedule_of(ack_loss) == "side-by-side"
    assert schedule_of(ack_loss, False) == "one-at-a-time"
    assert schedule_of(failover) == "shared-faults"
    assert schedule_of(failover, True) == "shared-faults"
    assert schedule_of(failover, False) == "one-at-a-time"
    assert schedule_of(leader_moves) == "one-at-a-time"
    with pytest.raises(LabError, match="run one at a time"):
        schedule_of(leader_moves, True)


def test_a_scenario_whose_story_needs_a_newer_kafka_is_refused_in_one_line_before_it_runs():
    """all-replicas-down's election is ELR's, which new clusters have from Kafka 4.1: on a
    4.0.0 cluster the run is refused before any topic is made; on 4.1.2 and 4.4.0 it is not."""
    from types import SimpleNamespace

    from engine.run.runner import run_scenario

    scenario = load_scenario(list_scenarios()["all-replicas-down"])
    assert scenario.kafka_from is not None
    assert [scenario.kafka_from.refuses(v) for v in ("4.0.0", "4.1.2", "4.4.0", "5.0.0")] == [
        True,
        False,
        False,
        False,
    ]
    cluster = SimpleNamespace(node_ids=[1, 2, 3], kafka_version="4.0.0")
    with pytest.raises(LabError) as refused:
        run_scenario(scenario, cluster)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message
    assert "needs Kafka 4.1 or newer" in message and "runs Kafka 4.0.0" in message
    assert "--kafka-version" in message
    unrestricted = [n for n, p in list_scenarios().items() if load_scenario(p).kafka_from is None]
    assert "ack-loss" in unrestricted


def test_kafka_from_takes_a_major_minor_release():
    with pytest.raises(ScenarioError, match="kafka_from"):
        parse_scenario(VALID + 'kafka_from: {version: "4.1.2", why: "a reason long enough"}\n')
