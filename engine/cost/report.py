"""Tables of the measurements, next to the published claims, for the README and the page.

Every table is a list of rows (dicts with the same keys, in column order), which the page
shows with st.dataframe and `markdown` turns into a Markdown table for benchmarks/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.cost import published
from engine.cost.latency import LatencyRun
from engine.cost.stats import Steadiness, Summary, steadiness
from engine.cost.throughput import (
    ACKS1,
    BASELINE,
    PUBLISHED_ALO,
    PUBLISHED_AMO,
    Matrix,
    txn_label,
)
from engine.cost.yardsticks import (
    BARE,
    BARE_PROXY,
    ENGINE_BATCH,
    ENGINE_EACH,
    PERF_TEST,
    PERF_TEST_BIG,
    YardstickRun,
)

Row = dict[str, Any]

PCT = "{:+.1f}"  # overheads: "+3.0" means 3% slower than the base
RATE = "{:,.0f}"


def size_text(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def throughput_rows(matrix: Matrix) -> list[Row]:
    rows = []
    for size in matrix.sizes:
        for setup in matrix.setups:
            rates = matrix.summary(setup, size)
            mib = [r * size / (1024 * 1024) for r in matrix.rates(setup, size)]
            row: Row = {
                "size": size_text(size),
                "setup": setup,
                "msg/s, median [min–max]": rates.text(RATE),
                "MiB/s": f"{sorted(mib)[len(mib) // 2]:.1f}",
            }
            for base, column in (
                (BASELINE, "vs at-least-once"),
                (ACKS1, "vs acks=1"),
                (PUBLISHED_ALO, "vs published at-least-once"),
                (PUBLISHED_AMO, "vs published at-most-once"),
            ):
                if base in (PUBLISHED_ALO, PUBLISHED_AMO) and base not in matrix.setups:
                    continue  # measured only by the full and the published-baselines runs
                has_base = base in matrix.setups
                row[f"overhead {column} (%)"] = (
                    matrix.overhead(setup, size, base).text(PCT)
                    if has_base and setup != base
                    else "–"
                )
            rows.append(row)
    return rows


def quick_steadiness(matrix: Matrix, size: int = 1024) -> Steadiness:
    """How well the rounds of a run agree at one message size (see `stats.steadiness`)."""
    return steadiness({label: matrix.rates(label, size) for label in matrix.setups})


def steadiness_text(judged: Steadiness) -> str:
    """One plain sentence: can the room compare these setups, and if not, why not."""
    setup, widest = judged.widest
    if judged.comparable:
        return (
            f"The rounds agree: every setup's spread is within ±{widest:.0f}% (widest: {setup}), "
            f"and every round ranks setups whose medians differ by more than {judged.limit:.0f}% "
            "the same way; setups closer than that are level within the noise."
        )
    text = f"This quick run is too noisy to compare: spreads up to ±{widest:.0f}% ({setup})"
    if judged.flips:
        flip = judged.flips[0]
        text += (
            f", and {len(judged.flips)} time(s) a round ranked two setups against their medians "
            f"(round {flip.round + 1}: {flip.slower} at least as fast as {flip.faster})"
        )
    return text + "."


def _measured(summary: Summary | None, unit: str) -> str:
    if summary is None:
        return "not measured in this run"
    return f"{summary.text(PCT if unit == '%' else '{:.0f}')} {unit}".strip()


def claim_rows(matrix: Matrix | None, latency: LatencyRun | None) -> list[Row]:
    """Each published claim beside what this cluster measured under the closest conditions."""

    def overhead(base: str) -> Summary | None:
        label = txn_label(100)
        if matrix is None or 1024 not in matrix.sizes:
            return None
        if label not in matrix.setups or base not in matrix.setups:
            return None
        return matrix.overhead(label, 1024, base)

    delay = None
    if latency is not None and 100 in latency.txn_lengths():
        delay = latency.delay(100, 50)
    measured = {
        "eos_vs_alo": (overhead(BASELINE), "%"),
        "eos_vs_amo": (overhead(ACKS1), "%"),
        "eos_vs_alo_course": (overhead(BASELINE), "%"),
        "read_committed_delay": (delay, "ms"),
    }
    # The same figure against the baseline the publication measured it against, where known.
    theirs = {"eos_vs_alo": PUBLISHED_ALO, "eos_vs_amo": PUBLISHED_AMO}
    ours = {
        "eos_vs_alo": "1 KB, 100 ms transactions vs the lab's at-least-once",
        "eos_vs_amo": "1 KB, 100 ms transactions vs the lab's at-most-once (acks=1)",
        "eos_vs_alo_course": "producer only (no Kafka Streams), 1 KB, 100 ms transactions",
        "read_committed_delay": "median extra latency, 100 ms transactions, 1000 msg/s",
    }
    rows = []
    for item in published.CLAIMS:
        summary, unit = measured[item.key]
        rows.append(
            {
                "claim": item.what,
                "published": item.figure,
                "their conditions": item.conditions,
                "source": item.source,
                "measured here": _measured(summary, unit),
                "our conditions": ours[item.key],
                "measured against their baseline": (
                    f"{_measured(overhead(theirs[item.key]), unit)} (vs {theirs[item.key]})"
                    if item.key in theirs
                    else "–"
                ),
            }
        )
    return rows


def latency_rows(run: LatencyRun) -> list[Row]:
    rows = []
    for txn_ms in run.txn_lengths():
        for iso in ("read_uncommitted", "read_committed"):
            row: Row = {"transaction": txn_label(txn_ms).split("(")[1][:-1], "isolation": iso}
            for q in (50, 95, 99):
                row[f"p{q} (ms)"] = run.summary(txn_ms, iso, q).text("{:.0f}")
            row["read_committed adds, p50 (ms)"] = (
                run.delay(txn_ms, 50).text("{:.0f}") if iso == "read_committed" else "–"
            )
            rows.append(row)
    return rows


YARDSTICK_NOTES = {
    BARE: "plain produce/poll loop, in the benchmark process",
    BARE_PROXY: "the same loop, bootstrapped through the fault proxy",
    ENGINE_BATCH: "engine.roles.producer as its own process, batch mode",
    ENGINE_EACH: "the same role in scenario mode: flush after every message",
    PERF_TEST: "Kafka's ProducerPerformance, Java client defaults (16 KiB batches)",
    PERF_TEST_BIG: "ProducerPerformance with batch.size=1000000 (librdkafka's default)",
}


def yardstick_rows(run: YardstickRun) -> list[Row]:
    rows = []
    for contender in run.rates:
        row: Row = {
            "producer": contender,
            "what": YARDSTICK_NOTES.get(contender, ""),
            "msg/s, median [min–max]": run.summary(contender).text(RATE),
        }
        row["÷ bare loop"] = run.ratio(contender, BARE).text("{:.2f}") if BARE in run.rates else "–"
        big = PERF_TEST_BIG if PERF_TEST_BIG in run.rates else PERF_TEST
        row["÷ perf-test"] = run.ratio(contender, big).text("{:.2f}") if big in run.rates else "–"
        rows.append(row)
    return rows


def markdown(rows: Sequence[Row]) -> str:
    if not rows:
        return "(no rows)\n"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [str(row.get(c, "")).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
