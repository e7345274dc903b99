"""What exactly_once_v2 costs a Kafka Streams application, against at_least_once.

    .venv/bin/python -m benchmarks.streams_cost                  # 20,000 payments, 3 rounds
    .venv/bin/python -m benchmarks.streams_cost --messages 5000 --rounds 1

Seed 003 says exactly-once costs Kafka Streams "about 3-5% throughput" against at least
once. This runs the lab's own Streams application (lab.streams.StreamsProcessor, the one the
streams scenarios run: a state store with its changelog, one result per payment) on a
1-node embedded cluster, with no fault, at each `processing.guarantee` and its default
commit interval (30 s and 100 ms). Each round and guarantee, in shuffled order, gets a
fresh input topic preloaded with the payments, so the application reads a backlog in a new
JVM. The first fifth of the payments is its warm-up (its JIT compiles the hot paths: at
2,000 payments the rate was still climbing fourfold); the time is from the payment after
it to the last result acknowledged, read from the application's history. The application
writes two history lines per payment (consumed, output_acked) at both guarantees alike, a
fixed cost that a leaner application would not pay, so the relative cost here is a lower
bound of what exactly_once_v2 adds to Kafka Streams' own work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from engine.cluster.embedded import EmbeddedCluster
from engine.kafka import admin
from engine.model.history import read_jsonl
from engine.proc.java_roles import ensure_java_roles
from engine.proc.processes import RoleProcess
from engine.scenarios.streams import ACCOUNTS, STREAMS_MAIN

GUARANTEES = ("at_least_once", "exactly_once_v2")


def preload(bootstrap: str, topic: str, messages: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    now = time.time()
    for i in range(messages):
        value = json.dumps({"id": i, "created_at": now})
        producer.produce(topic, key=str(i), value=value)
        producer.poll(0)
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} payments not delivered to {topic}")


def warm_up(messages: int) -> int:
    return messages // 5


def one_trial(cluster: EmbeddedCluster, folder: Path, guarantee: str, messages: int) -> float:
    """Seconds from the first payment after the warm-up fifth to the last result acknowledged."""
    bootstrap = cluster.direct_bootstrap
    name = folder.name
    source, sink = f"bench.{name}.payments", f"bench.{name}.results"
    admin.create_topic(bootstrap, source)
    admin.create_topic(bootstrap, sink)
    preload(bootstrap, source, messages)
    history = folder / "processor.jsonl"
    spec = {
        "bootstrap": bootstrap,
        "application_id": f"bench-{name}",
        "instance_id": f"bench-{name}-1",
        "client_id": f"bench-{name}",
        "input": source,
        "output": sink,
        "processing_guarantee": guarantee,
        "commit_interval_ms": None,  # each guarantee's default, as the seed compares them
        "accounts": ACCOUNTS,
        "processing_ms": 0,
        "state_dir": str(folder / "state"),
        "name": "processor",
        "history": str(history),
    }
    process = RoleProcess("processor", STREAMS_MAIN, history, spec, java=True)
    process.start(folder)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            events = read_jsonl(history)
            acked = [e["t"] for e in events if e["ev"] == "output_acked"]
            if len(acked) >= messages:
                consumed = [e["t"] for e in events if e["ev"] == "consumed"]
                return max(acked) - consumed[warm_up(messages)]
            if not process.alive():
                raise RuntimeError(f"the Streams application exited; see {folder}")
            time.sleep(0.5)
        raise TimeoutError(f"{guarantee}: {messages} results not acknowledged in 600 s")
    finally:
        process.stop(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-streams-cost-"))
    ensure_java_roles()
    work = Path(tempfile.mkdtemp(prefix="streams-cost-"))
    cluster = EmbeddedCluster("streams-cost", node_count=1)
    cluster.start(timeout=240)
    times: dict[str, list[float]] = {g: [] for g in GUARANTEES}
    began = time.time()
    try:
        for round_no in range(args.rounds):
            order = list(GUARANTEES)
            random.shuffle(order)
            for guarantee in order:
                folder = work / f"r{round_no}-{guarantee.replace('_', '-')}"
                folder.mkdir()
                seconds = one_trial(cluster, folder, guarantee, args.messages)
                times[guarantee].append(seconds)
                print(f"round {round_no + 1} {guarantee}: {seconds:.2f} s", flush=True)
    finally:
        cluster.stop()
    load = os.getloadavg()
    print()
    print(
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(began))} with "
        f"`python -m benchmarks.streams_cost --messages {args.messages} --rounds "
        f"{args.rounds}`: Kafka Streams 4.1.2, 1 node, {os.cpu_count()} cores, load average "
        f"at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}."
    )
    print()
    timed = args.messages - warm_up(args.messages)
    print(f"Seconds for the {timed:,} payments after the warm-up, median of {args.rounds}:")
    print()
    print("| processing.guarantee | seconds, median (each) | payments per second |")
    print("|---|---|---|")
    medians = {}
    for guarantee in GUARANTEES:
        median = statistics.median(times[guarantee])
        medians[guarantee] = median
        each = ", ".join(f"{t:.2f}" for t in times[guarantee])
        timed = args.messages - warm_up(args.messages)
        print(f"| {guarantee} | {median:.2f} ({each}) | {timed / median:,.0f} |")
    cost = 1 - medians["at_least_once"] / medians["exactly_once_v2"]
    print()
    more_or_fewer = "fewer" if cost >= 0 else "more"
    print(
        f"exactly_once_v2 processes {abs(100 * cost):.1f}% {more_or_fewer} payments per second "
        "(medians); compare it with the spread of each guarantee's runs above."
    )


if __name__ == "__main__":
    main()
