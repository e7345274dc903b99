"""The quick run the dashboard page starts, on whatever cluster is up (under a minute)."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka

from engine.cluster import Cluster
from engine.cost.latency import LatencyRun, run_latency
from engine.cost.throughput import Matrix, run_matrix
from engine.cost.yardsticks import BARE, BARE_PROXY, ENGINE_BATCH, YardstickRun, run_yardsticks

Progress = Callable[[str, float], None]

QUICK_SIZE = 1024
QUICK_MESSAGES = 50_000
# Untimed messages first in every trial: without them a 1-node run timed the idempotent
# producer's wait for its producer id and ranked it slowest of all.
QUICK_WARMUP = 500


@dataclass
class QuickResult:
    matrix: Matrix
    latency: LatencyRun
    yardsticks: YardstickRun | None
    conditions: dict[str, Any] = field(default_factory=dict)


def machine() -> dict[str, Any]:
    """What the figures depend on besides the settings: cores, load, client library."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count(),
        "load average (1/5/15 min)": " / ".join(f"{x:.2f}" for x in load),
        "librdkafka": confluent_kafka.libversion()[0],
        "python": platform.python_version(),
    }


def run_quick(
    cluster: Cluster,
    *,
    messages: int = QUICK_MESSAGES,
    rounds: int = 3,
    warmup: int = QUICK_WARMUP,
    yardsticks: bool = True,
    keep_topics: bool = False,
    progress: Progress | None = None,
) -> QuickResult:
    """1 KB messages: every setup `rounds` times, 100 ms transactions' latency, engine vs bare.

    Each trial first sends `warmup` untimed messages, so that connections, metadata and
    producer ids are in place before the clock starts.

    Producers bootstrap from the direct listener, as the full benchmark's do, so that the fault
    proxy's cost is measured separately (the yardsticks' "bare via proxy").
    """
    report = progress or (lambda _what, _fraction: None)
    nodes = len(cluster.node_ids)
    before = machine()

    def part(start: float, span: float) -> Progress:
        return lambda what, fraction: report(what, start + span * fraction)

    direct = cluster.direct_bootstrap
    matrix = run_matrix(
        direct,
        direct,
        nodes=nodes,
        sizes=[QUICK_SIZE],
        counts={QUICK_SIZE: messages},
        rounds=rounds,
        warmup=warmup,
        keep_topics=keep_topics,
        progress=part(0.0, 0.6),
    )
    latency = run_latency(
        direct,
        direct,
        nodes=nodes,
        txn_lengths=[100],
        rounds=1,
        seconds={100: 4.0},
        keep_topics=keep_topics,
        progress=part(0.6, 0.15),
    )
    ys = None
    if yardsticks:
        ys = run_yardsticks(
            direct,
            cluster.proxied_bootstrap,
            nodes=nodes,
            size=QUICK_SIZE,
            count=2 * messages,
            rounds=1,
            contenders=[BARE, ENGINE_BATCH, BARE_PROXY],
            keep_topics=keep_topics,
            progress=part(0.75, 0.25),
        )
    report("done", 1.0)
    return QuickResult(
        matrix,
        latency,
        ys,
        {
            "nodes": nodes,
            "before": before,
            "after": machine(),
            "messages per trial": messages,
            "warm-up messages per trial": warmup,
        },
    )
