"""docs/scenarios.md is generated from scenarios/*.yaml, and a stale copy fails here."""

from __future__ import annotations

from engine.scenarios.scenario import list_scenarios, load_scenario
from engine.teach import scenario_docs


def test_docs_scenarios_md_is_what_the_scenario_files_say() -> None:
    assert scenario_docs.DOC.read_text() == scenario_docs.render(), (
        "docs/scenarios.md is stale: run `python -m engine.teach.scenario_docs`"
    )


def test_the_check_fails_on_a_stale_copy(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "scenarios.md"
    stale.write_text(scenario_docs.render().replace("### ack-loss", "### ack-lost"))
    monkeypatch.setattr(scenario_docs, "DOC", stale)
    assert scenario_docs.main(["--check"]) == 1
    stale.write_text(scenario_docs.render())
    assert scenario_docs.main(["--check"]) == 0


def test_every_scenario_has_its_section_with_its_title_and_nodes() -> None:
    text = scenario_docs.render()
    for name, path in list_scenarios().items():
        scenario = load_scenario(path)
        section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert scenario.title in section
        assert section.count(f"{scenario.nodes} node") >= 1
