"""Medians, spreads and overheads of repeated trials, and the order the trials run in."""

from __future__ import annotations

import itertools
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


def spread_pct(values: Sequence[float]) -> float:
    """The farthest value from the median, in percent of the median: the "±" of min–max."""
    middle = statistics.median(values)
    if middle <= 0:
        raise ValueError("the median must be positive")
    return max(max(values) - middle, middle - min(values)) / middle * 100.0


NOISE_LIMIT_PCT = 15.0  # beyond this, a quick run's differences are not shown as findings


@dataclass(frozen=True)
class Flip:
    """A round that ranks two setups the other way round from their medians."""

    faster: str  # by median
    slower: str
    round: int


@dataclass(frozen=True)
class Steadiness:
    """Whether a run's rounds agree well enough to compare its setups."""

    spreads: dict[str, float]  # setup -> ±% over the rounds
    flips: tuple[Flip, ...]  # rounds that contradict a difference the medians claim
    limit: float

    @property
    def widest(self) -> tuple[str, float]:
        return max(self.spreads.items(), key=lambda item: item[1])

    @property
    def comparable(self) -> bool:
        return self.widest[1] <= self.limit and not self.flips


def steadiness(rates: dict[str, Sequence[float]], limit: float = NOISE_LIMIT_PCT) -> Steadiness:
    """Judge a run from its measured rates (setup -> one rate per round, in round order).

    A setup's spread is `spread_pct` of its rounds. Two setups whose medians differ by more
    than `limit` percent are a claimed difference; a round in which the slower one was at
    least as fast contradicts it. Setups closer than that are a tie, whatever their order.
    """
    if not rates or any(len(v) == 0 for v in rates.values()):
        raise ValueError("need at least one round of every setup")
    if len({len(v) for v in rates.values()}) != 1:
        raise ValueError("need the same number of rounds for every setup")
    medians = {label: statistics.median(v) for label, v in rates.items()}
    flips = []
    for faster, slower in itertools.permutations(rates, 2):
        if overhead_pct(medians[faster], medians[slower]) <= limit:
            continue
        for index, (f, s) in enumerate(zip(rates[faster], rates[slower], strict=True)):
            if s >= f:
                flips.append(Flip(faster, slower, index))
    return Steadiness({k: spread_pct(v) for k, v in rates.items()}, tuple(flips), limit)
