"""Where the lab keeps things, and the one pinned Kafka version.

The Kafka version lives in exactly one place, `kafka/pom.xml`; docker-compose.yml names the
same version and a test checks that the two agree.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from engine import settings

REPO_ROOT = Path(__file__).resolve().parent.parent
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


@cache
def kafka_version() -> str:
    """The Kafka version pinned in kafka/pom.xml."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", KAFKA_POM.read_text())
    if not match:
        raise RuntimeError(f"{KAFKA_POM} has no <kafka.version> property")
    return match.group(1).strip()


def kafka_libs_dir() -> Path:
    """The folder holding the pinned Kafka version's runtime jars."""
    return cache_dir() / "kafka" / kafka_version() / "libs"
