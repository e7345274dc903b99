"""Builds the lab's Java roles (java/: a Kafka Streams processor, a Java producer).

They are compiled by Maven from `java/pom.xml` against the lab's Kafka version's
`kafka-clients` and `kafka-streams` on Maven Central (the pom's, or LAB_KAFKA_VERSION's given
as `-Dkafka.version`), and the jar with its runtime classpath is copied into
`.cache/java-roles/VERSION/HASH/libs`, HASH being a hash of java/'s sources: an
edited role is built again (two checkouts sharing one cache never overwrite each other's
build), and a marker file written last means a half-finished build is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.base import paths
from engine.base.errors import MissingToolError
from engine.base.tools import find_java, maven_into

JAVA_DIR = paths.REPO_ROOT / "java"
JAVA_POM = JAVA_DIR / "pom.xml"
_MARKER = ".built-from"


KEEP_BUILDS = 6  # older builds are deleted (each holds the ~90 MB classpath)...
# ...once none has used them for this long: another checkout sharing the cache may be about
# to start a role from one (each use touches its marker).
UNUSED_FOR_S = 3600


def builds_dir() -> Path:
    return paths.cache_dir() / "java-roles" / paths.kafka_version()


def libs_dir() -> Path:
    return builds_dir() / sources_hash() / "libs"


def sources_hash() -> str:
    """A hash of the pom and every source file: what the built jar was built from."""
    digest = hashlib.sha256()
    for path in sorted([JAVA_POM, *JAVA_DIR.joinpath("src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(JAVA_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def java_roles_ready(libs: Path | None = None) -> bool:
    marker = (libs or libs_dir()) / _MARKER
    return marker.exists() and marker.read_text() == sources_hash()


# Levels side by side start their Java roles at the same moment: after an edit of java/, each
# would build the same folder with Maven at once, and the builds break each other (seen when
# two levels' first Java sink started together). One build at a time, in this process and
# across processes (a dashboard and a test sharing the cache); the others then find it built.
_BUILDING = threading.Lock()


@contextmanager
def _one_build_at_a_time() -> Iterator[None]:
    folder = builds_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _BUILDING, (folder / ".building").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_java_roles(*, offline: bool = False) -> Path:
    """Build the Java roles if their sources changed since the last build; their libs folder."""
    libs = libs_dir()
    if java_roles_ready(libs):
        (libs / _MARKER).touch()  # in use: not pruned by another checkout's build
        return libs
    with _one_build_at_a_time():
        if java_roles_ready(libs):  # built meanwhile by whoever held the lock
            return libs
        return _build(libs, offline=offline)


def _build(libs: Path, *, offline: bool) -> Path:
    if not shutil.which("javac"):
        raise MissingToolError(
            "The Java roles are compiled here, which needs a JDK (javac), not only a Java "
            "runtime. Install one (Debian/Ubuntu: apt-get install default-jdk-headless; "
            "macOS: brew install openjdk@17) and run `./lab setup` again."
        )
    maven_into(
        JAVA_POM,
        ("lab.roles.libs", libs),
        stamp=sources_hash(),
        expect="lab-roles-1.jar",
        what=f"the lab's Java roles (Kafka Streams and kafka-clients {paths.kafka_version()})",
        marker=_MARKER,
        offline=offline,
        # JUnit tests of the roles run in `./lab test` (tests/unit/test_java_units.py), not here.
        properties={"kafka.version": paths.kafka_version(), "skipTests": "true"},
    )
    _prune_old_builds()
    return libs


def _prune_old_builds() -> None:
    def last_used(build: Path) -> float:
        marker = build / "libs" / _MARKER
        return marker.stat().st_mtime if marker.exists() else build.stat().st_mtime

    builds = sorted((d for d in builds_dir().iterdir() if d.is_dir()), key=last_used, reverse=True)
    for old in builds[KEEP_BUILDS:]:
        if time.time() - last_used(old) > UNUSED_FOR_S:
            shutil.rmtree(old, ignore_errors=True)


def java_command(main_class: str, *args: str) -> list[str]:
    """`java -cp LIBS/* MAIN ARGS`: how a Java role is started (built first if needed)."""
    return [find_java(), "-cp", str(ensure_java_roles() / "*"), main_class, *args]
