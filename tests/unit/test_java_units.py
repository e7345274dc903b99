"""The Java roles' own JUnit tests (java/src/test: resume, values, payments, fault point
counting), run by Maven here so that `./lab test` runs them; the setup's build skips them."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from engine.base import paths
from engine.base.tools import find_java, find_maven
from engine.proc.java_roles import JAVA_POM

# Every JUnit class in java/src/test, each of which must have run.
SUITES = {
    "FailPointTest",
    "PaymentsTest",
    "ProducerResumeTest",
    "ProducerValuesTest",
    "SpecTest",
    "StoreLogTapTest",
}


def test_the_java_roles_junit_tests_pass(tmp_path: Path) -> None:
    find_java()
    reports = tmp_path / "reports"
    result = subprocess.run(
        [
            find_maven(),
            "-q",
            "-B",
            "-f",
            str(JAVA_POM),
            f"-Dkafka.version={paths.kafka_version()}",
            f"-Dlab.test.reports={reports}",
            "test",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = (result.stdout + result.stderr)[-3000:]
    assert result.returncode == 0, output
    ran: dict[str, tuple[int, int]] = {}
    for report in reports.glob("TEST-*.xml"):
        suite = ET.parse(report).getroot()
        name = suite.get("name", "").rsplit(".", 1)[-1]
        broken = sum(int(suite.get(k, "0")) for k in ("failures", "errors", "skipped"))
        ran[name] = (int(suite.get("tests", "0")), broken)
    assert set(ran) == SUITES, f"JUnit classes run: {sorted(ran)}"
    assert all(tests > 0 and broken == 0 for tests, broken in ran.values()), ran


# The Java roles' formatter: google-java-format (Google's style, which java/ follows), the
# newest release that runs on Java 17 (it ran on 25 too). It needs javac's internals opened.
GJF = "com.google.googlejavaformat:google-java-format:1.28.0:jar:all-deps"
GJF_OPENS = [
    f"--add-exports=jdk.compiler/com.sun.tools.javac.{package}=ALL-UNNAMED"
    for package in ("api", "code", "file", "parser", "tree", "util")
]


def google_java_format() -> list[str]:
    """The command that runs google-java-format, fetched from Maven Central on first use."""
    folder = paths.cache_dir() / "tools" / "google-java-format"
    jar = folder / "google-java-format-1.28.0-all-deps.jar"
    if not jar.exists():
        fetched = subprocess.run(
            [
                find_maven(),
                "-q",
                "-B",
                "dependency:copy",
                f"-Dartifact={GJF}",
                f"-DoutputDirectory={folder}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert fetched.returncode == 0, (fetched.stdout + fetched.stderr)[-2000:]
    return [find_java(), *GJF_OPENS, "-jar", str(jar)]


def test_the_java_roles_are_formatted_by_google_java_format() -> None:
    """`--dry-run` names every file it would change: none. To format them:
    `java ...opens... -jar google-java-format-1.28.0-all-deps.jar --replace FILES`."""
    sources = sorted(str(p) for p in (JAVA_POM.parent / "src").rglob("*.java"))
    result = subprocess.run(
        [*google_java_format(), "--dry-run", *sources],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "", f"not formatted: {result.stdout.split()}"


def java_lab_imports(source: str) -> set[str]:
    """The lab's packages a Java file imports (`import lab.common.History;` -> "common")."""
    return set(re.findall(r"^import (?:static )?lab\.(\w+)\.", source, re.M))


def test_the_java_packages_keep_their_house_rules() -> None:
    """lab.common imports no other package of the lab; a role's package imports only
    lab.common (docs/architecture.md, the Java roles' table)."""
    broken = []
    for path in sorted((JAVA_POM.parent / "src").rglob("*.java")):
        own = path.parent.name
        allowed = {own} if own == "common" else {own, "common"}
        if extra := java_lab_imports(path.read_text()) - allowed:
            broken.append(f"{path.relative_to(JAVA_POM.parent)} imports lab.{', lab.'.join(extra)}")
    assert not broken, broken
    assert java_lab_imports("import lab.streams.Payments;\nimport lab.common.History;\n") == {
        "streams",
        "common",
    }
