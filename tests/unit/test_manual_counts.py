"""The counts the README states are the lab's own: its scenario files and its pages."""

from __future__ import annotations

import re

from engine import paths
from engine.scenario import list_scenarios

WORDS = {
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "twenty-one": 21,
    "twenty-two": 22, "twenty-three": 23, "twenty-four": 24, "twenty-five": 25,
}  # fmt: skip


def stated(pattern: str) -> int:
    text = " ".join((paths.REPO_ROOT / "README.md").read_text().replace(">", " ").split())
    match = re.search(pattern, text, re.IGNORECASE)
    assert match, pattern
    return WORDS[match.group(1).lower()]


def test_the_readme_states_the_number_of_scenarios() -> None:
    assert stated(r"([\w-]+) failure scenarios are judged") == len(list_scenarios())


def test_the_readme_states_the_number_of_pages() -> None:
    app = (paths.REPO_ROOT / "app.py").read_text()
    assert stated(r"The dashboard has ([\w-]+) pages") == app.count("st.Page(")
