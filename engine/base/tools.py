"""The JVM tools the lab needs: a Java 17+ runtime (the brokers, Kafka's own tools, Spark;
17, 21 and 25 are tested) and Maven (which fetches the jars of Kafka, Spark's Kafka
connector and the yardsticks).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from engine.base import paths
from engine.base.errors import KafkaFetchError, LabError, MissingToolError

MIN_JAVA = 17

JAVA_HINT = (
    "Install a JDK 17, 21 or 25 (Debian/Ubuntu: `sudo apt-get install default-jdk-headless`, "
    "which is Java 17 on Debian 12 and 21 on Debian 13 and Ubuntu 24.04; macOS: "
    "`brew install openjdk`) or set JAVA_HOME to one."
)
MAVEN_HINT = (
    "Install Maven (Debian/Ubuntu: `sudo apt-get install maven`; macOS: `brew install maven`)."
)


def find_java() -> str:
    """Return the path of a Java 17+ executable, or raise MissingToolError saying what to do."""
    candidates = []
    if java_home := os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(java_home) / "bin" / "java"))
    if found := shutil.which("java"):
        candidates.append(found)
    for java in candidates:
        if not Path(java).exists():
            continue
        major = java_major_version(java)
        if major is not None and major >= MIN_JAVA:
            return java
        if major is not None:
            raise MissingToolError(
                f"Java {major} was found at {java}, but Kafka {paths.kafka_version()} needs "
                f"Java {MIN_JAVA} or newer. {JAVA_HINT}"
            )
    raise MissingToolError(f"Java was not found on PATH. {JAVA_HINT}")


@functools.cache  # a JVM start each time: every Java role's start asks (engine/proc/java_roles.py)
def java_major_version(java: str) -> int | None:
    """Parse `java -version` output ("17.0.15", "1.8.0_392") into its major version."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_java_version(out.stderr + out.stdout)


def parse_java_version(text: str) -> int | None:
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older report themselves as "1.8".
    return int(match.group(2) or 0) if major == 1 else major


def find_maven() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise MissingToolError(
            f"Maven is needed once to fetch Kafka {paths.kafka_version()}'s jars, but `mvn` is "
            f"not on PATH. {MAVEN_HINT}"
        )
    return mvn


def maven_package(
    pom: Path,
    output: tuple[str, Path],
    *,
    what: str,
    error: type[LabError] = KafkaFetchError,
    offline: bool = False,
    repo_local: Path | None = None,
    properties: dict[str, str] | None = None,
) -> None:
    """Run `mvn package` on one of the lab's poms, which copies its jars into a folder.

    `output` is the pom's property naming that folder and the folder itself; `properties`
    override others of the pom's (`kafka.version`). A failure is one actionable `error`
    naming `what` was being fetched. `repo_local` replaces ~/.m2 (for measuring a
    first-time fetch).
    """
    mvn = find_maven()
    find_java()  # Maven needs a JDK too; fail with the clearer message first.
    prop, folder = output
    cmd = [mvn, "-q", "-B", "-f", str(pom), f"-D{prop}={folder}"]
    cmd += [f"-D{name}={value}" for name, value in (properties or {}).items()]
    if repo_local is not None:
        cmd.append(f"-Dmaven.repo.local={repo_local}")
    cmd += ["-o", "package"] if offline else ["package"]
    # Online, a failed build is tried once more: a fresh machine's first fetch of a version
    # failed once in CI (2026-12-03) and passed when run again; a real error fails twice.
    for attempt in (1, 2):
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired as exc:
            raise error(
                f"Fetching {what} from Maven Central took over 15 minutes. "
                "Check the network and run `python -m engine setup` again."
            ) from exc
        if result.returncode == 0 or offline or attempt == 2:
            break
    if result.returncode != 0:
        raise error(
            f"{what} could not be fetched from Maven Central or built "
            f"(mvn exited {result.returncode}: {maven_errors(result.stdout + result.stderr)}). "
            "Check the network or the proxy settings in ~/.m2/settings.xml, then run "
            "`python -m engine setup` again."
        )


def maven_errors(output: str, limit: int = 600) -> str:
    """What Maven said went wrong: its first [ERROR] lines, without the advice it appends
    ("To see the full stack trace...", "[Help 1]"), or its last lines if it said none."""
    noise = ("-> [Help", "[Help ", "To see the full", "Re-run Maven", "For more information")
    errors = [
        line.replace("[ERROR]", "").strip()
        for line in output.splitlines()
        if line.startswith("[ERROR]") and not any(n in line for n in noise)
    ]
    said = [e for e in errors if e] or output.strip().splitlines()[-3:]
    return " ".join(said)[:limit]


def maven_into(
    pom: Path,
    output: tuple[str, Path],
    *,
    stamp: str,
    expect: str,
    what: str,
    marker: str = ".complete",
    error: type[LabError] = KafkaFetchError,
    offline: bool = False,
    properties: dict[str, str] | None = None,
) -> Path:
    """The folder a pom copies its jars into, fetched by `maven_package` unless a complete
    copy of `stamp` (a version, a sources hash) is there already.

    A half-finished folder is removed first and the marker is written last, so an interrupted
    fetch is fetched again, never used; `expect` (a glob) must match once Maven is done.
    """
    folder = output[1]
    done = folder / marker
    if done.exists() and done.read_text() == stamp:
        return folder
    if folder.exists():  # an older copy, or a half-finished one
        shutil.rmtree(folder)
    maven_package(pom, output, what=what, error=error, offline=offline, properties=properties)
    if not any(folder.glob(expect)):
        raise error(
            f"Maven finished, but {folder} holds no {expect}; delete {folder} and run "
            "`./lab setup` again."
        )
    done.write_text(stamp)
    return folder
