"""The delivery guarantee levels, with the real client settings each one applies.

These dictionaries are passed to confluent_kafka as they are, and the dashboard shows them as
they are, so what the room reads is what the clients run with: `producer` is the level's
producer (and the processor's output producer), `consumer` is the downstream consumer that
the run is judged by (the sink), and PROCESSOR_CONSUMER is the processor's input consumer,
the same at every level. The run's names (bootstrap servers, client id, group id, the static
member's group.instance.id) are added to them, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The downstream consumer (the sink) at every level: a new group that reads every partition
# from its start, and answers fetches within 50 ms so that latency is measured closely.
SINK_READS: dict[str, object] = {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 50}

# The processor's input consumer at every level. Its input is written without transactions
# (an idempotent producer), so read_committed and read_uncommitted read the same records;
# what a level changes is when the processor commits these offsets (Level.commit).
# session.timeout.ms is the smallest a classic group accepts by default
# (group.min.session.timeout.ms): a member that stops heartbeating leaves the group after it.
PROCESSOR_CONSUMER: dict[str, object] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "session.timeout.ms": 6000,
}


@dataclass(frozen=True)
class Level:
    name: str
    title: str
    promise: str
    broken_by: str
    producer: dict[str, object]
    consumer: dict[str, object]
    commit: str  # when the processor commits its input offsets
    transactional: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def sink_config(self, isolation: str | None = None) -> dict[str, object]:
        """The sink's settings: the level's own, at `isolation` where the application chose
        one (Scenario.sink_isolation)."""
        return (
            self.consumer if isolation is None else {**self.consumer, "isolation.level": isolation}
        )


AT_MOST_ONCE = Level(
    name="at-most-once",
    title="At most once",
    promise="No duplicates, but a message may be lost.",
    broken_by=(
        "A lost ack is never retried, and a consumer that commits before processing and then "
        "crashes skips what it had read."
    ),
    producer={"acks": "1", "retries": 0, "enable.idempotence": False},
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="before processing",
)

AT_LEAST_ONCE = Level(
    name="at-least-once",
    title="At least once",
    promise=(
        "Nothing acknowledged is lost while one in-sync replica survives (acks=all), but a "
        "message may be stored or processed twice. On a topic with one replica, as in most "
        "scenarios here, acks=all is no safer than acks=1."
    ),
    broken_by=(
        "The broker appends a batch, the ack is lost, and the retry appends it again; a "
        "processor that writes its output and crashes before committing redoes the work."
    ),
    producer={
        "acks": "all",
        "retries": 2147483647,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 5,
    },
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="after processing",
)

EXACTLY_ONCE = Level(
    name="exactly-once",
    title="Exactly once",
    promise=(
        "Each input is reflected once in the output: idempotent writes, offsets committed in "
        "the same transaction as the output, and read_committed downstream."
    ),
    broken_by=(
        "Only side effects outside Kafka (an e-mail, a database write outside the transaction) "
        "escape it; inside Kafka, zombies are fenced by the transactional id's epoch."
    ),
    producer={"acks": "all", "enable.idempotence": True, "transaction.timeout.ms": 60000},
    consumer={"enable.auto.commit": False, "isolation.level": "read_committed", **SINK_READS},
    commit="inside the transaction (send_offsets_to_transaction)",
    transactional=True,
)

IDEMPOTENT_ONLY = Level(
    name="idempotent-only",
    title="Idempotent producer only",
    promise=(
        "Retries within one producer session never duplicate: the broker drops a batch whose "
        "producer id and sequence number it has already stored. The check is per partition "
        "and per producer id and epoch, and covers the last 5 batches the broker keeps for "
        "each producer on each partition (hence at most 5 requests in flight); a producer "
        "idle for longer than producer.id.expiration.ms (one day by default) is forgotten."
    ),
    broken_by=(
        "A new producer instance gets a new producer id, so a resend after a crash is a new "
        "message to the broker; consumer-side duplicates are untouched. librdkafka (this "
        "lab's client) defaults enable.idempotence to false. The Java client defaults it to "
        "true (from 3.0.1, 3.1.1 and 3.2.0), but turns it off without an error when it was "
        "not set explicitly and acks or retries conflict with it (an in-flight limit above 5 "
        "is refused instead; measured on 4.1.2 and 4.4.0, docs/java-client.md and "
        "tests/integration/test_java_producer.py)."
    ),
    producer={"acks": "all", "enable.idempotence": True},
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="after processing",
)

IDEMPOTENCY_KEY = Level(
    name="idempotency-key",
    title="Idempotency key at the consumer",
    promise=(
        "The consumer records each message id in a database and skips ids it has seen, so "
        "duplicates in the log do not reach the result."
    ),
    broken_by=(
        "Only as strong as the key store: the check and the effect must commit together, and "
        "the store must outlive the consumer."
    ),
    producer=AT_LEAST_ONCE.producer,
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="after processing; the sink applies each id once, keyed in SQLite",
    extra={"dedup store": "SQLite, one row per message id (INSERT ... ON CONFLICT DO NOTHING)"},
)

# Kafka Streams (java/src/main/java/lab/streams/StreamsProcessor.java,
# engine/scenarios/streams.py): the same application at both levels, one setting apart. `producer`
# is what Kafka Streams (read in 4.1.2 and 4.4.0) sets on its own producer (StreamsConfig's
# PRODUCER_DEFAULT_OVERRIDES and, at exactly_once_v2, PRODUCER_EOS_OVERRIDES); the role records the
# full effective set.
STREAMS_AT_LEAST_ONCE = Level(
    name="streams-at-least-once",
    title="Kafka Streams, at_least_once",
    promise=(
        "Kafka Streams' default: every input is processed, and its result and state update "
        "written, at least once. Input offsets are committed every commit.interval.ms "
        "(30 s by default), after the outputs and the changelog are flushed."
    ),
    broken_by=(
        "A crash between the outputs and the commit: the replacement restores the state store "
        "from its changelog, counts included, and processes the same inputs again, so results "
        "repeat and counts grow twice."
    ),
    producer={"linger.ms": "100"},
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="every commit.interval.ms (30 s by default), with the main consumer's commitSync",
    extra={"processing.guarantee": "at_least_once"},
)

STREAMS_EXACTLY_ONCE = Level(
    name="streams-exactly-once",
    title="Kafka Streams, exactly_once_v2",
    promise=(
        "The same application with processing.guarantee=exactly_once_v2: each input's result, "
        "its state store update (the changelog record) and its input offset are committed in "
        "one transaction, every commit.interval.ms (100 ms by default at this guarantee)."
    ),
    broken_by=(
        "Only effects outside Kafka; a crashed or frozen instance's open transaction is "
        "aborted, and its producer is fenced."
    ),
    producer={
        "linger.ms": "100",
        "enable.idempotence": True,
        "delivery.timeout.ms": 2147483647,
        "transaction.timeout.ms": 10000,
    },
    consumer={"enable.auto.commit": False, "isolation.level": "read_committed", **SINK_READS},
    commit="in the transaction (sendOffsetsToTransaction, commitTransaction)",
    transactional=True,
    extra={"processing.guarantee": "exactly_once_v2"},
)

STREAMS_LEVELS = (STREAMS_AT_LEAST_ONCE.name, STREAMS_EXACTLY_ONCE.name)

# Only what an application must name (bootstrap servers, client id) is given: each client's
# own defaults decide the rest, which is where librdkafka and the Java client part ways
# (docs/java-client.md).
CLIENT_DEFAULTS = Level(
    name="client-defaults",
    title="The client's defaults",
    promise=(
        "Whatever the client does when the application names no delivery setting: the Java "
        "producer (since 3.0) is idempotent with acks=all; librdkafka is not idempotent."
    ),
    broken_by=(
        "A lost ack: librdkafka's default producer retries without a producer id and the "
        "broker appends the batch again; the Java producer's retry carries its sequence number."
    ),
    producer={},
    consumer={"enable.auto.commit": False, "isolation.level": "read_uncommitted", **SINK_READS},
    commit="after processing",
)

LEVELS: dict[str, Level] = {
    level.name: level
    for level in (
        AT_MOST_ONCE,
        AT_LEAST_ONCE,
        EXACTLY_ONCE,
        IDEMPOTENT_ONLY,
        IDEMPOTENCY_KEY,
        STREAMS_AT_LEAST_ONCE,
        STREAMS_EXACTLY_ONCE,
        CLIENT_DEFAULTS,
    )
}
CORE_LEVELS = ("at-most-once", "at-least-once", "exactly-once")
