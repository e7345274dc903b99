"""The producer's client: librdkafka (confluent_kafka, the lab's default) or the Java client.

A level's producer settings (engine/model/levels.py) are librdkafka property names. The Java
producer role (java/.../JavaProducer.java) gets them translated here, by a small explicit
table, so that what the page shows as "the settings the client really got" is the very map
the role is handed; a setting with no Java equivalent is left out, and the page says why.

Checked against librdkafka 2.16's CONFIGURATION.md and kafka-clients 4.1.2's ProducerConfig
(docs/java-client.md has the sources).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Client = Literal["librdkafka", "java"]
CLIENTS: tuple[Client, ...] = ("librdkafka", "java")
JAVA_PRODUCER_MAIN = "lab.producer.JavaProducer"

# librdkafka names (or their aliases) whose Java name differs.
RENAMED: dict[str, str] = {
    "message.timeout.ms": "delivery.timeout.ms",
    "message.send.max.retries": "retries",
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "compression.codec": "compression.type",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}

# Names both clients spell the same way, with the same meaning. Each checked against
# librdkafka 2.16's CONFIGURATION.md and kafka-clients 4.1.2's ProducerConfig; two names both
# clients know mean different things there, and are in SAME_NAME_OTHER_MEANING instead.
SAME: frozenset[str] = frozenset(
    {
        "acks",
        "retries",
        "enable.idempotence",
        "max.in.flight.requests.per.connection",
        "transaction.timeout.ms",
        "linger.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "delivery.timeout.ms",
        "batch.size",
        "compression.type",
    }
)

# Names both clients know that do not mean the same thing: handed on under the same name (the
# nearest setting the Java client has), and the page says how they differ.
SAME_NAME_OTHER_MEANING: dict[str, str] = {
    "request.timeout.ms": (
        "in librdkafka a producer (topic) property, the ack timeout written into each Produce "
        "request and enforced by the broker only (default 30000; its CONFIGURATION.md); the "
        "Java client writes the same value into each Produce request, and also gives up on any "
        "request whose answer has not come in that time and sends it again (ProducerConfig "
        "and its Sender in kafka-clients 4.1.2)"
    ),
}

# librdkafka settings the Java producer has no counterpart for, and why.
NO_EQUIVALENT: dict[str, str] = {
    "batch.num.messages": (
        "the Java client limits a batch in bytes (batch.size), not in messages; with "
        "linger.ms=0 and a flush after each message every message is its own request anyway"
    ),
    "queue.buffering.max.messages": "the Java client bounds its buffer in bytes (buffer.memory)",
    "queue.buffering.max.kbytes": "the Java client's buffer.memory is the nearest, in bytes",
    "enable.gapless.guarantee": (
        "librdkafka's own (experimental) guard; the Java idempotent producer has no switch"
    ),
    "socket.timeout.ms": "the Java client has request.timeout.ms only",
    "partitioner": (
        "the Java client names a class (partitioner.class), and its default differs: a keyed "
        "record's partition is a murmur2 hash of its key (kafka-clients 4.1.2's "
        "BuiltInPartitioner), where librdkafka's default, consistent_random, is a CRC32 hash "
        "(librdkafka's murmur2_random matches the Java default: its CONFIGURATION.md)"
    ),
}


class UntranslatedSetting(ValueError):
    """A librdkafka setting the table does not know: added to it, never guessed."""


@dataclass(frozen=True)
class ClientSettings:
    """A level's producer settings as one client gets them."""

    client: Client
    config: dict[str, Any]  # exactly what the role is handed
    renamed: dict[str, str] = field(default_factory=dict)  # librdkafka name -> Java name
    dropped: dict[str, str] = field(default_factory=dict)  # librdkafka name -> why
    differs: dict[str, str] = field(default_factory=dict)  # same name, other meaning -> how


def java_value(name: str, value: Any) -> str:
    """A value as the Java client reads it: booleans in lower case, acks -1 as "all"."""
    if isinstance(value, bool):
        return str(value).lower()
    if name == "acks" and str(value) == "-1":
        return "all"
    return str(value)


def to_java(config: dict[str, Any]) -> ClientSettings:
    """librdkafka producer settings as the Java producer's, by the table above."""
    given: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    dropped: dict[str, str] = {}
    differs: dict[str, str] = {}
    for name, value in config.items():
        if name in NO_EQUIVALENT:
            dropped[name] = NO_EQUIVALENT[name]
            continue
        java_name = RENAMED.get(name, name)
        if name in SAME_NAME_OTHER_MEANING:
            differs[name] = SAME_NAME_OTHER_MEANING[name]
        elif name not in RENAMED and name not in SAME:
            raise UntranslatedSetting(
                f"'{name}' has no entry in engine/model/java_client.py's table: add its Java name "
                "(or why it has none) before a Java producer runs with it"
            )
        if java_name != name:
            renamed[name] = java_name
        given[java_name] = java_value(java_name, value)
    return ClientSettings("java", given, renamed, dropped, differs)


def settings_for(client: Client, config: dict[str, Any]) -> ClientSettings:
    """What the producer of `client` is handed for a level's (librdkafka) settings."""
    if client == "java":
        return to_java(config)
    return ClientSettings("librdkafka", dict(config))


def describe(settings: ClientSettings) -> list[str]:
    """The page's lines: what was renamed, what was left out and why."""
    lines = [f"`{old}` is `{new}` in the Java client" for old, new in settings.renamed.items()]
    lines += [f"`{name}` is not given: {why}" for name, why in settings.dropped.items()]
    lines += [
        f"`{name}` is given under the same name, but means something else: {how}"
        for name, how in settings.differs.items()
    ]
    if not settings.config:
        lines.append(
            "Nothing but the names every application gives (bootstrap servers, client id): "
            f"{settings.client}'s own defaults decide the rest."
        )
    return lines
