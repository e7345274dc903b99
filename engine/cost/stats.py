"""Medians, spreads and overheads of repeated trials, and the order the trials run in."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """The median of repeated measurements and their spread."""

    median: float
    low: float
    high: float
    n: int

    def text(self, fmt: str = "{:,.0f}") -> str:
        """`median [low–high]`, or just the median for a single value."""
        if self.n <= 1:
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} [{fmt.format(self.low)}–{fmt.format(self.high)}]"


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarize")
    return Summary(statistics.median(values), min(values), max(values), len(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    below = int(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


def overhead_pct(base: float, other: float) -> float:
    """How much slower `other` is than `base`, in percent of `base` (negative: faster)."""
    if base <= 0:
        raise ValueError("the base rate must be positive")
    return (1.0 - other / base) * 100.0


def paired_overhead(base: Sequence[float], other: Sequence[float]) -> Summary:
    """Overhead of `other` against `base`, round by round.

    Both lists are indexed by round. Trials of one round ran back to back, so comparing within
    a round cancels the drift between rounds (another job starting, the page cache filling).
    """
    if len(base) != len(other) or not base:
        raise ValueError("need the same, non-zero number of rounds for both")
    return summarize([overhead_pct(b, o) for b, o in zip(base, other, strict=True)])


def paired_ratio(base: Sequence[float], other: Sequence[float]) -> Summary:
    """`other / base` round by round (1.0: as fast)."""
    if len(base) != len(other) or not base:
        raise ValueError("need the same, non-zero number of rounds for both")
    return summarize([o / b for b, o in zip(base, other, strict=True)])


def schedule(labels: Sequence[str], rounds: int, seed: int = 0) -> list[tuple[int, str]]:
    """(round, label) pairs: every label once per round, in a new shuffled order each round.

    Shuffling (seeded, so a run can be repeated) keeps any one setup from always running
    first, right after a topic was created, or last, when the page cache is fullest.
    """
    rng = random.Random(seed)
    order: list[tuple[int, str]] = []
    for index in range(rounds):
        labels_now = list(labels)
        rng.shuffle(labels_now)
        order += [(index, label) for label in labels_now]
    return order
