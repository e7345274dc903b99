"""Where the lab keeps things, and the Kafka version it runs.

The default Kafka version lives in exactly one place, `kafka/pom.xml`; docker-compose.yml
names the same version and a test checks that the two agree. LAB_KAFKA_VERSION (or
`--kafka-version`) picks another release; its jars are cached per version.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from engine.base import settings
from engine.base.errors import KafkaVersionError

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_POM = REPO_ROOT / "kafka" / "pom.xml"


def cache_dir() -> Path:
    """Downloaded artefacts (Kafka jars). Override with LAB_CACHE_DIR."""
    return Path(settings.CACHE_DIR.raw() or REPO_ROOT / ".cache")


def state_dir() -> Path:
    """Running clusters' data, logs and state files. Override with LAB_STATE_DIR."""
    return Path(settings.STATE_DIR.raw() or REPO_ROOT / ".lab")


def runs_dir() -> Path:
    """Recorded runs, replayable without Kafka. Override with LAB_RUNS_DIR."""
    return Path(settings.RUNS_DIR.raw() or REPO_ROOT / "runs")


# The oldest release the lab runs: its nodes log through Log4j 2 (the lab writes a
# log4j2.properties and reads the nodes' log lines), which Kafka uses from 4.0 (KIP-653);
# 3.x logs through reload4j and would ignore that file.
MIN_KAFKA = (4, 0)
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@cache
def pom_kafka_version() -> str:
    """The Kafka version pinned in kafka/pom.xml: the default."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", KAFKA_POM.read_text())
    if not match:
        raise RuntimeError(f"{KAFKA_POM} has no <kafka.version> property")
    return match.group(1).strip()


def check_kafka_version(text: str, source: str = settings.KAFKA_VERSION.name) -> str:
    """`text` as a Kafka release the lab can run (e.g. "4.4.0"), or KafkaVersionError naming
    `source` (the variable or flag it came from) and what to give instead."""
    version = text.strip()
    match = _RELEASE.fullmatch(version)
    if not match:
        raise KafkaVersionError(
            f"{source}={text!r} is not a Kafka release: give one like 4.4.0 (major.minor.patch, "
            f"as on https://kafka.apache.org/downloads), or unset it for {pom_kafka_version()}."
        )
    if (int(match.group(1)), int(match.group(2))) < MIN_KAFKA:
        oldest = ".".join(map(str, MIN_KAFKA))
        raise KafkaVersionError(
            f"{source}={version}: the lab runs Kafka {oldest} or newer (its nodes log through "
            f"Log4j 2, Kafka's logger from {oldest}, KIP-653); give {oldest}.0 or newer, or "
            f"unset it for {pom_kafka_version()}."
        )
    return version


def kafka_version() -> str:
    """The Kafka version the lab runs: LAB_KAFKA_VERSION when set, else kafka/pom.xml's.

    Read each time (not cached): `--kafka-version` sets the variable after modules that
    ask have been imported.
    """
    given = settings.KAFKA_VERSION.get()
    return check_kafka_version(given) if given else pom_kafka_version()


def kafka_version_chosen() -> bool:
    """Whether the version was chosen (LAB_KAFKA_VERSION), not kafka/pom.xml's default."""
    return bool(settings.KAFKA_VERSION.get())


def kafka_libs_dir(version: str | None = None) -> Path:
    """The folder holding a Kafka version's runtime jars (unset: the version the lab runs)."""
    return cache_dir() / "kafka" / (version or kafka_version()) / "libs"
