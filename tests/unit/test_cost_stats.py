"""The statistics behind the cost benchmark: medians, spreads, paired overheads, the order."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cost.stats import (
    Summary,
    overhead_pct,
    paired_overhead,
    paired_ratio,
    percentile,
    schedule,
    spread_pct,
    steadiness,
    summarize,
)


def test_summary_is_median_min_max():
    s = summarize([5.0, 1.0, 3.0, 100.0])
    assert (s.median, s.low, s.high, s.n) == (4.0, 1.0, 100.0, 4)
    assert s.text("{:.0f}") == "4 [1–100]"
    assert Summary(7.0, 7.0, 7.0, 1).text("{:.1f}") == "7.0"


def test_summarize_refuses_nothing():
    with pytest.raises(ValueError):
        summarize([])


def test_percentile_interpolates_between_ranks():
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 0) == 1
    assert percentile(values, 100) == 100
    assert percentile([3.0], 99) == 3.0


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_lies_within_the_values(values, q):
    assert min(values) <= percentile(values, q) <= max(values)


def test_overhead_is_the_share_of_the_base_lost():
    assert overhead_pct(100.0, 97.0) == pytest.approx(3.0)
    assert overhead_pct(100.0, 120.0) == pytest.approx(-20.0)
    with pytest.raises(ValueError):
        overhead_pct(0.0, 1.0)


def test_paired_overhead_cancels_drift_between_rounds():
    # The machine slows down from round to round; the setup is always 10% behind its base.
    base = [100.0, 50.0, 25.0]
    other = [90.0, 45.0, 22.5]
    paired = paired_overhead(base, other)
    assert paired.median == pytest.approx(10.0)
    assert paired.high - paired.low == pytest.approx(0.0)
    # Comparing the medians alone would blur it less here, but the spread would be lost.
    assert paired_ratio(base, other).median == pytest.approx(0.9)
    with pytest.raises(ValueError):
        paired_overhead([1.0], [1.0, 2.0])


@given(st.lists(st.text(min_size=1), min_size=1, max_size=8, unique=True), st.integers(1, 6))
def test_schedule_runs_every_label_once_per_round(labels, rounds):
    order = schedule(labels, rounds, seed=3)
    assert len(order) == len(labels) * rounds
    assert Counter(label for _, label in order) == dict.fromkeys(labels, rounds)
    for r in range(rounds):
        chunk = order[r * len(labels) : (r + 1) * len(labels)]
        assert {rnd for rnd, _ in chunk} == {r}
        assert sorted(label for _, label in chunk) == sorted(labels)


def test_schedule_changes_the_order_between_rounds_and_is_repeatable():
    labels = [f"s{i}" for i in range(7)]
    order = schedule(labels, 5, seed=0)
    firsts = {label for r, label in order if order.index((r, label)) % 7 == 0}
    assert len(firsts) > 1, "the same setup should not always run first"
    assert schedule(labels, 5, seed=0) == order


def test_spread_is_the_farthest_round_from_the_median():
    assert spread_pct([90.0, 100.0, 130.0]) == pytest.approx(30.0)
    assert spread_pct([80.0, 100.0, 105.0]) == pytest.approx(20.0)
    assert spread_pct([100.0]) == 0.0


def test_a_steady_run_is_comparable_and_ties_are_not_contradictions():
    judged = steadiness(
        {
            "acks=1": [100.0, 104.0, 98.0],
            "acks=all": [103.0, 99.0, 101.0],  # within 15% of acks=1: a tie, either order
            "transactional": [60.0, 62.0, 58.0],
        }
    )
    assert judged.comparable
    assert judged.flips == ()
    assert judged.widest == ("acks=1", pytest.approx(4.0))


def test_a_wide_spread_makes_the_run_too_noisy():
    judged = steadiness({"a": [100.0, 150.0, 90.0], "b": [50.0, 52.0, 51.0]})
    assert not judged.comparable
    assert judged.widest == ("a", pytest.approx(50.0))
    assert judged.flips == ()


def test_a_round_against_the_medians_order_is_a_flip():
    # Every spread is within 15%, but round 2 ranks b above a although b's median is 20% lower.
    judged = steadiness({"a": [100.0, 100.0, 88.0], "b": [80.0, 80.0, 90.0]})
    assert judged.widest[1] <= 15.0
    assert [(f.faster, f.slower, f.round) for f in judged.flips] == [("a", "b", 2)]
    assert not judged.comparable


def test_steadiness_needs_the_same_rounds_for_every_setup():
    with pytest.raises(ValueError):
        steadiness({"a": [1.0, 2.0], "b": [1.0]})
    with pytest.raises(ValueError):
        steadiness({})
