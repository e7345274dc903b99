"""The engine's producer against two yardsticks, and the fault proxy against no proxy.

All four contenders send the same number of 1 KB messages with the lab's at-least-once
settings (acks=all, retries, no idempotence, 5 in flight) into a fresh topic each:

- `bare`: the plain confluent_kafka loop of `throughput.produce_trial`, in this process;
- `engine (batch)`: the engine's producer role (`engine.roles.producer`) as its own process,
  exactly as a scenario starts it, in its batch mode (no flush per message); its rate is
  read from its own history: first `send` to last `ack`, so Python's start-up is left out;
- `engine (per message)`: the same role in its default scenario mode, which flushes after
  every message so that "the third request" of a fault schedule is the third message;
- `perf-test`: Kafka's `ProducerPerformance` (what kafka-producer-perf-test.sh runs), from
  the cached jars, with the same settings; its own summary line gives its rate. It runs
  twice: with the Java client's default batching, and with librdkafka's 1 MB batches.
- `bare via proxy`: the bare loop bootstrapped through the fault proxy (no faults set).

Contenders run in shuffled rounds and are compared within each round.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base import paths, tools
from engine.cost.stats import Summary, paired_ratio, schedule, summarize
from engine.cost.throughput import (
    BASELINE,
    BenchmarkError,
    delete_topics,
    new_topic,
    produce_trial,
    setups,
)
from engine.kafka import jars
from engine.model.events import Event
from engine.model.history import read_jsonl
from engine.model.levels import LEVELS
from engine.roles.specs import ProducerSpec

Progress = Callable[[str, float], None]

BARE = "bare confluent_kafka"
BARE_PROXY = "bare via proxy"
ENGINE_BATCH = "engine (batch)"
ENGINE_EACH = "engine (per message)"
PERF_TEST = "perf-test (Java defaults)"
PERF_TEST_BIG = "perf-test (1 MB batches)"
CONTENDERS = (BARE, BARE_PROXY, ENGINE_BATCH, ENGINE_EACH, PERF_TEST, PERF_TEST_BIG)
# librdkafka batches up to 1,000,000 bytes per partition; the Java client's default is 16 KiB,
# which on a busy machine caps it at a few batches per round trip. The second perf-test run
# uses librdkafka's batch size so that the two clients differ in language, not in batching.
BIG_BATCHES = {"batch.size": 1_000_000, "linger.ms": 5}

PERF_CLASS = "org.apache.kafka.tools.ProducerPerformance"
# The final line: "N records sent, X records/sec (Y MB/sec), A ms avg latency, ... 50th, ..."
_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\).*50th", re.MULTILINE
)


def parse_perf_summary(text: str) -> tuple[int, float]:
    """(records, records/s) from ProducerPerformance's final summary line."""
    matches = _SUMMARY.findall(text)
    if not matches:
        raise BenchmarkError(
            "Kafka's ProducerPerformance printed no summary line; its output ended with: "
            + " ".join(text.strip().splitlines()[-2:])[:300]
        )
    records, rate, _mb = matches[-1]
    return int(records), float(rate)


def java_props(config: dict[str, Any]) -> list[str]:
    """librdkafka settings as Java producer properties (the names agree for these keys)."""
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in config.items()]


def perf_test(
    bootstrap: str, topic: str, size: int, count: int, extra: dict[str, Any] | None = None
) -> tuple[int, float]:
    """Run ProducerPerformance from the cached Kafka jars; (records, records/s)."""
    java = tools.find_java()
    classpath = str(jars.ensure_kafka_jars() / "*")
    cmd = [
        java,
        "-Xmx512m",
        "-cp",
        classpath,
        PERF_CLASS,
        "--topic",
        topic,
        "--num-records",
        str(count),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        *java_props({**LEVELS[BASELINE].producer, **(extra or {})}),
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(
            "Kafka's ProducerPerformance did not finish within 5 minutes."
        ) from exc
    if out.returncode != 0:
        tail = " ".join((out.stdout + out.stderr).strip().splitlines()[-2:])[:300]
        raise BenchmarkError(f"Kafka's ProducerPerformance failed (exit {out.returncode}): {tail}")
    return parse_perf_summary(out.stdout)


def engine_producer(
    bootstrap: str, topic: str, size: int, count: int, *, batch: bool, folder: Path
) -> tuple[int, float]:
    """Run the engine's producer role as a process; (acked, msg/s from its history)."""
    name = f"bench-{uuid.uuid4().hex[:6]}"
    history = folder / f"{name}.jsonl"
    spec = ProducerSpec(
        history=str(history),
        name="producer",
        bootstrap=bootstrap,
        client_id=name,
        config=dict(LEVELS[BASELINE].producer),
        topic=topic,
        ids=list(range(count)),
        partitions=3,  # the topic the trial made (its "partitions" below)
        run_id=name,
        level=BASELINE,
        batch=batch,
        rate=None,
        value_bytes=size,
    )
    spec_path = folder / f"{name}.spec.json"
    spec_path.write_text(spec.model_dump_json())
    out = subprocess.run(
        [sys.executable, "-m", "engine.roles.producer", str(spec_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)},
        cwd=paths.REPO_ROOT,
        check=False,
    )
    events = read_jsonl(history)
    sends = [e["t"] for e in events if e["ev"] == Event.SEND]
    acks = [e["t"] for e in events if e["ev"] == Event.ACK]
    if out.returncode != 0 or len(acks) != count or not sends:
        tail = " ".join(out.stderr.strip().splitlines()[-2:])[:300]
        raise BenchmarkError(
            f"The engine's producer acknowledged {len(acks)} of {count} messages "
            f"(exit {out.returncode}{': ' + tail if tail else ''}). Check the cluster and rerun."
        )
    seconds = max(acks) - min(sends)
    return len(acks), count / seconds


@dataclass
class YardstickRun:
    rates: dict[str, list[float]]  # contender -> msg/s by round
    conditions: dict[str, Any] = field(default_factory=dict)
    topics: dict[str, list[str]] = field(default_factory=dict)

    def summary(self, contender: str) -> Summary:
        return summarize(self.rates[contender])

    def ratio(self, contender: str, to: str) -> Summary:
        """contender / to, round by round (1.0: as fast)."""
        return paired_ratio(self.rates[to], self.rates[contender])

    def to_json(self) -> dict[str, Any]:
        return {"conditions": self.conditions, "rates": self.rates}


def run_yardsticks(
    direct: str,
    proxied: str | None,
    *,
    nodes: int,
    size: int = 1024,
    count: int = 30_000,
    each_count: int = 1_000,
    rounds: int = 3,
    contenders: Sequence[str] = CONTENDERS,
    keep_topics: bool = False,
    seed: int = 1,
    progress: Progress | None = None,
) -> YardstickRun:
    """Every contender once per round, in a shuffled order; msg/s by round."""
    report = progress or (lambda _what, _fraction: None)
    chosen = [c for c in contenders if c != BARE_PROXY or proxied]
    baseline = next(s for s in setups() if s.label == BASELINE)
    rates: dict[str, list[float]] = {c: [0.0] * rounds for c in chosen}
    topics: dict[str, list[str]] = {c: [] for c in chosen}
    plan = schedule(chosen, rounds, seed)
    with tempfile.TemporaryDirectory(prefix="cost-engine-") as tmp:
        for index, (round_no, contender) in enumerate(plan):
            report(f"yardsticks round {round_no + 1}/{rounds}: {contender}", index / len(plan))
            topic = new_topic(direct, "cost-ys", 3, min(3, nodes))
            topics[contender].append(topic)
            if contender in (BARE, BARE_PROXY):
                client = proxied if contender == BARE_PROXY and proxied else direct
                _sent, delivered, _f, seconds, _t = produce_trial(
                    client, topic, baseline, size, count
                )
                rate = delivered / seconds
            elif contender == ENGINE_BATCH:
                _n, rate = engine_producer(direct, topic, size, count, batch=True, folder=Path(tmp))
            elif contender == ENGINE_EACH:
                _n, rate = engine_producer(
                    direct, topic, size, each_count, batch=False, folder=Path(tmp)
                )
            elif contender in (PERF_TEST, PERF_TEST_BIG):
                extra = BIG_BATCHES if contender == PERF_TEST_BIG else None
                _n, rate = perf_test(direct, topic, size, count, extra)
            else:
                raise ValueError(contender)
            rates[contender][round_no] = rate
            if not keep_topics:
                delete_topics(direct, [topic])
            time.sleep(0.2)
    report("done", 1.0)
    return YardstickRun(
        rates,
        {
            "nodes": nodes,
            "message size (B)": size,
            "messages per trial": count,
            "messages per trial, engine per message": each_count,
            "rounds": rounds,
            "partitions": 3,
            "replication": min(3, nodes),
        },
        topics,
    )
