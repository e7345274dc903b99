"""The dashboard's shared cluster service: node faults one at a time, announced to everyone.

A stand-in cluster records when each action runs; this tests the service's own logic (the
lock and the announcements), not Kafka.
"""

from __future__ import annotations

import threading
import time

import pytest

from engine.base.errors import LabError
from engine.cluster.service import ClusterService, node_advice


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


def hold(lock_cm, spans: list, name: str, seconds: float = 0.2) -> None:
    with lock_cm:
        began = time.monotonic()
        time.sleep(seconds)
        spans.append((name, began, time.monotonic()))


def test_runs_share_the_cluster_but_a_broker_fault_run_waits_for_them_and_runs_alone():
    service = ClusterService()
    service.cluster, service.state = RecordingCluster(), "ready"
    spans: list = []
    first = [
        threading.Thread(target=hold, args=(service.shared(), spans, f"run{i}")) for i in (1, 2)
    ]
    for thread in first:
        thread.start()
    time.sleep(0.05)
    alone = threading.Thread(
        target=hold, args=(service.exclusive("broker-failover is hurting brokers"), spans, "alone")
    )
    alone.start()
    time.sleep(0.05)
    # A run arriving while the broker-fault run waits queues behind it (no starvation).
    late = threading.Thread(target=hold, args=(service.shared(), spans, "late"))
    late.start()
    for thread in [*first, alone, late]:
        thread.join(5)
        assert not thread.is_alive(), "no deadlock"
    by_name = {name: (began, ended) for name, began, ended in spans}
    assert by_name["run1"][0] < by_name["run2"][1] and by_name["run2"][0] < by_name["run1"][1]
    assert by_name["alone"][0] >= max(by_name["run1"][1], by_name["run2"][1])
    assert by_name["late"][0] >= by_name["alone"][1]


def test_many_sessions_mixing_runs_and_node_actions_all_finish():
    service = ClusterService()
    service.cluster, service.state = RecordingCluster(), "ready"
    spans: list = []
    threads = []
    for i in range(12):
        if i % 4 == 0:
            threads.append(threading.Thread(target=service.node_action, args=("kill", 1)))
        else:
            threads.append(
                threading.Thread(target=hold, args=(service.shared(), spans, f"r{i}", 0.05))
            )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    assert len(spans) == 9
    kills = sorted(service.cluster.spans)
    for began, ended in kills:  # no run overlapped a node action
        assert all(e <= began or b >= ended for _n, b, e in spans)


# ---- the cluster the scenario needs ------------------------------------------------------


def test_a_scenario_that_fits_the_cluster_needs_no_advice():
    assert node_advice(1, 1, owned=True, backend="local") is None
    assert node_advice(1, 3, owned=False, backend="local") is None
    assert node_advice(3, 3, owned=True, backend="local") is None
    assert node_advice(3, None, owned=True, backend="local") is None  # no cluster: no claim


def test_the_dashboards_own_local_cluster_may_be_restarted_with_more_nodes():
    advice = node_advice(3, 1, owned=True, backend="local")
    assert advice is not None and advice.restart_nodes == 3
    assert advice.text.startswith("This scenario needs a 3-node cluster; the running one has 1.")


def test_a_cluster_started_elsewhere_is_not_offered_a_restart_but_told_how():
    advice = node_advice(3, 1, owned=False, backend="local")
    assert advice is not None and advice.restart_nodes is None
    assert "`python -m engine cluster down`" in advice.text
    assert "`python -m engine cluster up --nodes 3`" in advice.text
    external = node_advice(3, 1, owned=True, backend="external")
    assert external is not None and external.restart_nodes is None
    assert "external backend" in external.text


def test_autostart_happens_once_so_a_stopped_cluster_stays_stopped(monkeypatch):
    service = ClusterService()
    starts: list[int] = []

    def fake_start(*, backend: str = "local", nodes: int = 1, bootstrap=None) -> None:
        starts.append(nodes)
        service.cluster, service.state, service.owned = RecordingCluster(), "ready", True

    monkeypatch.setattr(service, "_ensure_started", fake_start)
    monkeypatch.setattr(RecordingCluster, "stop", lambda self: None, raising=False)
    service.autostart(nodes=1)
    service.stop()
    assert service.state == "idle"
    service.autostart(nodes=1)  # the next page view after "Stop cluster"
    assert starts == [1] and service.state == "idle"


class StoppableCluster(RecordingCluster):
    node_ids = (1,)

    def __init__(self) -> None:
        super().__init__()
        self.stopped_at: float | None = None

    def stop(self) -> None:
        self.stopped_at = time.monotonic()


def test_restart_waits_for_runs_in_progress_then_starts_the_bigger_cluster(monkeypatch):
    service = ClusterService()
    old = StoppableCluster()
    service.cluster, service.state, service.owned = old, "ready", True
    started: list[tuple] = []

    def fake_start(backend: str, nodes: int, bootstrap) -> None:
        started.append((backend, nodes, bootstrap, time.monotonic()))
        service.cluster, service.state, service.owned = RecordingCluster(), "ready", True

    monkeypatch.setattr(service, "_start", fake_start)
    spans: list = []
    run = threading.Thread(target=hold, args=(service.shared(), spans, "run", 0.4))
    run.start()
    time.sleep(0.05)
    service.restart(nodes=3)
    assert service.state == "starting", "no new run begins while the cluster is replaced"
    deadline = time.monotonic() + 5
    while service.state != "ready" and time.monotonic() < deadline:
        time.sleep(0.02)
    run.join(2)
    assert service.state == "ready" and len(service.cluster.node_ids) == 3
    ((_name, _began, run_ended),) = spans
    assert old.stopped_at is not None and old.stopped_at >= run_ended, "the run finished first"
    assert [s[:3] for s in started] == [("local", 3, None)]
    assert any("Stopping the 1-node cluster" in step for step in service.steps)


def test_restart_leaves_a_cluster_the_dashboard_did_not_start_alone():
    service = ClusterService()
    old = StoppableCluster()
    service.cluster, service.state, service.owned = old, "ready", False
    with pytest.raises(LabError, match="cluster up --nodes 3"):
        service.restart(nodes=3)
    assert service.state == "ready" and old.stopped_at is None
