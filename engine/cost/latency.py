"""End-to-end latency of one transactional stream, read at read_committed and read_uncommitted.

A transactional producer sends JSON messages carrying their creation time at a steady rate and
commits every `txn_ms`. Two consumers with the lab's consumer settings (exactly-once's
read_committed and at-least-once's read_uncommitted) read the same partition at the same time;
latency is the wall-clock time a consumer receives a message minus the time it was created.
Producer and consumers share one process and clock, so no clock skew enters.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from engine.cost.stats import Summary, percentile, summarize
from engine.cost.throughput import BenchmarkError, delete_topics, new_topic
from engine.model.levels import LEVELS

Progress = Callable[[str, float], None]

ISOLATIONS = {
    "read_committed": LEVELS["exactly-once"].consumer,
    "read_uncommitted": LEVELS["at-least-once"].consumer,
}
PERCENTILES = (50, 95, 99)


@dataclass
class LatencyTrial:
    txn_ms: int
    round: int
    topic: str
    produced: int
    latencies_ms: dict[str, list[float]]  # isolation -> one latency per message, in order

    def pct(self, isolation: str, q: float) -> float:
        return percentile(self.latencies_ms[isolation], q)


class _Reader(threading.Thread):
    """Reads one partition from the beginning and notes when each message arrives."""

    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        super().__init__(daemon=True, name=f"latency-{isolation}")
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": f"cost-{uuid.uuid4().hex[:8]}",
            **ISOLATIONS[isolation],
        }
        self.consumer = Consumer(conf)
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.arrivals: dict[int, float] = {}  # seq -> latency in ms
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.05)
                if msg is None:
                    continue
                now = time.time()
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.error = msg.error().str()
                    continue
                value = json.loads(msg.value())
                self.arrivals[value["seq"]] = (now - value["created"]) * 1000.0
        except Exception as exc:  # reported by the caller, which owns the message
            self.error = str(exc)
        finally:
            self.consumer.close()


def latency_trial(
    bootstrap: str,
    topic: str,
    txn_ms: int,
    *,
    rate: int = 1000,
    seconds: float = 4.0,
    warmup_s: float = 1.0,
    size: int = 200,
) -> tuple[int, dict[str, list[float]]]:
    """Produce at `rate` msg/s for `seconds`, committing every `txn_ms`; latencies per isolation.

    The first `warmup_s` of messages are left out: the consumers' first fetches and the
    producer's first transaction set-up are start-up costs, not the steady state.
    """
    readers = {iso: _Reader(bootstrap, topic, iso) for iso in ISOLATIONS}
    for reader in readers.values():
        reader.start()
    time.sleep(1.0)  # let both consumers connect and start fetching before the first message
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"cost-lat-{uuid.uuid4().hex[:8]}",
            **LEVELS["exactly-once"].producer,
        }
    )
    pad = "x" * max(0, size - 60)
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        began = time.perf_counter()
        commit_at = began + txn_ms / 1000.0
        seq = 0
        total = int(rate * seconds)
        while seq < total:
            due = began + seq / rate
            now = time.perf_counter()
            if now >= commit_at:
                producer.commit_transaction(30)
                producer.begin_transaction()
                # The next transaction lasts txn_ms from now, however long the commit took.
                commit_at = time.perf_counter() + txn_ms / 1000.0
                continue
            if due > now:
                time.sleep(min(due, commit_at) - now)
                continue
            value = json.dumps({"seq": seq, "created": time.time(), "pad": pad}).encode()
            producer.produce(topic, value, partition=0)
            producer.poll(0)
            seq += 1
        producer.commit_transaction(30)
    except KafkaException as exc:
        for reader in readers.values():
            reader.stop.set()
        raise BenchmarkError(
            f"The transactional producer failed during the latency test: {exc.args[0].str()}. "
            "Check that the cluster is up and run again."
        ) from exc
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(len(r.arrivals) < total for r in readers.values()):
        time.sleep(0.05)
    for reader in readers.values():
        reader.stop.set()
        reader.join(10)
    for iso, reader in readers.items():
        if reader.error or len(reader.arrivals) < total:
            raise BenchmarkError(
                f"The {iso} consumer received {len(reader.arrivals)} of {total} messages"
                f"{': ' + reader.error if reader.error else ''}. Check the cluster and run again."
            )
    skip = int(rate * warmup_s)
    return total, {iso: [r.arrivals[s] for s in range(skip, total)] for iso, r in readers.items()}


@dataclass
class LatencyRun:
    trials: list[LatencyTrial]
    conditions: dict[str, Any] = field(default_factory=dict)

    def txn_lengths(self) -> list[int]:
        return sorted({t.txn_ms for t in self.trials})

    def summary(self, txn_ms: int, isolation: str, q: float) -> Summary:
        """The q-th percentile latency, its median and spread over the rounds."""
        chosen = [t for t in self.trials if t.txn_ms == txn_ms]
        return summarize([t.pct(isolation, q) for t in chosen])

    def delay(self, txn_ms: int, q: float = 50) -> Summary:
        """What read_committed adds to read_uncommitted at the q-th percentile, by round."""
        chosen = [t for t in self.trials if t.txn_ms == txn_ms]
        return summarize(
            [t.pct("read_committed", q) - t.pct("read_uncommitted", q) for t in chosen]
        )

    def to_json(self) -> dict[str, Any]:
        rows = []
        for t in self.trials:
            row: dict[str, Any] = {"txn_ms": t.txn_ms, "round": t.round, "produced": t.produced}
            for iso in ISOLATIONS:
                for q in PERCENTILES:
                    row[f"{iso} p{q}"] = round(t.pct(iso, q), 2)
            rows.append(row)
        return {"conditions": self.conditions, "trials": rows}


def run_latency(
    direct: str,
    client: str,
    *,
    nodes: int,
    txn_lengths: Sequence[int] = (10, 100, 1000),
    rounds: int = 3,
    rate: int = 1000,
    seconds: dict[int, float] | None = None,
    keep_topics: bool = False,
    progress: Progress | None = None,
) -> LatencyRun:
    """Each transaction length once per round, rotated so none always runs first."""
    report = progress or (lambda _what, _fraction: None)
    lengths = list(txn_lengths)
    plan = [
        (r, lengths[(i + r) % len(lengths)]) for r in range(rounds) for i in range(len(lengths))
    ]
    seconds = seconds or {}
    trials: list[LatencyTrial] = []
    for index, (round_no, txn_ms) in enumerate(plan):
        report(
            f"latency round {round_no + 1}/{rounds}: {txn_ms} ms transactions", index / len(plan)
        )
        topic = new_topic(direct, "cost-lat", 1, min(3, nodes))
        # Long transactions need a longer stream to hold several of them.
        length = seconds.get(txn_ms, max(4.0, 1.0 + 4 * txn_ms / 1000.0))
        produced, latencies = latency_trial(client, topic, txn_ms, rate=rate, seconds=length)
        trials.append(LatencyTrial(txn_ms, round_no, topic, produced, latencies))
        if not keep_topics:
            delete_topics(direct, [topic])
    report("done", 1.0)
    return LatencyRun(
        trials,
        {
            "nodes": nodes,
            "replication": min(3, nodes),
            "rate (msg/s)": rate,
            "message size (B)": 200,
            "rounds": rounds,
            "bootstrap": "proxied" if client != direct else "direct",
        },
    )
