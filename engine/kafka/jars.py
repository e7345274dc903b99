"""Resolves a Kafka version's jars from Maven Central (Maven and Java: engine.base.tools).

The jars come from `kafka/pom.xml`, whose only job is to copy Kafka's runtime classpath into
`.cache/kafka/VERSION/libs`; the version is the pom's unless LAB_KAFKA_VERSION names
another (given to Maven as `-Dkafka.version`), so each version is fetched once, on first
use. A marker file records a complete copy, so an interrupted download is retried rather
than used half-done.
"""

from __future__ import annotations

from pathlib import Path

from engine.base import paths, settings
from engine.base.errors import KafkaFetchError
from engine.base.tools import maven_into

_COMPLETE_MARKER = ".complete"


def kafka_jars_ready(libs: Path | None = None) -> bool:
    libs = libs or paths.kafka_libs_dir()
    return (libs / _COMPLETE_MARKER).exists()


def ensure_kafka_jars(*, offline: bool = False, version: str | None = None) -> Path:
    """Make sure a Kafka version's jars (unset: the lab's version) are in the cache; fetch
    them with Maven if not."""
    version = version or paths.kafka_version()
    try:
        return maven_into(
            paths.KAFKA_POM,
            ("kafka.libs", paths.kafka_libs_dir(version)),
            stamp=version,
            expect=f"kafka_2.13-{version}.jar",
            what=f"Kafka {version}",
            marker=_COMPLETE_MARKER,
            offline=offline,
            properties={"kafka.version": version},
        )
    except KafkaFetchError as exc:
        if version == paths.pom_kafka_version():
            raise
        # A chosen version may be one Maven Central does not serve: say where it came from.
        raise KafkaFetchError(
            f"{exc} If {version} is not a released Kafka (https://kafka.apache.org/downloads), "
            f"fix {settings.KAFKA_VERSION.name} or --kafka-version, or unset it for "
            f"{paths.pom_kafka_version()}."
        ) from exc


def kafka_classpath(version: str | None = None) -> str:
    """The classpath for `java -cp`: a wildcard over a version's cached jars."""
    return str(ensure_kafka_jars(version=version) / "*")
