"""Lesson files: a guided class through the scenarios (predict, run, explain).

A lesson lives in lessons/NAME.yaml. Each step names a scenario and asks the room a question.
Every option states the outcome it predicts as conditions on the run's counts (`when`), so
the run itself decides which option happened: the verdict is never the option's label alone.
A file whose options could both hold on one outcome is refused when it loads, and so is a
condition on a count the judge does not produce.

The explanation may cite the run's counts as `{level.field}`: they are filled in from the
run beside it, so a sentence never states a number its run contradicts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.base import paths
from engine.base.errors import LabError
from engine.judging.checker import LevelCounts
from engine.scenarios.scenario import (
    EXPECTATION,
    OnJava,
    Scenario,
    Source,
    count_of,
    list_scenarios,
    load_scenario,
    meets,
    with_client,
    with_sink_isolation,
)


class LessonError(LabError):
    pass


# The idempotency-key level's counts (engine.judging.judge.Effects), named here so that a
# lesson file loads without the judge and everything it imports; a unit test keeps the two lists
# equal.
EFFECT_COUNTS = ("effects", "effect_ids", "duplicates_absorbed")


# A read_committed level's counts as a read_uncommitted reader would make them
# (engine.judging.judge.UncommittedReader), likewise.
UNCOMMITTED_READER_COUNTS = ("read_uncommitted_duplicates", "read_uncommitted_aborted")


def count_fields() -> frozenset[str]:
    """The integer counts a judged level carries: a condition may name only these."""
    counts = (f.name for f in dataclasses.fields(LevelCounts) if f.type in ("int", int))
    return frozenset((*counts, *EFFECT_COUNTS, *UNCOMMITTED_READER_COUNTS))


# An explanation's reference to a count of the run: {at-least-once.duplicates}.
PLACEHOLDER = re.compile(r"\{([a-z0-9-]+)\.([a-z_]+)\}")


@dataclass(frozen=True)
class Interval:
    """The counts a condition allows: lo..hi, both included (hi may be infinite)."""

    lo: int
    hi: float

    def meet(self, other: Interval) -> Interval:
        return Interval(max(self.lo, other.lo), min(self.hi, other.hi))

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


class Condition(BaseModel):
    """One count of one level: "3", ">=1" or "<=0", as in a scenario's `expect`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: str
    field: str
    expect: str = Field(pattern=rf"^\s*{EXPECTATION}\s*$")

    @model_validator(mode="after")
    def _a_count_the_judge_produces(self) -> Condition:
        known = count_fields()
        for part in self.field.split("+"):  # "a+b": the sum of two counts
            if part not in known:
                names = ", ".join(sorted(known))
                raise ValueError(f"'{part}' is not a count of a judged level (one of {names})")
        return self

    def holds(self, results: dict[str, Any]) -> bool | None:
        """True or False against a run's results; None if the run lacks that level or count."""
        level = results.get(self.level)
        value = None if level is None else count_of(level, self.field)
        return None if value is None else meets(value, self.expect)

    def interval(self) -> Interval:
        text = self.expect.strip()
        if text.startswith(">="):
            return Interval(int(text[2:]), math.inf)
        if text.startswith("<="):
            return Interval(0, int(text[2:]))
        return Interval(int(text), int(text))

    def words(self) -> str:
        """The count in words: "duplicates", "writes refused + txn calls refused"."""
        return " + ".join(part.replace("_", " ") for part in self.field.split("+"))

    def label(self) -> str:
        """The count as the page names it: "Duplicates at at-least-once"."""
        return f"{self.words().capitalize()} at {self.level}"

    def describe(self) -> str:
        text = self.expect.strip()
        value = f"{text[:2]} {text[2:].strip()}" if text[0] in "<>" else f"= {text}"
        return f"{self.words()} {value} at {self.level}"


# The name the earlier format used for a step's single condition.
Check = Condition


class Option(BaseModel):
    """An answer the room can give, with the outcome it predicts (every condition holds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = Field(min_length=1)
    when: list[Condition] = Field(min_length=1)

    def holds(self, results: dict[str, Any]) -> bool | None:
        """Whether the run shows this outcome; None if the run lacks a count it names."""
        answers = [c.holds(results) for c in self.when]
        if False in answers:
            return False
        return None if None in answers else True

    def intervals(self) -> dict[tuple[str, str], Interval]:
        out: dict[tuple[str, str], Interval] = {}
        for c in self.when:
            key = (c.level, c.field)
            out[key] = out.get(key, Interval(0, math.inf)).meet(c.interval())
        return out

    def describe(self) -> str:
        return ", ".join(c.describe() for c in self.when)


def common_outcome(a: Option, b: Option) -> dict[tuple[str, str], int] | None:
    """Counts on which both options hold, or None when no outcome satisfies both.

    Conditions are intervals of whole counts, one per (level, count); two options share an
    outcome exactly when every count both constrain has a value both allow.
    """
    left, right = a.intervals(), b.intervals()
    witness: dict[tuple[str, str], int] = {}
    for key in left.keys() | right.keys():
        both = left.get(key, Interval(0, math.inf)).meet(right.get(key, Interval(0, math.inf)))
        if both.empty:
            return None
        witness[key] = both.lo
    return witness


def outcome_of(option: Option, base: dict[str, Any]) -> dict[str, Any]:
    """`base`'s results changed just enough for `option` to hold: the outcome it predicts."""
    out = {level: dict(counts) for level, counts in base.items()}
    for (level, name), interval in option.intervals().items():
        counts = out.setdefault(level, {})
        value = counts.get(name)
        if value is None or not interval.lo <= value <= interval.hi:
            counts[name] = interval.lo
    return out


def fill_counts(text: str, results: dict[str, Any]) -> str:
    """`text` with its `{level.field}` counts taken from the run."""

    def count(match: re.Match[str]) -> str:
        value = results.get(match[1], {}).get(match[2])
        return "n/a (not recorded in this run)" if value is None else str(value)

    return PLACEHOLDER.sub(count, text)


def check_placeholders(text: str, what: str) -> None:
    for level, name in PLACEHOLDER.findall(text):
        if name not in count_fields():
            raise ValueError(f"{what} cites '{{{level}.{name}}}', not a count")


class WhatIf(BaseModel):
    """The step run another way the scenario allows, beside the room's run: the contrast a
    class asks for ("and on the Java client?", "and a read_uncommitted reader?"). The page
    offers it after the verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = Field(min_length=1)  # "What if {label}?", e.g. "the producer were Java's"
    # What the what-if run changes, one or both: the producer's client (engine.model.java_client),
    # and the isolation.level every level's downstream consumer reads at (an application's
    # choice, Scenario.sink_isolation).
    client: Literal["librdkafka", "java"] | None = None
    sink_isolation: Literal["read_committed", "read_uncommitted"] | None = None
    # Its own explanation, `{level.field}` counts filled from the what-if run; unset, the
    # scenario's on_java note (what that file says the Java producer does).
    explain: str | None = None
    claims: list[Condition] = Field(default_factory=list)  # checked on the what-if run
    sources: list[Source] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cites_counts(self) -> WhatIf:
        if self.client is None and self.sink_isolation is None:
            raise ValueError("a what-if changes something: name its client or sink_isolation")
        if self.explain is None and self.client != "java":
            raise ValueError("a what-if other than the Java client's needs its own explain")
        check_placeholders(self.explain or "", "the what-if's explanation")
        return self

    def change(self, scenario: Scenario) -> Scenario:
        """`scenario` as the what-if runs it (ScenarioError if it cannot run so)."""
        if self.client is not None:
            scenario = with_client(scenario, self.client)
        if self.sink_isolation is not None:
            scenario = with_sink_isolation(scenario, self.sink_isolation)
        return scenario

    def contradicted(self, results: dict[str, Any]) -> list[Condition]:
        return [c for c in self.claims if c.holds(results) is not True]


@functools.cache
def _on_java_of(path: str, mtime_ns: int) -> OnJava | None:
    return load_scenario(path).on_java


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scenario: str
    minutes: int = 5
    question: str
    options: list[Option] = Field(min_length=2)
    # The option the scenario is built to show; the run still decides what happened.
    answer: str
    explain: str
    # What the explanation also says of the run beyond the answer (another level's count,
    # say): checked against each run before the explanation is shown as that run's.
    claims: list[Condition] = Field(default_factory=list)
    # Where the explanation's claims come from, shown as footnotes under it.
    sources: list[Source] = Field(default_factory=list)
    what_if: WhatIf | None = None

    @model_validator(mode="after")
    def _options_decide(self) -> Step:
        texts = [o.text for o in self.options]
        if len(set(texts)) != len(texts):
            raise ValueError(f"two options share a text: {texts}")
        if self.answer not in texts:
            raise ValueError(f"answer '{self.answer}' is not one of the options {texts}")
        if self.scenario not in list_scenarios():
            raise ValueError(f"no scenario file scenarios/{self.scenario}.yaml")
        for i, a in enumerate(self.options):
            for b in self.options[i + 1 :]:
                witness = common_outcome(a, b)
                if witness is not None:
                    shared = ", ".join(f"{f} = {v} at {lv}" for (lv, f), v in witness.items())
                    raise ValueError(
                        f"options '{a.text}' and '{b.text}' both hold when {shared}: "
                        "make their conditions exclusive"
                    )
        check_placeholders(self.explain, "the explanation")
        if self.what_if is not None:
            self.what_if_scenario()  # refused now, not in front of the room
        return self

    def what_if_scenario(self) -> Scenario:
        """The step's scenario as its what-if runs it; ValueError if it cannot run so."""
        assert self.what_if is not None
        try:
            scenario = load_scenario(list_scenarios()[self.scenario])
            changed = self.what_if.change(scenario)
        except LabError as exc:
            raise ValueError(f"the what-if cannot run: {exc}") from None
        if self.what_if.explain is None and scenario.on_java is None:
            raise ValueError(
                "the what-if has no explanation, and its scenario no on_java note to show"
            )
        return changed

    def what_if_note(self) -> OnJava | None:
        """The scenario file's on_java (its note and sources), which a what-if without its
        own explanation shows (the Java run's scenario no longer carries it). Read once per
        version of the file: every viewer's page asks for it."""
        path = list_scenarios()[self.scenario]
        return _on_java_of(str(path), path.stat().st_mtime_ns)

    def what_if_sources(self) -> list[Source]:
        """The what-if's own sources, or else its scenario's on_java sources."""
        assert self.what_if is not None
        if self.what_if.sources:
            return list(self.what_if.sources)
        note = self.what_if_note()
        return list(note.sources) if note is not None else []

    def what_if_explanation(self, results: dict[str, Any]) -> str:
        """The what-if's explanation, its counts from the what-if run."""
        assert self.what_if is not None
        note = self.what_if.explain
        if note is None:
            java = self.what_if_note()
            note = java.note if java is not None else ""
        return fill_counts(note, results)

    @property
    def expected(self) -> Option:
        return next(o for o in self.options if o.text == self.answer)

    def option(self, text: str | None) -> Option | None:
        return next((o for o in self.options if o.text == text), None)

    def outcome(self, results: dict[str, Any]) -> Option | None:
        """The option the run satisfies (the file guarantees at most one), or None."""
        return next((o for o in self.options if o.holds(results) is True), None)

    def contradicted(self, results: dict[str, Any]) -> list[Condition]:
        """The explanation's conditions (the answer's and its claims) this run breaks."""
        return [c for c in (*self.expected.when, *self.claims) if c.holds(results) is not True]

    def explanation(self, results: dict[str, Any]) -> str:
        """The explanation with its `{level.field}` counts taken from the run."""
        return fill_counts(self.explain, results)

    def cited(self) -> list[Condition]:
        """Every count the explanation cites, to show beside it."""
        return [
            Condition(level=level, field=name, expect=">=0")
            for level, name in dict.fromkeys(PLACEHOLDER.findall(self.explain))
        ]


class Lesson(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    title: str
    minutes: int = 45
    steps: list[Step]


@dataclass(frozen=True)
class Verdict:
    """The room's prediction against what the run showed."""

    guessed: str | None
    shown: Option | None  # the option the run satisfied
    expected: Option

    @property
    def room_right(self) -> bool:
        return self.shown is not None and self.guessed == self.shown.text

    @property
    def usual(self) -> bool:
        """Whether the run showed what the scenario is built to show."""
        return self.shown is not None and self.shown.text == self.expected.text

    def headline(self) -> str:
        if self.shown is None:
            return (
                "The run matches none of the options, so it cannot say who was right: "
                "its counts are below."
            )
        if self.room_right:
            return f"✅ The room was right: the run shows “{self.shown.text}”."
        said = f"“{self.guessed}”" if self.guessed else "nothing"
        return f"❌ The room said {said}; the run shows “{self.shown.text}”."


def judge_prediction(step: Step, guessed: str | None, results: dict[str, Any]) -> Verdict:
    return Verdict(guessed=guessed, shown=step.outcome(results), expected=step.expected)


@dataclass
class StepProgress:
    """One step of a lesson in front of a room: its prediction and every run of it."""

    vote: str | None = None
    locked: bool = False
    runs: list[str] = field(default_factory=list)
    what_ifs: dict[str, str] = field(default_factory=dict)  # run id -> its what-if's label

    @property
    def plain_runs(self) -> list[str]:
        """The runs of the step as the file has it (not its what-ifs), first to last."""
        return [r for r in self.runs if r not in self.what_ifs]


@dataclass
class LessonProgress:
    """Where a class is in a lesson. Kept outside any widget, so a trip to another page and
    back finds the same step, the room's predictions and the runs."""

    lesson: str
    step: int = 0
    steps: dict[int, StepProgress] = field(default_factory=dict)

    def at(self, index: int) -> StepProgress:
        return self.steps.setdefault(index, StepProgress())


def lessons_dir() -> Path:
    return paths.REPO_ROOT / "lessons"


def load_lesson(path: str | Path) -> Lesson:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
        return Lesson.model_validate(data)
    except FileNotFoundError:
        raise LessonError(f"{path}: no such lesson file.") from None
    except yaml.YAMLError as exc:
        raise LessonError(f"{path}: not valid YAML ({exc}).") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise LessonError(
            f"{path}: {where}: {error['msg'].removeprefix('Value error, ')}."
        ) from None


def list_lessons() -> dict[str, Path]:
    return {p.stem: p for p in sorted(lessons_dir().glob("*.yaml"))}
