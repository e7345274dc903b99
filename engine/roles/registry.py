"""The roles a run can start, one registry: each role declares itself in its own module.

A role is one client of a level, started as an OS process of its own (engine/proc/processes.py):
a Python module under engine.roles run as `python -m`, or a main class in java/ run on the
JVM (engine/proc/java_roles.py). Each module of this package that defines `ROLE` is one: a
Python role's module is the process itself; a Java role's module holds only its
declaration (the Java class is the process). A new role is one module here (and, for a
Java role, its Java class), found by `roles()`; tests/unit/test_role_registry.py checks
that every role writes only the events it declares.

A level has three parts: the producer, the processor (in a processor pipeline) and the sink.
For each part the role that plays it is the one whose `serves` takes the scenario and the
level; the part's default role (the one with no `serves` of its own: the Python one) plays
it wherever no other role claims it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from engine.base.errors import LabError
from engine.model.events import Event
from engine.roles.specs import RoleSpec

if TYPE_CHECKING:  # annotations only: the registry knows no run
    from engine.model.levels import Level
    from engine.scenarios.scenario import Scenario

Part = Literal["producer", "processor", "sink", "worker"]

# Every role may write these besides its own: an armed fault point's stop (engine/proc/failpoints.py
# and lab.common.FailPoint) and a fatal error.
COMMON_EVENTS = frozenset({Event.FAILPOINT_REACHED, Event.ERROR})


@dataclass(frozen=True)
class Start:
    """What a role is started for: its level's run, the spec the level run made for the
    part (the same for every role of that part), and whether it is a replacement started
    while the instance it replaces is still alive (a frozen one, which may wake)."""

    run: Any  # the LevelRun (engine.run.level_run, which imports this module)
    part_spec: dict[str, Any]
    beside_a_frozen_one: bool = False


def _every_level(scenario: Scenario, level: Level) -> bool:
    return True


@dataclass(frozen=True)
class Role:
    name: str  # the registry's key: "producer", "streams-processor", ...
    # A module under engine.roles (a Python role), or a main class in java/ (a Java role).
    entry: str
    java: bool
    # Which part of a level it plays ("worker": a share crew's, engine/run/queue_crew.py; no
    # level plays one yet).
    part: Part
    events: frozenset[Event]  # what it writes to its history, besides COMMON_EVENTS
    spec_model: type[RoleSpec]  # what it is told at its start (engine/roles/specs.py)
    about: str  # one line: what it is
    # Which levels' part it plays; left unset, every level no other role claims.
    serves: Callable[[Scenario, Level], bool] = _every_level
    # Its spec from the part's (the level run's); None: the part's spec as it is.
    make_spec: Callable[[Start], dict[str, Any]] | None = field(default=None, compare=False)

    def writes(self, event: str) -> bool:
        return event in self.events or event in COMMON_EVENTS

    def spec(self, start: Start) -> dict[str, Any]:
        return self.make_spec(start) if self.make_spec is not None else start.part_spec

    def checked_spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        """`spec` as the role's model reads it (defaults filled in), or a LabError naming
        each field that is wrong: before any process starts."""
        try:
            return self.spec_model.model_validate(spec).model_dump(mode="json")
        except ValidationError as exc:
            wrong = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(the spec)'}: {e['msg']}" for e in exc.errors()
            )
            raise LabError(f"the {self.name} role's spec is wrong: {wrong}") from None


@functools.cache
def roles() -> dict[str, Role]:
    """Every role declared in a module of engine.roles, by name."""
    import engine.roles

    found: dict[str, Role] = {}
    for module in pkgutil.iter_modules(engine.roles.__path__):
        role = getattr(importlib.import_module(f"engine.roles.{module.name}"), "ROLE", None)
        if isinstance(role, Role):
            if role.name in found:
                raise LabError(f"two roles are named {role.name}: rename one of them")
            found[role.name] = role
    return found


def role_for(part: Part, scenario: Scenario, level: Level) -> Role:
    """The role that plays `part` at `level` of `scenario`: the one role that claims it, or
    else the part's default role."""
    of_part = [r for r in roles().values() if r.part == part]
    claimed = [r for r in of_part if r.serves is not _every_level and r.serves(scenario, level)]
    if len(claimed) > 1:
        names = ", ".join(r.name for r in claimed)
        raise LabError(f"{names} all claim the {part} of {level.name}: only one may")
    defaults = [r for r in of_part if r.serves is _every_level]
    if not claimed and len(defaults) != 1:
        raise LabError(f"no one role plays the {part} of {level.name} in {scenario.name}")
    return (claimed or defaults)[0]
