"""The Java roles' own JUnit tests (java/src/test: resume, values, payments, fault point
counting), run by Maven here so that `./lab test` runs them; the setup's build skips them."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from engine import paths
from engine.java_roles import JAVA_POM
from engine.tools import find_java, find_maven

# Every JUnit class in java/src/test, each of which must have run.
SUITES = {"FailPointTest", "PaymentsTest", "ProducerResumeTest", "ProducerValuesTest"}


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
