"""engine.metrics.service: sessions that ask for one run's metrics at the same moment get one
computation; the others wait for it and read what it saved."""

from __future__ import annotations

import json
import threading
import time

from engine.metrics.service import MetricsService
from engine.run import record


def test_the_first_caller_computes_and_those_who_waited_read_what_it_saved():
    run_id = "20261202-000000-unit-metrics-1"
    folder = record.run_folder(run_id)
    folder.mkdir(parents=True)
    service, computed, answers = MetricsService(), [], []

    def compute() -> dict:
        computed.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every other caller to be waiting on the lock
        metrics = {"run_id": run_id, "source": "kafka"}
        (folder / record.METRICS).write_text(json.dumps(metrics))
        return metrics

    callers = [
        threading.Thread(target=lambda: answers.append(service.saved_or_computed(run_id, compute)))
        for _ in range(5)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len(computed) == 1
    assert answers == [{"run_id": run_id, "source": "kafka"}] * 5
    # Asked again on purpose, it computes again (the page's "Compute again").
    service.computed_again(run_id, compute)
    assert len(computed) == 2


def test_another_runs_computation_does_not_wait_for_this_one():
    service, order = MetricsService(), []
    slow_started = threading.Event()

    def slow() -> None:
        slow_started.set()
        time.sleep(0.5)
        order.append("slow")

    def fast() -> None:
        order.append("fast")

    first = threading.Thread(target=lambda: service.computed_again("run-a", slow))
    first.start()
    slow_started.wait(5)
    service.computed_again("run-b", fast)
    first.join(5)
    assert order == ["fast", "slow"]
