"""The finished run's evidence (pages/_run_view.py): where it opens and what it marks."""

from __future__ import annotations

import pandas as pd

from pages._run_view import (
    anomaly_label,
    anomaly_marks,
    default_verdicts,
    failing_level,
    id_runs,
    readable_verdicts,
    timeline_figure,
)

CLEAN = {"duplicates": 0, "lost": 0, "reordered": 0, "aborted_visible": 0}


def test_the_level_to_inspect_is_the_first_where_the_failure_shows():
    results = {"at-most-once": CLEAN, "at-least-once": {**CLEAN, "duplicates": 5}}
    assert failing_level(results) == 1
    assert failing_level({"a": CLEAN, "b": {**CLEAN, "aborted_visible": 1}}) == 1
    assert failing_level({"a": CLEAN, "b": CLEAN}) == 0


def test_the_verdict_table_opens_on_the_anomalies_when_there_are_any():
    assert default_verdicts(["delivered once", "duplicated", "lost"]) == ["duplicated", "lost"]
    assert default_verdicts(["delivered once"]) == ["delivered once"]


def test_verdict_times_are_seconds_since_the_level_started():
    rows = pd.DataFrame(
        [
            {
                "id": 1,
                "verdict": "lost",
                "copies": 0,
                "offsets": [],
                "ack": "acked",
                "sent_at": 1000.25,
                "acked_at": 1000.5,
                "consumed_at": None,
                "latency_ms": None,
                "reordered": False,
                "aborted_copies": 0,
            }
        ]
    )
    table = readable_verdicts(rows, {"started_at": 1000.0})
    assert table.loc[0, "sent (s)"] == 0.25
    assert table.loc[0, "acked (s)"] == 0.5
    assert pd.isna(table.loc[0, "first seen (s)"])
    assert "sent_at" not in table.columns


def history() -> list[dict]:
    """A processor killed after writing ids 5-6; its replacement writes them again; 7 lost."""
    return [
        {"t": 10.0, "proc": "source", "ev": "ack", "id": 5, "partition": 0, "offset": 0},
        {
            "t": 11.0,
            "proc": "processor",
            "ev": "output_acked",
            "id": 5,
            "partition": 0,
            "offset": 5,
        },
        {
            "t": 11.1,
            "proc": "processor",
            "ev": "output_acked",
            "id": 6,
            "partition": 0,
            "offset": 6,
        },
        {"t": 11.2, "proc": "processor", "ev": "consumed", "id": 7, "partition": 0, "offset": 7},
        {
            "t": 12.0,
            "proc": "processor#2",
            "ev": "output_acked",
            "id": 5,
            "partition": 0,
            "offset": 9,
        },
        {
            "t": 12.1,
            "proc": "processor#2",
            "ev": "output_acked",
            "id": 6,
            "partition": 0,
            "offset": 10,
        },
        {"t": 12.5, "proc": "sink", "ev": "consumed", "id": 6, "partition": 0, "offset": 10},
    ]


VERDICTS = [
    {"id": 5, "verdict": "duplicated", "copies": 2, "offsets": ["0:5", "0:9"]},
    {"id": 6, "verdict": "duplicated", "copies": 2, "offsets": ["0:6", "0:10"]},
    {"id": 7, "verdict": "lost", "copies": 0, "offsets": []},
]


def test_a_duplicate_is_marked_when_its_extra_copy_was_written_and_a_lost_id_where_it_ended():
    marks = anomaly_marks(history(), VERDICTS, start=10.0)
    rounded = {k: [(round(t, 3), i, c) for t, i, c in rows] for k, rows in marks.items()}
    assert rounded["duplicated"] == [(2.0, 5, 2), (2.1, 6, 2)]  # the replacement's writes
    assert rounded["lost"] == [(1.2, 7, 0)]  # read by the processor, then nothing
    assert [anomaly_label(g) for g in id_runs(marks["duplicated"])] == ["copy 2 of ids 5–6"]
    assert anomaly_label(marks["lost"]) == "lost id 7"


def test_batches_are_labelled_once_per_copy_and_run_of_ids():
    rows = [(1.0, 0, 2), (1.0, 1, 2), (2.0, 0, 3), (2.0, 1, 3), (1.0, 5, 2)]
    assert [anomaly_label(g) for g in id_runs(rows)] == [
        "copy 2 of ids 0–1",
        "copy 2 of id 5",
        "copy 3 of ids 0–1",
    ]


def test_the_timeline_tells_instances_apart_and_keeps_fault_labels_apart():
    result = {
        "started_at": 10.0,
        "faults": [
            {"t": 11.15, "kind": "crash", "target": "processor", "point": "after commit_gap #2"},
            {"t": 11.16, "kind": "kill-leader", "node": 1},
        ],
    }
    figure = timeline_figure(history(), result, VERDICTS)
    names = {trace.name: trace for trace in figure.data}
    assert "output written by processor" in names
    assert "output written by processor#2" in names
    first, second = names["output written by processor"], names["output written by processor#2"]
    assert first.marker.color != second.marker.color
    assert all(trace.marker.size >= 10 for trace in figure.data)
    labels = {a.text: a.y for a in figure.layout.annotations if a.yref and "domain" in a.yref}
    assert (
        labels["processor killed (SIGKILL) after commit_gap #2"]
        != labels["broker node 1 killed (the leader)"]
    )
    assert figure.layout.xaxis.tickfont.size >= 16
