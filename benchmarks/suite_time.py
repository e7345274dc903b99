"""Where the test suite's time goes, from the JUnit reports its pytest runs write
(pyproject.toml's addopts: test-artifacts/junit.xml; `./lab test`'s first phase, the
clock_bound files two at a time: test-artifacts/junit-paired.xml).

    .venv/bin/python -m benchmarks.suite_time [REPORT ...] [--top 25]

Prints each report's wall time (a phase run two at a time takes less than its tests' sum),
then sums each test's time (setup and teardown are in its case's time, as pytest reports
them) by folder and by file, slowest first. Issue 63's target: the whole `./lab test` in 30
minutes on this 2-core machine.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def times_by_file(report: Path) -> Counter[str]:
    """Seconds per test file (`tests/integration/test_streams.py`)."""
    spent: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        # classname is "tests.integration.test_streams" (or with a class after the module)
        parts = module.split(".")
        cut = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        spent["/".join(parts[: cut + 1]) + ".py"] += float(case.get("time", 0))
    return spent


def wall_seconds(report: Path) -> float:
    """The pytest run's own duration, as its report states it."""
    root = ET.parse(report).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return float(suite.get("time", 0)) if suite is not None else 0.0


DEFAULT_REPORTS = [Path("test-artifacts/junit-paired.xml"), Path("test-artifacts/junit.xml")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    reports = args.reports or [r for r in DEFAULT_REPORTS if r.exists()]
    by_file: Counter[str] = Counter()
    for report in reports:
        print(f"{wall_seconds(report):8,.0f} s of wall time  {report}")
        by_file.update(times_by_file(report))
    print()
    by_folder: Counter[str] = Counter()
    for file, seconds in by_file.items():
        by_folder[file.rsplit("/", 1)[0]] += seconds
    total = sum(by_file.values())
    print(f"{total:,.0f} s in {len(by_file)} files ({total / 60:.1f} min)\n")
    for folder, seconds in by_folder.most_common():
        print(f"{seconds:8,.0f} s {100 * seconds / total:5.1f}%  {folder}/")
    print()
    for file, seconds in by_file.most_common(args.top):
        print(f"{seconds:8,.0f} s {100 * seconds / total:5.1f}%  {file}")


if __name__ == "__main__":
    main()
