"""docs/sources.md names only things that exist: every scenario, lesson step, test function,
benchmark and doc it points at, and a section for each of the five source texts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from engine.base import paths

ROOT = paths.REPO_ROOT
SOURCES = ROOT / "docs" / "sources.md"
SEEDS = ("000", "001", "002", "003", "004")

# A backticked path in one of the lab's folders, with an optional `::test` or `#step`.
REFERENCE = re.compile(
    r"`((?:scenarios|lessons|tests|benchmarks|docs)/[\w./-]+?\.(?:yaml|py|md))"
    r"(?:(::|#)([\w\[\].-]+))?`"
)
SECTION = re.compile(r"^## Seed (\d{3})\b", re.MULTILINE)
ROW = re.compile(r"^\| (\d{3})-\d+ \|", re.MULTILINE)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
ISSUE = re.compile(r"\bissues? \d+|#\d+\b", re.IGNORECASE)


def references(text: str) -> list[str]:
    """Every reference the text makes, as written: `path`, `path::test` or `path#step`."""
    return [m.group(0).strip("`") for m in REFERENCE.finditer(text)]


def missing(reference: str, root: Path = ROOT) -> str | None:
    """Why `reference` does not exist in the repository, or None if it does."""
    match = REFERENCE.fullmatch(f"`{reference}`")
    if match is None:
        return f"{reference}: not a path in scenarios/, lessons/, tests/, benchmarks/ or docs/"
    path, kind, name = match.groups()
    file = root / path
    if not file.is_file():
        return f"{path}: no such file"
    if kind == "::":
        function = name.split("[", 1)[0]
        if not re.search(rf"^\s*(?:async )?def {re.escape(function)}\(", file.read_text(), re.M):
            return f"{path}: no function {function}"
    if kind == "#":
        steps = (yaml.safe_load(file.read_text()) or {}).get("steps", [])
        if name not in {step.get("scenario") for step in steps}:
            return f"{path}: no step runs the scenario {name}"
    return None


def seed_sections(text: str) -> dict[str, int]:
    """Each seed section's number of claim rows (rows numbered `| 003-4 |` under it)."""
    counts: dict[str, int] = {}
    heads = list(SECTION.finditer(text))
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : after.start() if after else len(text)]
        seed = head.group(1)
        counts[seed] = sum(1 for row in ROW.finditer(body) if row.group(1) == seed)
    return counts


def test_the_page_names_files_tests_and_steps() -> None:
    found = references(SOURCES.read_text())
    kinds = {("::" in r, "#" in r) for r in found}
    assert len(found) > 100 and kinds == {(False, False), (True, False), (False, True)}


@pytest.mark.parametrize("reference", sorted(set(references(SOURCES.read_text()))))
def test_every_reference_exists(reference: str) -> None:
    assert missing(reference) is None, missing(reference)


@pytest.mark.parametrize(
    "reference",
    [
        "scenarios/no-such-scenario.yaml",
        "tests/integration/test_scenarios.py::test_no_such_function",
        "tests/integration/test_no_such_file.py::test_x",
        "lessons/delivery-guarantees.yaml#no-such-step",
        "lessons/replication-and-durability.yaml#network-blip",
        "benchmarks/no_such_bench.py",
        "docs/no-such-page.md",
    ],
)
def test_a_made_up_reference_is_caught(reference: str) -> None:
    assert missing(reference) is not None


def test_a_bad_row_is_caught_by_the_same_checker() -> None:
    row = (
        "| 003-99 | x | `scenarios/ack-loss.yaml`; "
        "`tests/integration/test_proxy_faults.py::test_dropped_ack_that_never_was` | y |"
    )
    assert [missing(r) for r in references(row)] == [
        None,
        "tests/integration/test_proxy_faults.py: no function test_dropped_ack_that_never_was",
    ]


def test_a_parametrized_test_is_found_by_its_function() -> None:
    name = "tests/integration/test_scenarios.py::test_scenario_behaves_as_its_file_says[ack-loss]"
    assert missing(name) is None


def test_each_seed_has_its_section_with_claims() -> None:
    counts = seed_sections(SOURCES.read_text())
    assert list(counts) == list(SEEDS)
    assert all(n >= 5 for n in counts.values()), counts


def test_a_missing_seed_section_is_seen() -> None:
    text = SOURCES.read_text()
    start = text.index("## Seed 002")
    cut = text[:start] + text[text.index("## Seed 003") :]
    assert "002" not in seed_sections(cut)


def test_no_dates_and_no_issue_numbers() -> None:
    text = SOURCES.read_text()
    assert DATE.findall(text) + ISSUE.findall(text) == []
    assert ISSUE.findall("being built (issue 35)")  # the check finds one where it is
