"""The counts the README states are the repository's own: its scenarios, lessons, levels,
pages and sections, the lesson table and the scenario groups. Each check is shown failing on
a wrong count (the `wrong` tests)."""

from __future__ import annotations

import re

import pytest

from engine.base import paths
from engine.model.levels import LEVELS
from engine.scenarios.scenario import list_scenarios
from engine.teach.lesson import list_lessons, load_lesson
from engine.teach.teaching import GROUPS, lesson_nodes, scenario_nodes

README = paths.REPO_ROOT / "README.md"
APP = paths.REPO_ROOT / "app.py"
NUMBER_WORDS = "one two three four five six seven eight nine ten eleven twelve"
WORDS = {word: value for value, word in enumerate(NUMBER_WORDS.split(), start=1)}


def number(word: str) -> int:
    return int(word) if word.isdigit() else WORDS[word.lower()]


def stated(text: str, pattern: str) -> int:
    flat = " ".join(text.split())
    match = re.search(pattern, flat, re.IGNORECASE)
    assert match, f"the README no longer says {pattern!r}"
    return number(match.group(1))


def counts_stated(text: str) -> dict[str, int]:
    return {
        "scenarios": stated(text, r"(\w+) failure scenarios"),
        "lessons": stated(text, r"(\w+) lessons \(guided classes"),
        "levels": stated(text, r"(\w+) guarantee levels"),
        "pages": stated(text, r"The dashboard has (\w+) pages"),
        "sections": stated(text, r"pages, in (\w+) sections"),
    }


def counts_in_the_repository() -> dict[str, int]:
    app = APP.read_text()
    return {
        "scenarios": len(list_scenarios()),
        "lessons": len(list_lessons()),
        "levels": len(LEVELS),
        "pages": app.count("st.Page("),
        "sections": len(re.findall(r'^ +"[^"]+": \[$', app, re.MULTILINE)),
    }


def test_the_readme_states_the_repositorys_counts() -> None:
    assert counts_stated(README.read_text()) == counts_in_the_repository()


def test_a_wrong_count_in_the_readme_fails() -> None:
    text = README.read_text()
    actual = counts_in_the_repository()
    wrong = text.replace(f"{actual['scenarios']} failure scenarios", "20 failure scenarios")
    assert counts_stated(wrong) != actual
    wrong = re.sub(r"\bnine pages\b", "eight pages", text)
    assert counts_stated(wrong)["pages"] == 8 != actual["pages"]


def lesson_rows(text: str) -> dict[str, tuple[int, int, int]]:
    """The README's lesson table: file -> (minutes, steps, nodes)."""
    rows = re.findall(
        r"^\| `lessons/([\w-]+)\.yaml` \| (\d+) min, (\d+) steps \| (\d+) \|", text, re.M
    )
    return {name: (int(m), int(s), int(n)) for name, m, s, n in rows}


def lessons_in_the_repository() -> dict[str, tuple[int, int, int]]:
    table = {}
    for name, path in list_lessons().items():
        lesson = load_lesson(path)
        table[name] = (lesson.minutes, len(lesson.steps), lesson_nodes(lesson))
    return table


def test_the_readmes_lesson_table_is_the_lesson_files() -> None:
    assert lesson_rows(README.read_text()) == lessons_in_the_repository()


def test_a_wrong_lesson_row_fails() -> None:
    text = README.read_text().replace("| 45 min, 7 steps | 3 |", "| 45 min, 7 steps | 1 |")
    assert lesson_rows(text) != lessons_in_the_repository()


def group_rows(text: str) -> dict[str, tuple[list[str], str]]:
    rows = re.findall(r"^\| ([^|`]+?) \| ([a-z, -]+) \| ([^|]+?) \|$", text, re.M)
    return {title: (names.split(", "), nodes) for title, names, nodes in rows}


def nodes_column(names: tuple[str, ...]) -> str:
    nodes = {name: scenario_nodes(name) for name in names}
    usual = max(set(nodes.values()), key=list(nodes.values()).count)
    others = [f"{name} {n}" for name, n in nodes.items() if n != usual]
    return f"{usual}" + (f" ({', '.join(others)})" if others else "")


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.short)
def test_the_readmes_scenario_groups_are_engine_teachings(group) -> None:
    rows = group_rows(README.read_text())
    assert rows.get(group.title) == (list(group.scenarios), nodes_column(group.scenarios))


def test_a_scenario_left_out_of_the_readmes_group_fails() -> None:
    text = README.read_text().replace("ack-loss, network-blip, ", "network-blip, ")
    group = GROUPS[0]
    assert group_rows(text).get(group.title) != (
        list(group.scenarios),
        nodes_column(group.scenarios),
    )
