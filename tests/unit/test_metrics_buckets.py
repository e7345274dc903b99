"""Throughput buckets sized to the run: the pure choice of width."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.metrics.buckets import MAX_BUCKETS, WIDTHS_S, bucket_width, width_sql


@pytest.mark.parametrize(
    ("duration_s", "width"),
    [(0.0, 0.01), (0.3, 0.01), (2.0, 0.05), (5.0, 0.1), (6.5, 0.2), (60.0, 1.0), (61.0, 2.0)],
)
def test_widths_for_typical_runs(duration_s, width):
    assert bucket_width(duration_s) == width


def test_a_two_second_run_gets_tens_of_buckets_not_two():
    width = bucket_width(2.0)
    assert 20 <= 2.0 / width <= MAX_BUCKETS


@given(st.floats(min_value=0.0, max_value=MAX_BUCKETS * WIDTHS_S[-1]))
def test_the_width_is_the_narrowest_that_fits(duration_s):
    width = bucket_width(duration_s)
    assert duration_s <= MAX_BUCKETS * width
    narrower = [w for w in WIDTHS_S if w < width]
    assert all(duration_s > MAX_BUCKETS * w for w in narrower)


def test_the_sql_lists_the_same_limits():
    sql = width_sql("d")
    for width in WIDTHS_S:
        assert f"WHEN d <= {MAX_BUCKETS * width!r}D THEN {width!r}D" in sql
