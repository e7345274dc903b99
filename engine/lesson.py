"""Lesson files: a guided class through the scenarios (predict, run, explain).

A lesson lives in lessons/NAME.yaml. Each step names a scenario, asks the room a question
with options, names the expected answer, says which count of the real run confirms it, and
explains the evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import paths
from engine.errors import LabError
from engine.scenario import EXPECTATION, Source, list_scenarios, meets


class LessonError(LabError):
    pass


class Check(BaseModel):
    """The count of a run that confirms a step's answer: "3", ">=1" or "<=0", as in `expect`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: str
    field: str
    expect: str = Field(pattern=rf"^\s*{EXPECTATION}\s*$")

    def holds(self, results: dict[str, Any]) -> bool | None:
        """True or False against a run's results; None if the run lacks that level."""
        level = results.get(self.level)
        if level is None or self.field not in level:
            return None
        return meets(level[self.field], self.expect)

    def describe(self) -> str:
        text = self.expect.strip()
        return f"{self.field} {text if text[0] in '<>' else '= ' + text} at {self.level}"


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scenario: str
    minutes: int = 5
    question: str
    options: list[str]
    answer: str
    check: Check
    explain: str
    # Where the explanation's claims come from, shown as footnotes under it.
    sources: list[Source] = Field(default_factory=list)

    @model_validator(mode="after")
    def _answer_is_an_option(self) -> Step:
        if self.answer not in self.options:
            raise ValueError(f"answer '{self.answer}' is not one of the options {self.options}")
        if self.scenario not in list_scenarios():
            raise ValueError(f"no scenario file scenarios/{self.scenario}.yaml")
        return self


class Lesson(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    title: str
    minutes: int = 45
    steps: list[Step]


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
