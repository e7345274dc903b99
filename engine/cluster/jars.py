"""Resolves the pinned Kafka version's jars from Maven Central (Maven and Java: engine.tools).

The jars come from `kafka/pom.xml`, whose only job is to copy Kafka's runtime classpath into
`.cache/kafka/VERSION/libs`. A marker file records a complete copy, so an interrupted
download is retried rather than used half-done.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine import paths
from engine.errors import KafkaFetchError
from engine.tools import maven_package

_COMPLETE_MARKER = ".complete"


def kafka_jars_ready(libs: Path | None = None) -> bool:
    libs = libs or paths.kafka_libs_dir()
    return (libs / _COMPLETE_MARKER).exists()


def ensure_kafka_jars(*, offline: bool = False) -> Path:
    """Make sure the pinned Kafka jars are in the cache; fetch them with Maven if not."""
    libs = paths.kafka_libs_dir()
    if kafka_jars_ready(libs):
        return libs
    if libs.exists():  # a half-finished copy from an interrupted fetch
        shutil.rmtree(libs)
    maven_package(
        paths.KAFKA_POM,
        ("kafka.libs", libs),
        what=f"Kafka {paths.kafka_version()}",
        offline=offline,
    )
    jar = libs / f"kafka_2.13-{paths.kafka_version()}.jar"
    if not jar.exists():
        raise KafkaFetchError(f"Maven finished, but {jar} is missing; delete {libs} and retry.")
    (libs / _COMPLETE_MARKER).write_text(paths.kafka_version())
    return libs


def kafka_classpath() -> str:
    """The classpath for `java -cp`: a wildcard over the cached jars."""
    return str(ensure_kafka_jars() / "*")
