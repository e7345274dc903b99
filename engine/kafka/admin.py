"""Admin look-ups over a bootstrap address: brokers, partition leaders, topics.

librdkafka's own log lines are routed into Python logging so that a node being down, which
the lab causes on purpose, does not spray connection errors over the terminal.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

log = logging.getLogger("engine.kafka")
# A node down on purpose makes librdkafka log connection failures; keep them out of sight
# unless the user asks (LAB_LOG_LEVEL=INFO on the command line).
log.addHandler(logging.NullHandler())
log.setLevel(logging.ERROR)


def admin_client(bootstrap: str, **extra: object) -> AdminClient:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": "lab-admin",
        "socket.timeout.ms": 5000,
        "logger": log,
        **extra,
    }
    return AdminClient(conf)


@dataclass(frozen=True)
class ClusterView:
    """What the cluster's metadata says at one moment."""

    cluster_id: str | None
    # No controller here: in KRaft the metadata names a random live broker as "controller"
    # (see engine/kafka/quorum.py for the active one).
    brokers: dict[int, str]  # node id -> "host:port" on the listener that was asked
    # topic -> partition -> the node leading it (-1: none right now), from the same metadata
    leaders: dict[str, dict[int, int]] = field(default_factory=dict)


def describe(bootstrap: str, timeout: float = 5.0) -> ClusterView:
    """Read cluster metadata; raises KafkaException if no broker answers in time."""
    md = admin_client(bootstrap).list_topics(timeout=timeout)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    leaders = {
        name: {p: pm.leader for p, pm in meta.partitions.items()}
        for name, meta in md.topics.items()
        if meta.error is None
    }
    return ClusterView(
        cluster_id=md.cluster_id,
        brokers=brokers,
        leaders=leaders,
    )


def try_describe(bootstrap: str, timeout: float = 5.0) -> ClusterView | None:
    try:
        return describe(bootstrap, timeout)
    except KafkaException:
        return None


def wait_for_brokers(bootstrap: str, expected: set[int], timeout: float) -> ClusterView:
    """Wait until every expected node is registered as a broker. Raises TimeoutError."""
    deadline = time.monotonic() + timeout
    last: ClusterView | None = None
    while time.monotonic() < deadline:
        last = try_describe(bootstrap, timeout=min(5.0, max(0.5, deadline - time.monotonic())))
        if last and expected <= set(last.brokers):
            return last
        time.sleep(0.3)
    seen = sorted(last.brokers) if last else []
    raise TimeoutError(
        f"brokers {sorted(expected)} not all registered after {timeout:.0f}s; saw {seen}"
    )


# The group id and transactional id that load_coordinators asks about: the lab's own, used
# by no run.
COORDINATORS_KEY = "lab-coordinators"


def load_coordinators(bootstrap: str, timeout: float = 30.0) -> bool:
    """Have a new cluster create and load its group and transaction coordinators now.

    Kafka creates __consumer_offsets and __transaction_state on the first FindCoordinator
    request for a group or a transactional id, and answers COORDINATOR_NOT_AVAILABLE until
    the topic exists (KafkaApis.getCoordinator), then COORDINATOR_LOAD_IN_PROGRESS while its
    partitions load; clients retry with back-off. Left to the first run, that made a new
    cluster's first ack-loss run 1.6-2.3 s longer (benchmarks/README.md). True once both
    coordinators answer; False if they did not within `timeout`, and runs then wait for
    them as they would have.

    Asked through a consumer and a transactional producer, as a run's clients ask, and not
    through the AdminClient's DescribeConsumerGroups: when librdkafka cannot send that
    request to the coordinator it found, it frees the request's state while its
    coordinator look-up still holds it, and the process aborts on an assertion
    (`eonce->refcnt > 0` in rd_kafka_enq_once_del_source_return; rd_kafka_admin_coord_request
    in rdkafka_admin.c, librdkafka issue 4605, fix proposed in PR 5397). That abort took
    down the compose file's dashboard once as its cluster started, when this step still
    described the group (the lab's only such request then).
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    # A consumer with a group id looks up the group's coordinator as it starts (its
    # FindCoordinator has __consumer_offsets created), while InitProducerId has
    # __transaction_state created and returns once that coordinator has loaded (it
    # registers the lab's own transactional id). Then the group's committed offsets are
    # asked for (OffsetFetch, which librdkafka's consumer retries while the coordinator
    # loads) until the coordinator answers.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": COORDINATORS_KEY,
            "enable.auto.commit": False,
            "logger": log,
        }
    )
    try:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": COORDINATORS_KEY, "logger": log}
        )
        try:
            producer.init_transactions(max(1.0, deadline - time.monotonic()))
        except KafkaException:
            return False
        asked = [TopicPartition("__consumer_offsets", 0)]
        while time.monotonic() < deadline:
            try:
                consumer.committed(asked, timeout=max(1.0, min(5.0, deadline - time.monotonic())))
                return True
            except KafkaException:  # no coordinator yet, or still loading
                time.sleep(0.2)
        return False
    finally:
        consumer.close()


def partition_leader(bootstrap: str, topic: str, partition: int, timeout: float = 5.0) -> int:
    """The node id leading a partition, or -1 when it has no leader right now.

    Asked again within `timeout` when the request fails on the way: with nodes frozen
    (broker-failover freezes two of three), the broker librdkafka picked may be one of them.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            left = max(0.5, deadline - time.monotonic())
            md = admin_client(bootstrap).list_topics(topic=topic, timeout=left)
            break
        except KafkaException as exc:
            error = exc.args[0]
            if time.monotonic() >= deadline or error.code() not in (
                KafkaError._TRANSPORT,
                KafkaError._TIMED_OUT,
            ):
                raise
            time.sleep(0.2)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None or partition not in meta.partitions:
        return -1
    return meta.partitions[partition].leader


def partition_replicas(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 5.0
) -> list[int]:
    """The node ids holding a replica of a partition, preferred leader first."""
    md = admin_client(bootstrap).list_topics(topic=topic, timeout=timeout)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None or partition not in meta.partitions:
        return []
    return list(meta.partitions[partition].replicas)


def wait_for_full_isr(bootstrap: str, topic: str, timeout: float) -> bool:
    """Wait until every partition of `topic` has all its replicas in sync; False if not.

    After a broker fault, the high watermark (the end of what consumers may read) moves on
    only as the returning replicas catch up: a topic read before that is read short.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin_client(bootstrap).list_topics(topic=topic, timeout=5)
            meta = md.topics.get(topic)
            if (
                meta is not None
                and meta.error is None
                and all(set(p.isrs) == set(p.replicas) for p in meta.partitions.values())
            ):
                return True
        except KafkaException:
            pass  # a broker restarting: ask again
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)


def partition_leaders(bootstrap: str, topic: str, timeout: float = 5.0) -> dict[int, int]:
    md = admin_client(bootstrap).list_topics(topic=topic, timeout=timeout)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        return {}
    return {p: pm.leader for p, pm in meta.partitions.items()}


def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
    replica_assignment: list[list[int]] | None = None,
) -> None:
    """Create a topic and wait until every partition has a leader.

    `replica_assignment` (one list of node ids per partition, the preferred leader first)
    places the replicas instead of letting the controller choose.
    """
    admin = admin_client(bootstrap)
    topic = (
        # librdkafka wants the partition count with an assignment, and no replication factor.
        NewTopic(name, partitions, replica_assignment=replica_assignment, config=config or {})
        if replica_assignment
        else NewTopic(name, partitions, replication, config=config or {})
    )
    futures = admin.create_topics([topic], operation_timeout=timeout)
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = partition_leaders(bootstrap, name)
        if len(leaders) == partitions and all(leader >= 0 for leader in leaders.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {name} has partitions without a leader after {timeout:.0f}s")
