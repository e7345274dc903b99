"""Where the test suite's time goes, from the JUnit report every pytest run writes
(pyproject.toml's addopts: test-artifacts/junit.xml).

    .venv/bin/python -m benchmarks.suite_time [test-artifacts/junit.xml] [--top 25]

Sums each test's time (setup and teardown are in its case's time, as pytest reports them) by
folder and by file, slowest first. Issue 63's target: the whole `./lab test` in 30 minutes on
this 2-core machine.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", default="test-artifacts/junit.xml", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    by_file = times_by_file(args.report)
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
