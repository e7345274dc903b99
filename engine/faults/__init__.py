"""Fault kinds: one file each in this folder, and the registry the rest of the engine asks.

A kind is found by its file: every module here that defines `KIND`, an instance of
engine.faults.base.FaultKind, is registered under its name; adding a fault is one new file
(docs/architecture.md, "Adding a fault"). The scenario parser, the nemesis, the live view,
the explainer, the run view's colours and Free play all ask this registry:

    kind_of("crash").fire(fault, nemesis)        # engine.run.nemesis
    kind_of("crash").live(event, point)          # engine.teach.live
    kind_of("crash").evidence(event, where)      # engine.judging.explain
    kind_of("crash").colour                      # pages/_run_view.py
    free_play_controls()                         # engine.run.freeplay
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict, ValidationError, field_validator, model_validator

from engine.faults.base import EVERY_PIPELINE, FaultKind, FreePlayControl
from engine.faults.clients import point_for
from engine.faults.params import COMMON_PARAMS, PARAMS, FaultParams, Trigger
from engine.model.events import Event
from engine.model.words import SKIPPED, Said, from_name, record_words
from engine.proc.failpoints import FailPoint

__all__ = ["KINDS", "Fault", "FaultKind", "Trigger", "discover", "incomplete", "kind_of"]

COLOUR = re.compile(r"#[0-9a-f]{6}")


def incomplete(kind: FaultKind) -> list[str]:
    """What a kind leaves undeclared, one line each; [] for a complete kind."""
    if not isinstance(kind, FaultKind):
        return [f"is a {type(kind).__name__}, not a FaultKind (engine/faults/base.py)"]
    problems = []
    missing = [
        attr
        for attr in ("name", "takes", "available", "reach", "words", "colour")
        if not hasattr(kind, attr)
    ]
    problems += [f"declares no `{attr}`" for attr in missing]
    if missing:
        return problems
    if not re.fullmatch(r"[a-z]+(-[a-z]+)*", kind.name):
        problems.append(f"name '{kind.name}' is not lower-case words joined by dashes")
    own = set(kind.own_params.model_fields) if kind.own_params is not None else set()
    if shared := sorted(own & (PARAMS | COMMON_PARAMS)):
        problems.append(f"has own parameters the shared ones already name: {', '.join(shared)}")
    if unknown := sorted(set(kind.takes) - PARAMS - own):
        problems.append(f"takes parameters no scenario can give: {', '.join(unknown)}")
    if not kind.words.strip():
        problems.append("has no words for the room")
    if not COLOUR.fullmatch(kind.colour):
        problems.append(f"colour '{kind.colour}' is not #rrggbb")
    if not kind.available.backends:
        problems.append("is available on no backend")
    if not kind.available.pipelines or not kind.available.pipelines <= EVERY_PIPELINE:
        problems.append("names no pipeline it runs in")
    if kind.reach not in ("level", "proxy", "brokers"):
        problems.append(f"reach '{kind.reach}' is not level, proxy or brokers")
    # The record its fire writes, at its barest: the words must not need more to be said.
    sample = {"kind": kind.name, "target": kind.default_target, "node": 1, "nodes": [1]}
    try:
        if not kind.live(sample, "").strip():
            problems.append("says nothing live")
        evidence = kind.evidence(sample, None)
        if evidence is not None and not evidence.strip():
            problems.append("has an empty evidence sentence (None says it has none)")
    except Exception as exc:  # reported with the rest, not raised: the list says what to fix
        problems.append(f"cannot say a bare record of itself ({type(exc).__name__}: {exc})")
    return problems


def discover(path: list[str], package: str) -> dict[str, FaultKind]:
    """Every KIND in the modules of `package` (at `path`), by name. A kind that is incomplete,
    or not in the file its name gives, stops the import with what is wrong, so that it cannot
    reach a page half-said."""
    found: dict[str, FaultKind] = {}
    for module in pkgutil.iter_modules(path):
        kind = getattr(importlib.import_module(f"{package}.{module.name}"), "KIND", None)
        if kind is None:
            continue  # a helper the kinds share (base, params, nodes, clients)
        where = f"{package.replace('.', '/')}/{module.name}.py"
        if problems := incomplete(kind):
            raise TypeError(f"{where}: the fault kind {'; '.join(problems)}")
        if module.name != kind.name.replace("-", "_"):
            raise TypeError(
                f"{where} holds the kind '{kind.name}': one file per kind, named after it"
            )
        found[kind.name] = kind
    return dict(sorted(found.items()))


KINDS: dict[str, FaultKind] = discover(__path__, __name__)
BROKER_FAULTS = frozenset(name for name, kind in KINDS.items() if kind.reach == "brokers")
PROXY_WIDE_FAULTS = frozenset(name for name, kind in KINDS.items() if kind.reach == "proxy")


def kind_of(name: str) -> FaultKind:
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"no fault kind '{name}'; known: {', '.join(KINDS)}") from None


class Fault(FaultParams):
    """A scenario's fault, validated against its kind: a known kind, and only its parameters.

    Beyond the shared parameters (FaultParams), a kind may take its own (its `own_params`
    model): given as extra fields, checked by that model, kept with their defaults filled in.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"unknown fault kind '{value}'; known kinds: {', '.join(KINDS)}")
        return value

    @model_validator(mode="after")
    def _its_parameters(self) -> Fault:
        kind = KINDS[self.kind]
        given = self.model_fields_set - COMMON_PARAMS
        own = dict(self.model_extra or {})
        if kind.own_params is not None:
            try:
                checked = kind.own_params.model_validate(
                    {k: v for k, v in own.items() if k in kind.own_params.model_fields}
                )
            except ValidationError as exc:
                raise ValueError(
                    f"{self.kind}: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}"
                ) from None
            own.update(checked.model_dump())
            object.__setattr__(self, "__pydantic_extra__", own)
        if foreign := sorted(given - kind.takes):
            takes = ", ".join(sorted(kind.takes)) or "no parameter besides when and delay_s"
            raise ValueError(f"{self.kind} does not take {', '.join(foreign)} (it takes: {takes})")
        kind.check(self)
        return self


def fault_target(fault: FaultParams) -> str:
    """Whom a fault strikes: its `target`, or its kind's default."""
    return fault.target or kind_of(fault.kind).default_target


def armed_point(fault: FaultParams) -> FailPoint | None:
    """The fault point a crash or pause needs in its target, if its trigger is the target's own."""
    if not kind_of(fault.kind).stops_at_point:
        return None
    return point_for(fault, fault_target(fault))


def reaches_beyond_level(faults: list[Fault]) -> bool:
    """Whether a fault of this list can touch another level's (or run's) clients."""
    return any(kind_of(f.kind).reach != "level" for f in faults)


def beyond_level_words(faults: list[Fault]) -> str | None:
    """What a scenario's faults hurt beyond its own levels, in the room's words ("brokers",
    "the whole network"), or None if each fault stays within its level: a run that hurts
    more needs the cluster alone."""
    if not reaches_beyond_level(faults):
        return None
    brokers = any(kind_of(f.kind).reach == "brokers" for f in faults)
    return "brokers" if brokers else "the whole network"


def takes_leader_away(record: dict[str, Any]) -> bool:
    """Whether a nemesis record is a fault that took the partition's leader away."""
    kind = KINDS.get(str(record.get("kind"))) if record.get("source") != "proxy" else None
    return kind is not None and kind.takes_leader_away


def fault_words(kind: str) -> str:
    """A nemesis record's kind in the room's words: a fault kind's own, else a record's
    (engine.model.words.RECORD_WORDS); "crash-skipped" is "killed: skipped"."""
    if kind.endswith(SKIPPED) and (base := kind[: -len(SKIPPED)]) in KINDS:
        return f"{KINDS[base].words}: skipped"
    if kind in KINDS:
        return KINDS[kind].words
    return record_words(kind) or from_name(kind)


def say_fault(kind: str) -> Said:
    return Said(fault_words(kind), kind)


def free_play_controls() -> list[tuple[str, FreePlayControl]]:
    """(kind, its Free play control) for every kind that has one, in button order."""
    controls = [(name, k.free_play) for name, k in KINDS.items() if k.free_play is not None]
    return sorted(controls, key=lambda item: item[1].order)


def fault_kind_of(record: dict[str, Any]) -> FaultKind | None:
    """The fault kind a nemesis record is of; None for a proxy's record or another record."""
    if record.get("source") == "proxy":
        return None
    return KINDS.get(str(record.get("kind")))


def marks_a_process(record: dict[str, Any]) -> bool:
    """Whether a nemesis record is a fault on one client process (a crash, a pause, a resume:
    its kind's `on_process`), which a chart marks on that process's line."""
    kind = fault_kind_of(record) if record.get("ev", "nemesis") == Event.NEMESIS else None
    return kind is not None and kind.on_process


def wakes(record: dict[str, Any]) -> bool:
    """Whether a nemesis record ends a lasting fault (it is some kind's `ended_by`: a resume)."""
    kind = fault_kind_of(record)
    return kind is not None and any(k.ended_by == kind.name for k in KINDS.values())


def lasting_spans(
    records: Iterable[dict[str, Any]],
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each lasting fault's record (a kind with `ended_by`: a pause) and the record that
    ended it for the same target (its resume), or None if none did, in order."""
    spans: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    open_at: dict[tuple[str, str], int] = {}  # (the ending kind, target) -> its span's index
    for record in records:
        target, kind = str(record.get("target")), fault_kind_of(record)
        if kind is not None and kind.ended_by:
            open_at[(kind.ended_by, target)] = len(spans)
            spans.append((record, None))
        elif (index := open_at.pop((str(record.get("kind")), target), None)) is not None:
            spans[index] = (spans[index][0], record)
    return spans
