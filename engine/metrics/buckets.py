"""The width of throughput-over-time buckets, chosen from how long a level ran.

A 20-message run that lasts 2 s drawn in 1-second bars is one bar; a minute drawn in 10 ms
bars is noise. `bucket_width` picks the narrowest round width that keeps a level's window
within `MAX_BUCKETS` buckets (100 ms for 2 s, 1 s for a minute). Spark's job and the test
reference both call it, and Spark's SQL uses `width_sql`, built from the same table, so all
three agree to the bit.
"""

from __future__ import annotations

# Round widths, in seconds, narrowest first.
WIDTHS_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)
MAX_BUCKETS = 60


def bucket_width(duration_s: float) -> float:
    """The narrowest width of WIDTHS_S with at most MAX_BUCKETS buckets over `duration_s`."""
    for width in WIDTHS_S:
        if duration_s <= MAX_BUCKETS * width:
            return width
    return WIDTHS_S[-1]


def width_sql(duration: str) -> str:
    """`bucket_width` as a Spark SQL expression over the DOUBLE column or expression `duration`.

    The limits are written as the very doubles that Python computes (repr round-trips), so
    the comparison is the same in both.
    """
    cases = " ".join(
        f"WHEN {duration} <= {MAX_BUCKETS * width!r}D THEN {width!r}D" for width in WIDTHS_S
    )
    return f"(CASE {cases} ELSE {WIDTHS_S[-1]!r}D END)"
