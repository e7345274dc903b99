"""The cost benchmark's tables, claims and perf-test parsing."""

from __future__ import annotations

import pytest

from engine.cost import published, report
from engine.cost.latency import LatencyRun, LatencyTrial
from engine.cost.throughput import ACKS1, BASELINE, BenchmarkError, Matrix, Trial, setups, txn_label
from engine.cost.yardsticks import (
    BARE,
    ENGINE_BATCH,
    YardstickRun,
    java_props,
    parse_perf_summary,
)
from engine.model.levels import LEVELS

PERF_OUTPUT = """\
16021 records sent, 3204.2 records/sec (3.13 MB/sec), 1489.4 ms avg latency, 2174.0 ms max latency.
50000 records sent, 7210.8 records/sec (7.04 MB/sec), 1842.79 ms avg latency, 2295.00 ms max \
latency, 1974 ms 50th, 2236 ms 95th, 2274 ms 99th, 2293 ms 99.9th.
"""


def matrix(rates: dict[str, list[float]], size: int = 1024) -> Matrix:
    trials = [
        Trial(label, size, r, f"t-{label}-{r}", 1000, 1000, 0, 1000 / rate)
        for label, by_round in rates.items()
        for r, rate in enumerate(by_round)
    ]
    return Matrix(trials, {"rounds": 2})


def test_setups_use_the_labs_own_level_settings():
    chosen = {s.label: s for s in setups()}
    assert chosen[BASELINE].config == LEVELS["at-least-once"].producer
    assert chosen[ACKS1].config == LEVELS["at-most-once"].producer
    assert chosen["at-most-once (acks=0)"].config["acks"] == "0"
    assert chosen["idempotent-only"].config == LEVELS["idempotent-only"].producer
    for ms in (10, 100, 1000):
        txn = chosen[txn_label(ms)]
        assert txn.transactional and txn.txn_ms == ms
        assert txn.config == LEVELS["exactly-once"].producer
    assert txn_label(1000) == "transactional (1 s)"


def test_throughput_rows_pair_overheads_by_round():
    m = matrix({BASELINE: [1000.0, 500.0], ACKS1: [1250.0, 625.0], txn_label(100): [970.0, 485.0]})
    rows = {r["setup"]: r for r in report.throughput_rows(m)}
    assert rows[txn_label(100)]["overhead vs at-least-once (%)"] == "+3.0 [+3.0–+3.0]"
    assert rows[txn_label(100)]["overhead vs acks=1 (%)"] == "+22.4 [+22.4–+22.4]"
    assert rows[BASELINE]["overhead vs at-least-once (%)"] == "–"
    assert rows[BASELINE]["msg/s, median [min–max]"] == "750 [500–1,000]"
    assert rows[BASELINE]["MiB/s"] == "1.0"


def test_claims_are_shown_beside_the_measurement_with_both_conditions():
    m = matrix({BASELINE: [1000.0], ACKS1: [1250.0], txn_label(100): [970.0]})
    lat = LatencyRun(
        [
            LatencyTrial(
                100,
                0,
                "t",
                3,
                {"read_committed": [60.0, 70.0, 80.0], "read_uncommitted": [5.0, 6.0, 7.0]},
            )
        ]
    )
    rows = report.claim_rows(m, lat)
    assert [r["claim"] for r in rows] == [c.what for c in published.CLAIMS]
    by_key = dict(zip([c.key for c in published.CLAIMS], rows, strict=True))
    assert by_key["eos_vs_alo"]["published"] == "about 3% lower"
    assert by_key["eos_vs_alo"]["measured here"] == "+3.0 %"
    assert by_key["eos_vs_amo"]["measured here"] == "+22.4 %"
    assert by_key["read_committed_delay"]["measured here"] == "64 ms"
    assert "100 ms" in by_key["eos_vs_alo"]["their conditions"]
    assert "1 KB" in by_key["eos_vs_alo"]["their conditions"]
    assert by_key["eos_vs_alo_course"]["source"] == published.COURSE_TXN
    # Without a run, the claims still show, and say nothing was measured.
    empty = report.claim_rows(None, None)
    assert all(r["measured here"] == "not measured in this run" for r in empty)


def test_latency_rows_and_delay():
    trials = [
        LatencyTrial(
            100,
            r,
            "t",
            4,
            {
                "read_committed": [50.0 + r, 60.0, 70.0, 200.0],
                "read_uncommitted": [5.0, 6.0, 8.0, 9.0],
            },
        )
        for r in range(3)
    ]
    run = LatencyRun(trials)
    rows = report.latency_rows(run)
    assert [(r["transaction"], r["isolation"]) for r in rows] == [
        ("100 ms", "read_uncommitted"),
        ("100 ms", "read_committed"),
    ]
    assert rows[1]["read_committed adds, p50 (ms)"] == "58 [58–58]"
    assert rows[1]["p99 (ms)"].startswith("196")  # the one slow message shows at the tail
    assert run.to_json()["trials"][0]["read_uncommitted p50"] == 7.0


def test_yardstick_rows_give_ratios_to_the_bare_loop():
    run = YardstickRun({BARE: [100.0, 200.0], ENGINE_BATCH: [85.0, 160.0]})
    rows = {r["producer"]: r for r in report.yardstick_rows(run)}
    assert rows[ENGINE_BATCH]["÷ bare loop"] == "0.82 [0.80–0.85]"
    assert rows[BARE]["÷ bare loop"] == "1.00 [1.00–1.00]"
    assert rows[BARE]["÷ perf-test"] == "–"


def test_markdown_table():
    text = report.markdown([{"a": 1, "b": "x|y"}, {"a": 2, "b": "z"}])
    assert text.splitlines() == ["| a | b |", "|---|---|", "| 1 | x\\|y |", "| 2 | z |"]
    assert report.markdown([]) == "(no rows)\n"


def test_perf_test_summary_is_the_final_line():
    assert parse_perf_summary(PERF_OUTPUT) == (50000, 7210.8)
    with pytest.raises(BenchmarkError, match="no summary line"):
        parse_perf_summary("Exception in thread main\n")


def test_java_props_spell_booleans_the_java_way():
    assert java_props({"acks": "all", "enable.idempotence": False, "retries": 3}) == [
        "acks=all",
        "enable.idempotence=false",
        "retries=3",
    ]


def test_each_published_figure_is_also_measured_against_its_own_baseline():
    from engine.cost.throughput import PUBLISHED_ALO, PUBLISHED_AMO, published_setups

    chosen = {s.label: s for s in published_setups()}
    in_order = chosen[PUBLISHED_ALO].config
    assert in_order["max.in.flight.requests.per.connection"] == 1
    assert in_order["acks"] == "all" and in_order["enable.idempotence"] is False
    assert chosen[PUBLISHED_AMO].config["acks"] == "1"
    assert chosen[PUBLISHED_AMO].config["max.in.flight.requests.per.connection"] == 5

    m = matrix(
        {
            BASELINE: [1000.0],
            ACKS1: [1250.0],
            PUBLISHED_ALO: [500.0],
            PUBLISHED_AMO: [1000.0],
            txn_label(100): [970.0],
        }
    )
    by_key = dict(zip([c.key for c in published.CLAIMS], report.claim_rows(m, None), strict=True))
    assert by_key["eos_vs_alo"]["measured here"] == "+3.0 %"
    assert by_key["eos_vs_alo"]["measured against their baseline"] == (
        f"-94.0 % (vs {PUBLISHED_ALO})"
    )
    assert by_key["eos_vs_amo"]["measured against their baseline"] == (
        f"+3.0 % (vs {PUBLISHED_AMO})"
    )
    assert by_key["read_committed_delay"]["measured against their baseline"] == "–"
    row = {r["setup"]: r for r in report.throughput_rows(m)}[txn_label(100)]
    assert row["overhead vs published at-least-once (%)"] == "-94.0"
    # A run without them (the quick run) has no such columns.
    quick = {BASELINE: [1000.0], ACKS1: [1250.0], txn_label(100): [970.0]}
    assert "overhead vs published at-least-once (%)" not in report.throughput_rows(matrix(quick))[0]
