"""Every claim a room reads names where it comes from: each scenario's story and each lesson
step carry `sources`, shown as footnotes under the text."""

from __future__ import annotations

import pytest

from engine.scenarios.scenario import ScenarioError, list_scenarios, load_scenario, parse_scenario
from engine.teach.lesson import list_lessons, load_lesson
from pages._sources import footnote_markdown, footnote_tests


@pytest.mark.parametrize("name", sorted(list_scenarios()))
def test_every_story_names_its_sources(name: str) -> None:
    scenario = load_scenario(list_scenarios()[name])
    assert scenario.story.strip(), name
    assert scenario.sources, f"scenarios/{name}.yaml: its story has no sources"


@pytest.mark.parametrize("name", sorted(list_lessons()))
def test_every_lesson_step_names_its_sources(name: str) -> None:
    for index, step in enumerate(load_lesson(list_lessons()[name]).steps):
        assert step.sources, f"lessons/{name}.yaml step {index} ({step.scenario}) has no sources"


def test_a_source_is_an_address_or_a_lab_test_that_exists() -> None:
    base = "name: x\ntitle: t\nstory: s\nsources:\n  - {label: 'KIP-98', url: '%s'}\n"
    assert parse_scenario(base % "https://cwiki.apache.org/x").sources[0].label == "KIP-98"
    lab_test = "tests/unit/test_sources.py::test_a_source_is_an_address_or_a_lab_test_that_exists"
    assert parse_scenario(base % lab_test).sources[0].url == lab_test
    for wrong in ("http://insecure.example", "tests/no_such_file.py::x", "see the docs"):
        with pytest.raises(ScenarioError, match=r"sources\.0\.url"):
            parse_scenario(base % wrong)


def test_footnotes_number_each_source_and_name_a_lab_test() -> None:
    scenario = load_scenario(list_scenarios()["leader-moves"])
    text = footnote_markdown(scenario.sources)
    assert text.startswith("Sources: [1] [Partition.checkEnoughReplicasReachOffset](https://")
    assert f"[{len(scenario.sources)}] The lab's test" in text
    # The projected line says what the test is; its pytest id is in the hover help only.
    assert "tests/integration" not in text and "(a test of the lab on a real broker)" in text
    assert "tests/integration/test_replication_truths.py::" in footnote_tests(scenario.sources)
    assert footnote_markdown([]) == ""
