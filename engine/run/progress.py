"""What a run is doing, as run_scenario reports it: typed, so that no reader parses words.

The command line prints a step as its words ("At least once: running"); the pages read its
fields (which level, which step) to draw each lane and to start Spark's queries once every
level has made its topics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.model.levels import LEVELS

CREATING_TOPICS = "creating topics"  # a level's first step; its topics exist after it


@dataclass(frozen=True)
class Step:
    """One step of a run: `what` a level (by its name in engine.model.levels) is doing, or, with
    no level, what the run as a whole is doing ("done")."""

    what: str
    level: str | None = None

    def __str__(self) -> str:
        return f"{LEVELS[self.level].title}: {self.what}" if self.level else self.what


# run_scenario's callback: the step, and the fraction of the run done.
Progress = Callable[[Step, float], None]
