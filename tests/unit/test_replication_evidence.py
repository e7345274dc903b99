"""Pure parsing of what Kafka's own tools and logs say about a partition's replicas."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from engine.cluster.embedded import log_lines_since
from engine.kafka.elr import PartitionReplicas, parse_describe, replication_log_lines
from engine.scenarios.scenario import ScenarioError, parse_scenario

DESCRIBE = (
    "Topic: t\tTopicId: AbC\tPartitionCount: 1\tReplicationFactor: 2\t"
    "Configs: min.insync.replicas=1,unclean.leader.election.enable=true\n"
    "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 2,3\tIsr: \tElr: 2\tLastKnownElr: 2\n"
)


def test_the_topic_tool_line_is_parsed_with_no_leader_and_an_elr() -> None:
    assert parse_describe(DESCRIBE) == PartitionReplicas(
        leader=-1, replicas=(2, 3), isr=(), elr=(2,), last_known_elr=(2,)
    )


def test_a_led_partition_and_an_absent_one() -> None:
    led = "\tTopic: t\tPartition: 0\tLeader: 3\tReplicas: 2,3\tIsr: 3,2\tElr: \tLastKnownElr: \n"
    assert parse_describe(led) == PartitionReplicas(3, (2, 3), (3, 2), (), ())
    assert parse_describe(led, partition=1) is None
    assert parse_describe("Error while executing topic command") is None


def test_several_topics_in_one_describe_are_told_apart() -> None:
    """One run of the tool for every level's topic (ElrWatch): each line by its topic."""
    two = (
        "\tTopic: run-a.judged\tPartition: 0\tLeader: 2\tReplicas: 2,3\tIsr: 2\tElr: 3\t"
        "LastKnownElr: \n"
        "\tTopic: run-b.judged\tPartition: 0\tLeader: 2\tReplicas: 2,3\tIsr: 2,3\tElr: \t"
        "LastKnownElr: \n"
    )
    assert parse_describe(two, topic="run-b.judged") == PartitionReplicas(2, (2, 3), (2, 3), (), ())
    assert parse_describe(two, topic="run-a.judged") == PartitionReplicas(2, (2, 3), (2,), (3,), ())
    assert parse_describe(two, topic="run-c.judged") is None
    # Without the topic, the first line would be taken for any topic's.
    assert parse_describe(two) == parse_describe(two, topic="run-a.judged")


def test_unclean_and_truncation_lines_are_picked_by_partition() -> None:
    change = "UNCLEAN partition change for run-a-0 with topic ID x: isr: [2] -> [3]"
    logs = {
        1: [f"[2026-01-01 10:00:05,000] INFO [QuorumController id=1] {change}"],
        2: [
            "[2026-01-01 10:00:01,000] INFO [UnifiedLog partition=run-a-0, dir=/d] Truncating to "
            "0 has no effect as the largest offset in the log is -1",
            f"[2026-01-01 10:00:02,000] INFO [QuorumController id=2] {change}",
            "[2026-01-01 10:00:09,000] INFO [UnifiedLog partition=run-a-0, dir=/d] Truncating to "
            "offset 4",
            "[2026-01-01 10:00:09,000] INFO [UnifiedLog partition=other-0, dir=/d] Truncating to "
            "offset 9",
            "[2026-01-01 10:00:09,500] INFO something else about run-a-0",
        ],
    }
    found = replication_log_lines(logs, "run-a")
    # The election once, from the controller that logged it first; then the truncation.
    assert [node for node, _ in found] == [2, 2]
    assert "id=2] UNCLEAN" in found[0][1]
    assert found[1][1].endswith("Truncating to offset 4")


def test_log_lines_since_follows_log4j_stamps() -> None:
    def stamp(t: float) -> str:
        return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S,%f")[:23]

    now = time.time()
    lines = [
        f"[{stamp(now - 60)}] INFO old",
        f"[{stamp(now + 1)}] INFO new",
        "\tat a.stack.Trace",
        f"[{stamp(now + 2)}] INFO newer",
    ]
    assert log_lines_since(lines, now) == lines[1:]
    assert log_lines_since(lines, now + 60) == []


BASE = """
name: x
title: x
nodes: 3
replication: 2
levels: [at-least-once]
faults:
  - kind: kill-follower
  - kind: {kind}
    target: {target}
"""


@pytest.mark.parametrize("kind", ["restart-nodes", "wipe-partition"])
def test_node_faults_name_the_leader_or_the_follower(kind: str) -> None:
    assert parse_scenario(BASE.format(kind=kind, target="follower")).faults[1].target == (
        "follower"
    )
    with pytest.raises(ScenarioError, match="target: leader or target: follower"):
        parse_scenario(BASE.format(kind=kind, target="producer"))


def test_the_watch_reports_a_new_leader_or_isr_and_a_high_watermark_going_back() -> None:
    from engine.kafka.reader import PartitionWatch

    samples = [
        (1, (1, 2), 0),
        (1, (1, 2), 5),  # more written: not a change
        (1, (1,), 6),  # the ISR shrank
        (1, (1,), 20),
        (1, (1,), 0),  # the high watermark went back
        (-1, (), None),  # offline
        (3, (3,), None),  # a new leader, not answering yet
        (3, (3,), None),
        (3, (3,), 5),  # its high watermark, once read
        (3, (3,), 6),
    ]
    watch = PartitionWatch.__new__(PartitionWatch)  # no consumer: only the change logic
    watch._last = None
    feed = iter(samples)
    watch.sample = lambda: next(feed)  # type: ignore[method-assign]
    reported = [watch.changed() for _ in samples]
    assert reported == [
        samples[0],
        None,
        samples[2],
        None,
        samples[4],
        samples[5],
        samples[6],
        None,
        samples[8],
        None,
    ]


def test_the_longest_lso_stall_is_told_from_the_readings() -> None:
    from engine.judging.explain import longest_lso_stall

    def reading(t: float, lso: int, hw: int) -> dict:
        return {"t": t, "ev": "nemesis", "kind": "offsets", "lso": lso, "high_watermark": hw}

    history = [
        reading(0.0, 0, 0),
        reading(0.1, 0, 5),  # a short transaction
        reading(0.2, 6, 6),
        reading(1.0, 12, 16),  # the stalled one: 10 s at 12
        reading(2.0, 12, 17),
        reading(11.0, 18, 18),
    ]
    text = longest_lso_stall(history)
    assert text is not None
    assert "at 12 for 10.0 s" in text and "up to 17" in text
    assert longest_lso_stall(history[:3]) is None  # under half a second
