"""The dashboard's shared cluster service: node faults one at a time, announced to everyone.

A stand-in cluster records when each action runs; this tests the service's own logic (the
lock and the announcements), not Kafka.
"""

from __future__ import annotations

import threading
import time

from pages._shared import ClusterService


class RecordingCluster:
    backend = "local"
    node_ids = (1, 2, 3)

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []

    def kill_node(self, node_id: int) -> None:
        began = time.monotonic()
        time.sleep(0.2)
        self.spans.append((began, time.monotonic()))

    pause_node = kill_node


def test_node_actions_from_two_sessions_never_overlap_and_both_are_announced():
    service = ClusterService()
    cluster = RecordingCluster()
    service.cluster, service.state = cluster, "ready"
    threads = [
        threading.Thread(target=service.node_action, args=("kill", 1)),
        threading.Thread(target=service.node_action, args=("pause", 2)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (_, first_end), (second_start, _) = sorted(cluster.spans)
    assert first_end <= second_start, "the second action waited for the first"
    texts = [a.text for a in service.announcements]
    assert "node 1: kill" in texts and "node 2: pause" in texts


def test_a_run_that_hurts_brokers_holds_the_cluster_and_says_why():
    service = ClusterService()
    service.cluster, service.state = RecordingCluster(), "ready"
    with service.exclusive("broker-failover is killing and pausing brokers"):
        waiter = threading.Thread(target=service.node_action, args=("kill", 3))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive(), "a node action waits while a broker-fault run holds the cluster"
    waiter.join(2)
    texts = [a.text for a in service.announcements]
    assert texts[0].startswith("broker-failover is killing and pausing brokers")
    assert "node 3: kill" in texts
