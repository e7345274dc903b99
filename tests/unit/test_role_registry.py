"""engine.roles.registry: every role declares itself in one module, with the events it
writes; the level's part is played by the role that claims it, else the Python default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.base import paths
from engine.base.errors import LabError
from engine.model.events import Event
from engine.model.levels import LEVELS
from engine.roles import registry
from engine.roles.registry import COMMON_EVENTS, Role, role_for, roles
from engine.roles.specs import ProducerSpec
from engine.scenarios.scenario import list_scenarios, load_scenario, with_client

JAVA_SOURCES = paths.REPO_ROOT / "java" / "src" / "main" / "java"


def written_by(role: Role) -> set[Event]:
    """The events the role's code writes, read from it: a Python role's module, or every
    class of a Java role's package."""
    if role.java:
        package = JAVA_SOURCES.joinpath(*role.entry.split(".")[:-1])
        text = "".join(p.read_text() for p in package.glob("*.java"))
        return {Event[name] for name in re.findall(r"\bEvents\.([A-Z_]+)\b", text)}
    text = (paths.REPO_ROOT / "engine" / "roles" / f"{role.entry}.py").read_text()
    before, declaration = text.split("\nROLE = Role(", 1)
    code = before + declaration.split("\n)\n", 1)[1]  # the module without its ROLE block
    return {Event[name] for name in re.findall(r"\bEvent\.([A-Z_]+)\b", code)}


@pytest.mark.parametrize("name", sorted(roles()))
def test_a_role_declares_exactly_the_events_its_code_writes(name):
    role = roles()[name]
    written = written_by(role) - COMMON_EVENTS
    assert written == set(role.events) - COMMON_EVENTS, (
        f"{name} writes {sorted(written - role.events)} undeclared and declares "
        f"{sorted(set(role.events) - written)} it never writes"
    )


@pytest.mark.parametrize("name", sorted(n for n, r in roles().items() if r.java))
def test_a_java_roles_entry_is_a_class_in_java(name):
    entry = roles()[name].entry
    assert JAVA_SOURCES.joinpath(*entry.split(".")).with_suffix(".java").is_file(), entry


def test_each_part_is_played_by_the_role_that_claims_it_else_the_python_one():
    ack_loss = load_scenario(list_scenarios()["ack-loss"])
    streams_crash = load_scenario(list_scenarios()["streams-crash"])
    at_least_once, streams_eos = LEVELS["at-least-once"], LEVELS["streams-exactly-once"]
    assert role_for("producer", ack_loss, at_least_once).name == "producer"
    assert role_for("producer", with_client(ack_loss, "java"), at_least_once).name == (
        "java-producer"
    )
    assert role_for("processor", streams_crash, streams_eos).name == "streams-processor"
    assert role_for("processor", ack_loss, at_least_once).name == "processor"
    assert role_for("sink", streams_crash, streams_eos).name == "sink"


def test_two_roles_claiming_one_part_are_refused(monkeypatch):
    ack_loss = load_scenario(list_scenarios()["ack-loss"])
    rival = Role(
        name="rival-producer",
        entry="lab.rival.Producer",
        java=True,
        part="producer",
        spec_model=ProducerSpec,
        events=frozenset(),
        about="A second claimant.",
        serves=lambda scenario, level: scenario.client == "java",
    )
    monkeypatch.setattr(registry, "roles", lambda: {**roles(), rival.name: rival})
    with pytest.raises(LabError, match="all claim the producer of at-least-once"):
        role_for("producer", with_client(ack_loss, "java"), LEVELS["at-least-once"])


def test_the_architecture_page_names_every_role():
    page = (paths.REPO_ROOT / "docs" / "architecture.md").read_text()
    missing = [name for name in roles() if f"`{name}`" not in page]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_every_module_of_the_roles_package_but_the_shared_ones_declares_a_role():
    folder = Path(registry.__file__).parent
    shared = {"__init__", "common", "registry", "specs", "schemas"}
    modules = {p.stem for p in folder.glob("*.py")} - shared
    declared = {r.entry if not r.java else None for r in roles().values()}
    java_declarations = {
        p.stem for p in folder.glob("*.py") if "java=True" in p.read_text() and p.stem not in shared
    }
    assert modules == (declared - {None}) | java_declarations
