"""Share groups (KIP-932, "queues for Kafka") on a real broker, with the lab's share worker
(engine/roles/share_worker.py, librdkafka's ShareConsumer from confluent-kafka 2.16).

Measured here, each against its contrast:
- the broker turns share groups on at format from Kafka 4.2: a fresh cluster of the lab's
  default version finalizes `share.version` and hands records to a share consumer; a fresh
  4.1.2 cluster finalizes no `share.version` and hands none;
- a worker killed while it holds records: they come back to another worker with their
  delivery count raised, and the outputs the dead one wrote before acknowledging are written
  twice (acknowledge after the output); acknowledging first loses the record instead;
- a record whose processing always fails is handed out `share.delivery.count.limit` times
  (5 by default) and then archived: no worker sees it again and no one is told; with a
  dead-letter topic (Kafka 4.4, KIP-1191) the broker writes it there, once, with headers;
- a worker slower than its record's lock loses the record to another worker while it still
  works, and both write its output; on the Java client, RENEW (KIP-1222) keeps it, and
  librdkafka 2.16 has no RENEW;
- two workers on one partition write its records out of the input's order (and out of a
  key's order), where a consumer group's one member keeps it.

The workers are the engine's share crew (engine/run/queue_crew.py).

Each case runs on both clients at the same time, each on its own topic and group
(`on_both_clients`): the cases mostly wait on Kafka, so together they take the time of one.

Every count is read again independently: kcat reads the outputs, and Kafka's own
`kafka-share-groups.sh` (ShareGroupCommand, the Admin API) reads the group's start offset.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer

from engine.base import paths, settings
from engine.base.tools import find_java
from engine.cluster.embedded import log_stamp
from engine.judging.queues import QueueCounts
from engine.kafka import jars
from engine.kafka.admin import create_topic
from engine.model.records import StoredRecord
from engine.proc.failpoints import FailPoint, wait_stopped
from engine.run.queue_crew import FROM_THE_START, ShareCrew, set_group_configs
from tests.kafkatools import kcat_headers, kcat_records, kcat_values, unique

pytestmark = pytest.mark.timeout(600)

LIBRDKAFKA, JAVA = "librdkafka", "java"
OLDER = "4.1.2"  # the last release before share groups were on by default (4.2)
RECORDS = 10
LOCK_S = 15  # the frozen and slow workers' record lock: group.share.min.record.lock.duration.ms


def produce_ids(bootstrap: str, topic: str, ids: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for message_id in ids:
        producer.produce(topic, key=str(message_id), value=json.dumps({"id": message_id}))
    assert producer.flush(30) == 0


def read_from_the_start(bootstrap: str, group: str, more: dict[str, str] | None = None) -> None:
    """A share group starts at the log's end unless its group config says otherwise; `more`
    sets other group configs too (by their names, as Kafka spells them)."""
    set_group_configs(bootstrap, group, {**FROM_THE_START, **(more or {})})


def kafka_tool(version: str, main_class: str, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka's own command-line tools, from that version's jars."""
    command = [find_java(), "-Xmx256m", "-cp", jars.kafka_classpath(version), main_class, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def finalized_share_version(version: str, bootstrap: str) -> int:
    """`share.version` as the controller finalized it (FeatureCommand describe), 0 if absent."""
    described = kafka_tool(
        version,
        "org.apache.kafka.tools.FeatureCommand",
        "--bootstrap-server",
        bootstrap,
        "describe",
    )
    assert described.returncode == 0, described.stderr
    line = re.search(r"Feature: share\.version\s.*?FinalizedVersionLevel: (\d+)", described.stdout)
    return int(line.group(1)) if line else 0


def share_group_lag(bootstrap: str, group: str) -> int | None:
    """The group's lag on the topic's one partition as Kafka's own tool reports it
    (ShareGroupCommand --describe --offsets): the records not yet acknowledged or archived,
    from the state the share coordinator keeps; None ("-") before any is recorded."""
    described = kafka_tool(
        paths.kafka_version(),
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--group",
        group,
        "--offsets",
    )
    assert described.returncode == 0, described.stderr
    header, *rows = [row.split() for row in described.stdout.splitlines() if row.strip()]
    assert header[-1] == "LAG", described.stdout
    lags = [row[-1] for row in rows if row and row[0] == group]
    return int(lags[0]) if lags and lags[0].isdigit() else None


SHARE_LOGGERS = ("kafka.server.share.SharePartition", "kafka.server.share.SharePartitionManager")


_tracing = {"users": 0}
_tracing_lock = threading.Lock()


@contextmanager
def share_partition_trace(cluster) -> Iterator[None]:
    """Kafka's share partition and its manager log at TRACE on node 1 meanwhile (a broker
    logger set through the Admin API, ConfigCommand), then at the broker's own level again.
    Both clients' cases may want it at once: the first turns it on, the last one off."""

    def loggers(*change: str) -> None:
        done = kafka_tool(
            cluster.kafka_version,
            "org.apache.kafka.tools.ConfigCommand",
            "--bootstrap-server", cluster.direct_bootstrap,
            "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
            *change,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    with _tracing_lock:
        if _tracing["users"] == 0:
            loggers("--add-config", ",".join(f"{name}=TRACE" for name in SHARE_LOGGERS))
        _tracing["users"] += 1
    try:
        yield
    finally:
        with _tracing_lock:
            _tracing["users"] -= 1
            if _tracing["users"] == 0:
                loggers("--delete-config", ",".join(SHARE_LOGGERS))


def broker_says(cluster, since: float, *fragments: str) -> list[str]:
    """Node 1's log lines since `since` that hold every fragment."""
    return [
        line
        for line in cluster.node_log_since(1, since)
        if all(fragment in line for fragment in fragments)
    ]


@dataclass
class Workers(ShareCrew):
    """The engine's crew (engine/run/queue_crew.py), with the cluster whose broker log a test
    reads, and its judgement over the outputs as kcat reads them."""

    cluster: Any = None

    def judged(self) -> QueueCounts:
        """The queue checker's counts, over the output topic as kcat reads it; the engine's
        own reading of it (what a queue level is judged on) must be the same records."""
        outputs = [
            StoredRecord(partition, offset, json.loads(value)["id"])
            for partition, offset, value in kcat_records(self.bootstrap, self.output)
        ]
        engine = [(r.partition, r.offset, r.id) for r in self.outputs()]
        assert engine == [(r.partition, r.offset, r.id) for r in outputs], (engine, outputs)
        return self.judge(range(RECORDS), outputs=outputs)[1]


def new_crew(cluster, folder: Path, client: str, *, dead_letters: bool = False) -> Workers:
    """Workers of one client on a fresh topic and group that reads from the start (with a
    dead-letter topic if asked)."""
    return Workers.create(
        cluster.direct_bootstrap,
        folder,
        topic=unique("queue"),
        group=unique("workers"),
        client=client,
        dead_letters=dead_letters,
        cluster=cluster,
    )


@pytest.fixture
def crews(cluster1, tmp_path) -> Iterator[dict[str, Workers]]:
    """Workers of each client, each on its own topic and group: librdkafka's ShareConsumer
    (confluent-kafka 2.16) and the Java client's KafkaShareConsumer (kafka-clients at the
    lab's Kafka version)."""
    if cluster1.kafka_version == OLDER:
        pytest.skip("share groups are on from Kafka 4.2; this suite runs 4.1.2")
    made = {client: new_crew(cluster1, tmp_path / client, client) for client in (LIBRDKAFKA, JAVA)}
    try:
        yield made
    finally:
        for crew in made.values():
            crew.stop_all()


def on_each(crews: dict[str, Workers], cases: dict[str, Callable[[Workers], None]]) -> None:
    """Run each named case with its crew, all at the same time: most of a case is waiting on
    Kafka (a lock, a redelivery), so together they take the time of one. A failure names
    its case."""
    with ThreadPoolExecutor(max_workers=len(crews)) as pool:
        runs = {name: pool.submit(cases[name], crew) for name, crew in crews.items()}
    for name, run in runs.items():
        if (error := run.exception()) is not None:
            raise AssertionError(f"{name}: {error}") from error


def on_both_clients(crews: dict[str, Workers], case: Callable[[Workers], None]) -> None:
    """`case` on each client's workers at the same time; a failure names its client."""
    on_each(crews, dict.fromkeys(crews, case))


def delivered_ids(events: list[dict]) -> Counter:
    return Counter(e["id"] for e in events if e["ev"] == "delivered")


def output_ids(bootstrap: str, topic: str) -> Counter:
    return Counter(json.loads(v)["id"] for v in kcat_values(bootstrap, topic))


def try_share_groups(version: str, bootstrap: str, folder: Path) -> tuple[int, int, set]:
    """One share worker on a fresh topic: the cluster's finalized share.version, how many of
    10 records it was handed (within 60 s, or until the worker ended), and its errors."""
    topic, group = unique("queue"), unique("workers")
    create_topic(bootstrap, topic)
    create_topic(bootstrap, f"{topic}-out")
    share_version = finalized_share_version(version, bootstrap)
    if share_version:
        read_from_the_start(bootstrap, group)
    folder.mkdir()
    crew = Workers(folder, bootstrap, topic, group)
    worker = crew.start("worker")
    crew.wait_for(worker, "subscribed")
    produce_ids(bootstrap, topic, range(RECORDS))
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and worker.alive()
        and len(crew.events(worker, "delivered")) < RECORDS
    ):
        time.sleep(0.5)
    crew.stop_all()
    errors = {(e.get("code"), e["error"][:200]) for e in crew.events(worker, "error")}
    return share_version, len(crew.events(worker, "delivered")), errors


def test_share_groups_are_on_at_format_from_kafka_4_2(cluster1, tmp_path, monkeypatch):
    """4.1.2 finalizes no share.version and refuses a share consumer at its first heartbeat
    (UNSUPPORTED_VERSION, fatal to librdkafka's); the lab's default version finalizes one and
    hands every record out once."""
    from engine.cluster.embedded import EmbeddedCluster

    newer = cluster1.kafka_version
    if newer == OLDER:
        pytest.skip("this suite runs Kafka 4.1.2 (LAB_KAFKA_VERSION): it is the older side here")
    seen = {newer: try_share_groups(newer, cluster1.direct_bootstrap, tmp_path / newer)}
    monkeypatch.setenv(settings.KAFKA_VERSION.name, OLDER)
    jars.ensure_kafka_jars(version=OLDER)
    older = EmbeddedCluster(f"test-share-{OLDER}", node_count=1)
    older.start(timeout=180)
    try:
        seen[OLDER] = try_share_groups(OLDER, older.direct_bootstrap, tmp_path / OLDER)
    finally:
        older.stop()
    share_version, delivered, errors = seen[OLDER]
    assert (share_version, delivered) == (0, 0), seen
    assert {code for code, _ in errors} == {"UNSUPPORTED_VERSION"}, seen
    share_version, delivered, errors = seen[newer]
    assert share_version >= 1 and delivered == RECORDS and not errors, seen


def test_a_killed_workers_records_come_back_and_its_written_outputs_repeat(crews):
    """Acknowledge after the output: the worker stops after writing 3 outputs, before it
    sends a single acknowledgement, and is killed. Another worker gets all 10 records, each
    at delivery count 2; the 3 outputs are written twice."""
    on_both_clients(crews, _a_killed_workers_records_come_back_and_its_written_outputs_repeat)


def _a_killed_workers_records_come_back_and_its_written_outputs_repeat(workers: Workers) -> None:
    first = workers.start("worker-a", failpoint=FailPoint("output_acked", 3).to_spec())
    workers.wait_for(first, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(RECORDS))
    workers.wait_for(first, "failpoint_reached")
    assert wait_stopped(first.pid)
    held = delivered_ids(workers.events(first))
    # The broker's own reading while the stopped worker holds them: no state recorded yet
    # (the tool prints "-"), against 0 once they are all acknowledged.
    assert share_group_lag(workers.bootstrap, workers.group) is None
    with share_partition_trace(workers.cluster):
        killed_at = time.time()
        first.kill()
        second = workers.start("worker-b")
        workers.wait_for(second, "delivered", RECORDS, timeout=120)
    # Why so soon, in Kafka's own words: the dead worker's connection closed, the broker
    # released its share session and the records it held.
    released = broker_says(
        workers.cluster, killed_at, "Release acquired records request", workers.group
    )
    assert released, "the broker logged no release of the killed worker's records"
    released_at = log_stamp(released[0])
    assert released_at is not None
    assert released_at <= workers.events(second, "delivered")[0]["t"]
    workers.wait_for(second, "ack_committed")
    counts = [e["delivery_count"] for e in workers.events(second, "delivered")]
    # The dead worker had been handed the whole batch: it recorded 3, all come back at 2.
    assert sorted(held) == [0, 1, 2], held
    back_after = workers.events(second, "delivered")[0]["t"] - killed_at
    print(f"back {back_after:.1f} s after the kill")
    # Well before the 30 s lock (a frozen worker's, still connected, wait for the lock: the
    # test below).
    assert back_after < 20, back_after
    assert counts == [2] * RECORDS
    outputs = output_ids(workers.bootstrap, workers.output)
    assert sorted(outputs) == list(range(RECORDS))
    assert {i: n for i, n in outputs.items() if n > 1} == {0: 2, 1: 2, 2: 2}
    assert share_group_lag(workers.bootstrap, workers.group) == 0
    # The queue checker counts the same from the histories and kcat's read of the outputs.
    judged = workers.judged()
    assert (judged.once, judged.duplicated, judged.lost, judged.archived) == (7, 3, 0, 0)
    assert (judged.redelivered, judged.deliveries) == (RECORDS, 2 * RECORDS)


def test_acknowledging_first_loses_what_a_killed_worker_held_acknowledged(crews):
    """Acknowledge before processing: the worker commits record 3's acknowledgement, stops
    before writing it, and is killed. Nobody gets record 3 again: its output never exists.
    The records it had not yet acknowledged come back to the next worker."""
    on_both_clients(crews, _acknowledging_first_loses_what_a_killed_worker_held_acknowledged)


def _acknowledging_first_loses_what_a_killed_worker_held_acknowledged(workers: Workers) -> None:
    first = workers.start(
        "worker-a",
        ack="before-processing",
        failpoint=FailPoint("ack_committed", 4).to_spec(),
    )
    workers.wait_for(first, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(RECORDS))
    workers.wait_for(first, "failpoint_reached")
    assert wait_stopped(first.pid)
    first.kill()
    second = workers.start("worker-b", ack="before-processing")
    workers.wait_for(second, "delivered", RECORDS - 4, timeout=120)
    workers.wait_for(second, "idle")
    redelivered = delivered_ids(workers.events(second))
    assert sorted(redelivered) == list(range(4, RECORDS))
    outputs = output_ids(workers.bootstrap, workers.output)
    assert 3 not in outputs and sorted(outputs) == [0, 1, 2, *range(4, RECORDS)]
    assert share_group_lag(workers.bootstrap, workers.group) == 0
    judged = workers.judged()
    assert (judged.once, judged.duplicated, judged.lost, judged.archived) == (9, 0, 1, 0)


def test_a_poison_record_is_archived_after_the_delivery_limit_or_dead_lettered(
    crews, cluster1, tmp_path
):
    """Record 5 fails every time and is released: delivered with counts 1 to 5, then never
    again. The other 9 are written once; the group moves past all 10. Without a dead-letter
    topic nothing anywhere holds record 5 any more; with one (Kafka 4.4, KIP-1191) the broker
    writes it there once, with headers that say where it came from and why. Four crews at
    once: each client without and with the dead-letter topic."""
    dead_lettered = {
        f"{client}, dead-letter topic": new_crew(
            cluster1, tmp_path / f"{client}-dlq", client, dead_letters=True
        )
        for client in crews
    }
    try:
        every = {**crews, **dead_lettered}
        on_each(every, dict.fromkeys(every, _a_poison_record_is_archived_or_dead_lettered))
    finally:
        for crew in dead_lettered.values():
            crew.stop_all()


# What the broker's dead-letter record says when the delivery limit is met (KIP-1191; the
# cause text as kafka.server.share.SharePartition of 4.4.0 words it).
DELIVERY_LIMIT_MET = "Offset delivery count exceeded the threshold."


def _a_poison_record_is_archived_or_dead_lettered(workers: Workers) -> None:
    worker = workers.start("worker", poison_ids=[5])
    workers.wait_for(worker, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(RECORDS))
    workers.wait_for(worker, "processing_failed", 5, timeout=120)
    workers.wait_for(worker, "idle", timeout=60)
    poison = [e["delivery_count"] for e in workers.events(worker, "delivered") if e["id"] == 5]
    assert poison == [1, 2, 3, 4, 5]
    outputs = output_ids(workers.bootstrap, workers.output)
    assert sorted(outputs) == [i for i in range(RECORDS) if i != 5]
    assert share_group_lag(workers.bootstrap, workers.group) == 0
    judged = workers.judged()
    assert (judged.once, judged.duplicated, judged.lost, judged.archived) == (9, 0, 0, 1)
    if workers.dead_letter_topic is None:
        return
    # The broker writes the dead letter itself, after the last release: wait for it.
    deadline = time.monotonic() + 60
    while not (letters := kcat_headers(workers.bootstrap, workers.dead_letter_topic)):
        assert time.monotonic() < deadline, "no dead letter in 60 s"
        time.sleep(0.5)
    offset_of_5 = next(
        o for _, o, v in kcat_records(workers.bootstrap, workers.topic) if json.loads(v)["id"] == 5
    )
    time.sleep(2)  # a second letter for the same record would be a duplicate: look again
    letters = kcat_headers(workers.bootstrap, workers.dead_letter_topic)
    assert len(letters) == 1, letters
    value, headers = letters[0]
    assert json.loads(value) == {"id": 5}
    assert headers == {
        "__dlq.errors.topic": workers.topic,
        "__dlq.errors.partition": "0",
        "__dlq.errors.offset": str(offset_of_5),
        "__dlq.errors.group": workers.group,
        "__dlq.errors.delivery.count": "5",
        "__dlq.errors.message": DELIVERY_LIMIT_MET,
    }, headers


def test_a_frozen_worker_loses_its_records_at_the_lock_and_writes_them_again(crews):
    """A worker stopped (SIGSTOP) after writing 3 outputs keeps its connection: its records
    come back to another worker only when their lock runs out (the group's
    share.record.lock.duration.ms, set to 15 s here, the least a 4.4.0 broker allows by
    default, against 30 s by default; a killed worker's came back within seconds), at
    delivery count 2. Woken, it writes the rest
    of its batch, so every output is written twice.

    What the woken worker is told, on both clients: commit_sync/commitSync reports its late
    ACCEPTs as taken (no per-partition error). The broker's log says why: the offsets "are
    already archived" (the other worker acknowledged them), and Kafka 4.4.0 skips such an
    acknowledgement without an error. The application hears nothing: the doubled outputs
    are the only trace."""
    on_both_clients(crews, _a_frozen_worker_loses_its_records_at_the_lock_and_writes_them_again)


def _a_frozen_worker_loses_its_records_at_the_lock_and_writes_them_again(workers: Workers) -> None:
    read_from_the_start(
        workers.bootstrap, workers.group, {"share.record.lock.duration.ms": str(LOCK_S * 1000)}
    )
    first = workers.start("worker-a", failpoint=FailPoint("output_acked", 3).to_spec())
    workers.wait_for(first, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(RECORDS))
    workers.wait_for(first, "failpoint_reached")
    assert wait_stopped(first.pid)
    first.paused = True  # stopped by its fault point: the lab wakes it later (SIGCONT)
    frozen_at = time.time()
    second = workers.start("worker-b")
    workers.wait_for(second, "delivered", RECORDS, timeout=120)
    back_after = workers.events(second, "delivered")[0]["t"] - frozen_at
    print(f"back {back_after:.1f} s after the freeze")
    # The lock, not the connection, let them go: a killed worker's come back within seconds.
    assert back_after >= LOCK_S - 5, back_after
    assert [e["delivery_count"] for e in workers.events(second, "delivered")] == [2] * RECORDS
    workers.wait_for(second, "ack_committed")
    with share_partition_trace(workers.cluster):
        woke_at = time.time()
        first.resume()
        workers.wait_for(first, "ack_committed")
    # Why no refusal, in Kafka's own words: the other worker's acknowledgements moved the
    # share partition past these offsets, and the broker skips an acknowledgement of
    # offsets it has archived already.
    skipped = broker_says(workers.cluster, woke_at, "are already archived", workers.group)
    assert skipped, "the broker logged no skipped acknowledgement"
    assert [e["id"] for e in workers.events(first, "output_acked")] == list(range(RECORDS))
    assert not workers.events(first, "ack_refused")  # what both clients report, above
    outputs = output_ids(workers.bootstrap, workers.output)
    assert outputs == Counter({i: 2 for i in range(RECORDS)}), outputs
    assert share_group_lag(workers.bootstrap, workers.group) == 0
    judged = workers.judged()
    assert (judged.duplicated, judged.duplicates, judged.lost, judged.acks_refused) == (
        RECORDS,
        RECORDS,
        0,
        0,
    )


SLOW_MS = LOCK_S * 1000 + 7_000  # a worker's processing of one record, longer than its lock


def _slower_than_the_lock(workers: Workers, renew_every_ms: int = 0) -> None:
    """One record; worker-a takes SLOW_MS over it, under a LOCK_S lock; worker-b is idle
    beside it. What each wrote and what the broker handed out is asserted by the callers."""
    read_from_the_start(
        workers.bootstrap, workers.group, {"share.record.lock.duration.ms": str(LOCK_S * 1000)}
    )
    slow = workers.start("worker-a", work_ms=SLOW_MS, renew_every_ms=renew_every_ms)
    workers.wait_for(slow, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(1))
    workers.wait_for(slow, "delivered")
    fast = workers.start("worker-b")
    workers.wait_for(fast, "subscribed")
    # Its one commit: the ACCEPT after the work (a RENEW goes with a poll, not a commit).
    workers.wait_for(slow, "ack_committed", timeout=SLOW_MS / 1000 + 60)
    workers.wait_for(fast, "idle", timeout=60)


def _slow_worker_loses_its_record(workers: Workers) -> None:
    _slower_than_the_lock(workers)
    slow, fast = workers.started
    handed = workers.events(fast, "delivered")
    # The lock ran out while worker-a worked: the broker handed the record to worker-b, at
    # delivery count 2, before worker-a's output was acknowledged.
    assert [e["delivery_count"] for e in handed] == [2], handed
    assert handed[0]["t"] < workers.events(slow, "output_acked")[0]["t"]
    assert handed[0]["t"] - workers.events(slow, "delivered")[0]["t"] >= LOCK_S - 5
    # Both wrote its output; worker-a's late ACCEPT was not refused (the record was archived
    # by worker-b's, as the frozen worker's case shows in the broker's log).
    assert output_ids(workers.bootstrap, workers.output) == Counter({0: 2})
    assert not workers.events(slow, "ack_refused")
    assert share_group_lag(workers.bootstrap, workers.group) == 0


def _renewing_worker_keeps_its_record(workers: Workers) -> None:
    _slower_than_the_lock(workers, renew_every_ms=5_000)
    slow, fast = workers.started
    renewed = [e for e in workers.events(slow, "acknowledged") if e["type"] == "RENEW"]
    assert len(renewed) == (SLOW_MS - 1) // 5_000, renewed
    # Each RENEW restarted the lock: worker-b, there all along, was never handed the record.
    assert workers.events(fast, "delivered") == []
    assert output_ids(workers.bootstrap, workers.output) == Counter({0: 1})
    assert not workers.events(slow, "ack_refused")
    assert share_group_lag(workers.bootstrap, workers.group) == 0


def test_a_worker_slower_than_the_lock_loses_its_record_and_renew_keeps_it(cluster1, tmp_path):
    """A worker that takes 22 s over a record whose lock lasts 15 s (the group's
    share.record.lock.duration.ms): on both clients the broker hands the record to the other
    worker at delivery count 2 while the first still works on it, and both write its output.
    The Java client's worker that sends RENEW every 5 s (KIP-1222, kafka-clients 4.2 and
    later) keeps it: the other worker never sees it, one output. librdkafka's ShareConsumer
    (confluent-kafka 2.16) has no RENEW, and its worker refuses the setting."""
    if cluster1.kafka_version == OLDER:
        pytest.skip("share groups are on from Kafka 4.2; this suite runs 4.1.2")
    assert not hasattr(AcknowledgeType, "RENEW")
    cases = {
        "librdkafka, no RENEW": (LIBRDKAFKA, _slow_worker_loses_its_record),
        "java, no RENEW": (JAVA, _slow_worker_loses_its_record),
        "java, RENEW every 5 s": (JAVA, _renewing_worker_keeps_its_record),
    }
    crews = {
        name: new_crew(cluster1, tmp_path / f"case-{n}", client)
        for n, (name, (client, _case)) in enumerate(cases.items())
    }
    try:
        on_each(crews, {name: case for name, (_client, case) in cases.items()})
    finally:
        for crew in crews.values():
            crew.stop_all()
    # The refusal on librdkafka: said at the worker's start.
    refused = new_crew(cluster1, tmp_path / "refused", LIBRDKAFKA)
    worker = refused.start("worker", renew_every_ms=5_000)
    assert worker.popen is not None and worker.popen.wait(60) != 0
    assert "has no RENEW" in worker.log_path.read_text()


ORDER_SLOW_MS = 6_000  # the slow worker's processing of its one early record


def output_order(bootstrap: str, topic: str) -> list[int]:
    """The ids in the output topic's one partition, in offset order, as kcat reads them."""
    return [json.loads(value)["id"] for _, _, value in sorted(kcat_records(bootstrap, topic))]


def wait_for_outputs(bootstrap: str, topic: str, timeout: float) -> list[int]:
    """The output order once RECORDS outputs are there (or `timeout` has passed)."""
    deadline = time.monotonic() + timeout
    while len(order := output_order(bootstrap, topic)) < RECORDS and time.monotonic() < deadline:
        time.sleep(0.5)
    return order


def out_of_key_order(order: list[int]) -> dict[int, list[int]]:
    """Each key (id % 2, as produce_keyed_ids keys them) whose outputs are not in its input's
    order, with that order."""
    by_key = {key: [i for i in order if i % 2 == key] for key in (0, 1)}
    return {key: ids for key, ids in by_key.items() if ids != sorted(ids)}


def _workers_sharing_the_partition_write_out_of_order(workers: Workers) -> None:
    slow = workers.start("worker-slow", work_ms=ORDER_SLOW_MS)
    workers.wait_for(slow, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(1))
    workers.wait_for(slow, "delivered")  # it holds record 0 for ORDER_SLOW_MS
    quick = workers.start("worker-quick")
    workers.wait_for(quick, "subscribed")
    produce_ids(workers.bootstrap, workers.topic, range(1, RECORDS))
    workers.wait_for(slow, "output_acked", timeout=ORDER_SLOW_MS / 1000 + 60)
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and len(output_order(workers.bootstrap, workers.output)) < RECORDS
    ):
        time.sleep(0.5)
    order = output_order(workers.bootstrap, workers.output)
    print(f"{workers.client}: outputs in the order {order}")
    handed = {p.name: sorted(delivered_ids(workers.events(p))) for p in (slow, quick)}
    assert handed["worker-slow"][0] == 0 and handed["worker-quick"], handed
    assert sorted(order) == list(range(RECORDS)), order  # each once: order is all that broke
    assert order != sorted(order) and order.index(0) > order.index(1), order
    assert 0 in out_of_key_order(order), order  # key 0's records: 0 came after 2
    judged = workers.judged()
    assert judged.out_of_order >= 1 and (judged.once, judged.duplicated) == (RECORDS, 0)


def consumer_group_member(
    bootstrap: str,
    topic: str,
    group: str,
    output: str,
    stop: threading.Event,
    assigned: dict[str, list[int]],
) -> None:
    """A consumer group's member doing the case's work (ORDER_SLOW_MS over record 0, none
    over the others): each record's output, then its offset committed. Application code of
    the test's own, for the contrast."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    name = threading.current_thread().name

    def on_assign(_consumer, partitions) -> None:
        assigned[name] = [tp.partition for tp in partitions]

    consumer.subscribe([topic], on_assign=on_assign)
    try:
        while not stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            if json.loads(message.value())["id"] == 0:
                time.sleep(ORDER_SLOW_MS / 1000)
            producer.produce(output, key=message.key(), value=message.value())
            assert producer.flush(30) == 0
            consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()


def test_workers_sharing_one_partition_write_out_of_order_where_a_consumer_group_keeps_it(
    crews, cluster1
):
    """Two workers share the topic's one partition: one takes 6 s over record 0, the other
    writes records 1 to 9 meanwhile, so 0's output comes after theirs: the outputs are out of
    the input's order, and so is key 0's (ids 0, 2, 4, ... by id % 2). A share group makes no
    promise of order (KIP-932). The contrast, on the same broker: two members of a consumer
    group doing the same work (6 s over record 0) get the one partition between them as one
    member's, whose outputs keep the input's order."""
    on_both_clients(crews, _workers_sharing_the_partition_write_out_of_order)

    bootstrap = cluster1.direct_bootstrap
    topic, group = unique("ordered"), unique("members")
    create_topic(bootstrap, topic)
    create_topic(bootstrap, f"{topic}-out")
    stop = threading.Event()
    assigned: dict[str, list[int]] = {}
    members = [
        threading.Thread(
            target=consumer_group_member,
            args=(bootstrap, topic, group, f"{topic}-out", stop, assigned),
            name=f"member-{n}",
            daemon=True,
        )
        for n in range(2)
    ]
    for member in members:
        member.start()

    # Both have joined and the partition is one member's: the records come after, so no
    # rebalance moves it while a record is worked on (that would be another lesson).
    def settled() -> bool:
        held = [p for partitions in list(assigned.values()) for p in partitions]
        return len(assigned) == 2 and held == [0]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not settled():
        time.sleep(0.2)
    assert settled(), assigned
    produce_ids(bootstrap, topic, range(RECORDS))
    order = wait_for_outputs(bootstrap, f"{topic}-out", timeout=120)
    stop.set()
    for member in members:
        member.join(30)
    assert order == list(range(RECORDS)), order
    assert not out_of_key_order(order)
