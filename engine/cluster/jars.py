"""Resolves the pinned Kafka version's jars from Maven Central (Maven and Java: engine.tools).

The jars come from `kafka/pom.xml`, whose only job is to copy Kafka's runtime classpath into
`.cache/kafka/VERSION/libs`. A marker file records a complete copy, so an interrupted
download is retried rather than used half-done.
"""

from __future__ import annotations

from pathlib import Path

from engine import paths
from engine.tools import maven_into

_COMPLETE_MARKER = ".complete"


def kafka_jars_ready(libs: Path | None = None) -> bool:
    libs = libs or paths.kafka_libs_dir()
    return (libs / _COMPLETE_MARKER).exists()


def ensure_kafka_jars(*, offline: bool = False) -> Path:
    """Make sure the pinned Kafka jars are in the cache; fetch them with Maven if not."""
    version = paths.kafka_version()
    return maven_into(
        paths.KAFKA_POM,
        ("kafka.libs", paths.kafka_libs_dir()),
        stamp=version,
        expect=f"kafka_2.13-{version}.jar",
        what=f"Kafka {version}",
        marker=_COMPLETE_MARKER,
        offline=offline,
    )


def kafka_classpath() -> str:
    """The classpath for `java -cp`: a wildcard over the cached jars."""
    return str(ensure_kafka_jars() / "*")
