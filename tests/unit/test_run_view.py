"""The finished run's evidence (pages/_run_view.py): where it opens and what it marks."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from engine.face import LevelResult
from pages._presenter import ROOM_PX, room_sized
from pages._run_view import (
    LABEL_ROW_PX,
    PLOT_WIDTH_PX,
    anomaly_label,
    anomaly_marks,
    default_verdicts,
    failing_level,
    fault_bands,
    fold_bands,
    id_runs,
    label_width_px,
    readable_verdicts,
    timeline,
    timeline_figure,
    verdicts_in_words,
)

CLEAN = {"duplicates": 0, "lost": 0, "reordered": 0, "aborted_visible": 0}
# The counts every result.json holds, for a result made up here.
REQUIRED = {**CLEAN, "sent": 0, "acked": 0, "delivered": 0, "latency_ms": {}}


def judged(data: dict[str, Any], level: str = "at-least-once") -> LevelResult:
    """A level's result as a run's result.json would hold `data` (its other counts 0), read
    back into its type as the pages get it (RecordedRun.levels_judged)."""
    return LevelResult.from_json(level, {**REQUIRED, **data})


def test_the_level_to_inspect_is_the_first_where_the_failure_shows():
    results = {"at-most-once": judged(CLEAN), "at-least-once": judged({"duplicates": 5})}
    assert failing_level(results) == 1
    assert failing_level({"a": judged(CLEAN), "b": judged({"aborted_visible": 1})}) == 1
    assert failing_level({"a": judged(CLEAN), "b": judged(CLEAN)}) == 0


def test_spark_levels_open_on_the_same_failing_level_from_their_json():
    from pages._metrics_view import failing_level as spark_failing_level

    spark = {"a": {**CLEAN, "messages": 10}, "b": {**CLEAN, "lost": 2}, "c": {"lost": None}}
    assert spark_failing_level(spark) == 1
    assert spark_failing_level({"a": {}, "b": {"reordered": 0}}) == 0


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
    table = readable_verdicts(rows, 1000.0)
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
    crash = {"t": 11.15, "kind": "crash", "target": "processor", "point": "after commit_gap #2"}
    kill = {"t": 11.16, "kind": "kill-leader", "node": 1}
    result = judged({"started_at": 10.0, "faults": [crash, kill]})
    figure = timeline_figure(history(), result, VERDICTS)
    names = {trace.name: trace for trace in figure.data}
    assert "output written by processor" in names
    assert "output written by processor 2" in names  # the replacement, not the lab's processor#2
    first, second = names["output written by processor"], names["output written by processor 2"]
    assert first.marker.color != second.marker.color
    assert all(trace.marker.size >= 10 for trace in figure.data)
    labels = {
        re.sub(r" <span.*", "", a.text): a.yshift
        for a in figure.layout.annotations
        if a.yref and "domain" in a.yref
    }
    assert (
        labels["processor killed (SIGKILL) mid-batch 2"]
        != labels["broker node 1 killed (the leader)"]
    )
    assert figure.layout.xaxis.tickfont.size >= 16


def label_boxes(
    figure, width_px: float = PLOT_WIDTH_PX, type_px: int = 16
) -> list[tuple[float, float, float]]:
    """(left, right, row) of each fault label on screen, in pixels, from the figure itself."""
    lo, hi = figure.layout.xaxis.range
    boxes = []
    for a in figure.layout.annotations:
        if not (a.yref and "domain" in a.yref):
            continue
        width = label_width_px(a.text, type_px)
        x = (a.x - lo) / (hi - lo) * width_px
        left = x if a.xanchor == "left" else x - width
        assert left >= -1 and left + width <= width_px + 1, a.text  # inside the chart
        boxes.append((left, left + width, a.yshift))
    return boxes


def overlaps(boxes: list[tuple[float, float, float]]) -> int:
    return sum(
        1
        for i, (a0, a1, ay) in enumerate(boxes)
        for b0, b1, by in boxes[i + 1 :]
        if ay == by and a0 < b1 and b0 < a1
    )


def isr_shrink_like_result(start: float = 100.0) -> LevelResult:
    """The busiest timeline: a follower frozen, the ISR shrinks, and the producer's writes are
    refused sixty times (NOT_ENOUGH_REPLICAS) before the follower is back; then a leader kill."""
    faults = [
        {"t": start + 1.0, "kind": "pause-follower", "node": 2, "leader": 1},
        {"t": start + 7.0, "kind": "isr", "isr": [1], "leader": 1, "high_watermark": 40},
    ]
    faults += [
        {
            "t": start + 7.2 + i * 0.1,
            "kind": "produce_error",
            "source": "proxy",
            "node": 1,
            "error": "NOT_ENOUGH_REPLICAS",
            "correlation_id": 100 + i,
        }
        for i in range(60)
    ]
    faults += [
        {"t": start + 13.5, "kind": "resume-nodes", "nodes": [2]},
        {"t": start + 15.0, "kind": "isr", "isr": [1, 2], "leader": 1, "high_watermark": 41},
        {"t": start + 16.0, "kind": "kill-leader", "node": 1},
        {"t": start + 16.05, "kind": "node-stopped", "node": 1},
    ]
    return judged({"started_at": start, "faults": faults})


def test_sixty_refused_writes_fold_into_one_band_and_no_label_overlaps_another():
    result = isr_shrink_like_result()
    events = [
        {"t": 100.0 + i * 0.25, "proc": "producer", "ev": ev, "id": i}
        for i in range(80)
        for ev in ("send", "ack")
    ]
    figure, unlabelled = timeline(events, result, [])
    texts = [a.text for a in figure.layout.annotations if a.yref and "domain" in a.yref]
    refused = [t for t in texts if "refused" in t]
    assert len(refused) == 1 and "×60" in refused[0], texts
    assert "NOT_ENOUGH_REPLICAS" in refused[0]  # the raw name, in small type
    assert "too few in-sync replicas" in refused[0]
    assert overlaps(label_boxes(figure)) == 0
    # Every fault is said: on the chart, or in the line below it.
    assert len(texts) + len(unlabelled) == len(fold_bands(fault_bands(result.faults, 100.0)))
    assert not any("[" in t or "None" in t for t in texts)  # no raw lists, no None
    # The labels sit above the data: the plot area starts below the rows they use.
    assert figure.layout.margin.t >= 20 + LABEL_ROW_PX


def test_labels_that_cannot_fit_are_left_for_the_line_below_not_drawn_over_each_other():
    crowded = judged(
        {
            "started_at": 0.0,
            "faults": [
                {"t": 1.0 + i * 0.01, "kind": "kill-node", "node": i, "leader": 9}
                for i in range(12)
            ],
        }
    )
    figure, unlabelled = timeline([], crowded, [])
    assert overlaps(label_boxes(figure)) == 0
    assert unlabelled  # twelve long labels in 0.1 s: some are said below the chart


def test_the_verdict_table_shows_no_none_cell():
    rows = pd.DataFrame(
        [
            {
                "id": 7,
                "verdict": "lost",
                "copies": 0,
                "offsets": [],
                "ack": "unacked",
                "sent_at": 1000.25,
                "acked_at": None,
                "consumed_at": None,
                "latency_ms": None,
                "reordered": False,
                "aborted_copies": 0,
            },
            {
                "id": 8,
                "verdict": "duplicated",
                "copies": 2,
                "offsets": ["0:6", "0:10"],
                "ack": "acked",
                "sent_at": 1000.5,
                "acked_at": 1000.75,
                "consumed_at": 1001.0,
                "latency_ms": 500.4,
                "reordered": True,
                "aborted_copies": 0,
            },
        ]
    )
    shown = verdicts_in_words(readable_verdicts(rows, 1000.0))
    cells = [str(v) for v in shown.to_numpy().ravel()]
    assert not any(c in ("None", "nan", "NaN", "<NA>", "[]") for c in cells), cells
    lost, duplicated = shown.to_dict("records")
    assert (lost["acked (s)"], lost["first seen (s)"], lost["ack"]) == (
        "not acked",
        "never seen",
        "no answer",
    )
    assert lost["offsets"] == "—" and duplicated["offsets"] == "0:6, 0:10"
    assert duplicated["sent (s)"] == "0.500" and duplicated["latency (ms)"] == "500"
    assert "latency_ms" not in shown.columns and "aborted_copies" not in shown.columns


def evidence_page(presenter: bool) -> None:
    from pages._run_view import render_evidence_line

    render_evidence_line(
        "While node 1 was down, its copy of lab.20261126-003816-x-12dc.at-least-once.in-0 was "
        "deleted.",
        presenter=presenter,
    )
    render_evidence_line(
        "Node 2 logged: [2026-11-26 00:35:40,873] INFO UNCLEAN partition change for "
        "lab.20261126-003422-x-17dc.at-least-once.in-0: isr: [] -> [1]",
        presenter=presenter,
    )


def test_a_quoted_log_line_stays_verbatim_and_the_projector_names_no_topic():
    from streamlit.testing.v1 import AppTest

    normal = AppTest.from_function(evidence_page, kwargs={"presenter": False}).run()
    projector = AppTest.from_function(evidence_page, kwargs={"presenter": True}).run()
    # Kafka's own line in a code block, its lists as Kafka wrote them (not "nodes ...").
    assert normal.code[0].value.endswith("isr: [] -> [1]")
    assert normal.markdown[1].value == "- Node 2 logged:"
    assert "lab.20261126-003422-x-17dc.at-least-once.in-0" in normal.code[0].value
    # The contrast: on the projector, no topic name, in the sentence or in the quote.
    shown = " ".join([m.value for m in projector.markdown] + [c.value for c in projector.code])
    assert "lab.2026" not in shown
    assert "its copy of the level's topic was deleted" in shown


# The words a card's sentence (explain.headline) uses for each count it may cite.
CITED_WORDS = {
    "duplicate": "duplicates",
    " lost": "lost",
    "out of order": "reordered",
    "aborted record": "aborted_visible",
    "never sent": "never_sent",
    "not processed yet": "not_processed",
    "zombie write": "writes_refused",
    "transaction call": "txn_calls_refused",
    "consumer group refused": "commits_refused",
}


def recorded_level_results() -> list[tuple[str, str, dict]]:
    """Every level of every recorded real run, as the run's result.json holds it."""
    import json
    import tarfile
    from pathlib import Path

    out = []
    for archive in sorted((Path(__file__).parents[1] / "data/recorded/runs").glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/result.json"))
            results = json.load(tar.extractfile(member))["results"]
        out += [(archive.name.split(".")[0], level, r) for level, r in results.items()]
    return out


def test_a_card_shows_every_count_its_sentence_cites():
    from engine.scenarios.scenario import list_scenarios, load_scenario
    from pages._run_view import teaching_counts

    checked = 0
    for name, level, result in recorded_level_results():
        headline = (result.get("explain") or {}).get("headline") or ""
        teaches = load_scenario(list_scenarios()[name]).teaches if name in list_scenarios() else {}
        shown = teaching_counts(level, LevelResult.from_json(level, result), teaches)
        for words, key in CITED_WORDS.items():
            if words in headline:
                assert key in shown, (name, level, headline, shown)
                checked += 1
    assert checked >= 10  # the recorded runs cite duplicates, losses and reorderings


def test_a_count_the_sentence_cites_joins_the_taught_ones_only_when_not_zero():
    from pages._run_view import teaching_counts

    result = {**CLEAN, "delivered": 30, "reordered": 5, "never_sent": 0}
    assert teaching_counts("at-most-once", judged(result), {"at-most-once": {"lost": "0"}}) == [
        "delivered",
        "lost",
        "reordered",
    ]
    assert teaching_counts("at-most-once", judged({**result, "reordered": 0}), {}) == [
        "delivered",
        "duplicates",
        "lost",
    ]


def test_a_zombie_card_names_what_was_refused_and_no_write_when_none_was():
    """The zombie teaches its total of refusals: the card shows each kind that happened,
    under its own name; at at-least-once every output landed, so no write is said."""
    import json
    from pathlib import Path

    from engine.scenarios.scenario import list_scenarios, load_scenario
    from pages._run_view import TEACHING_LABELS, teaching_counts

    recorded = Path(__file__).parent.parent / "data" / "recorded" / "zombie.json"
    results = json.loads(recorded.read_text())["results"]
    teaches = load_scenario(list_scenarios()["zombie"]).teaches
    shown = {
        level: teaching_counts(level, LevelResult.from_json(level, r), teaches)
        for level, r in results.items()
    }
    assert "commits_refused" in shown["at-least-once"]
    assert "txn_calls_refused" in shown["exactly-once"]
    assert not any("writes_refused" in keys or "fenced" in keys for keys in shown.values())
    assert "write" not in TEACHING_LABELS["commits_refused"]


def figure_font_sizes(figure) -> list[float]:
    """Every font size a figure sets or inherits: its default, axes, legend and notes."""
    default = figure.layout.font.size
    sizes = [default, figure.layout.legend.font.size or default]
    for axis in (*figure.select_xaxes(), *figure.select_yaxes()):
        sizes += [axis.tickfont.size or default, axis.title.font.size or default]
    sizes += [a.font.size or default for a in figure.layout.annotations]
    return sizes


def test_the_projectors_timeline_is_drawn_in_its_type_with_labels_still_apart():
    """At ROOM_PX every text of the busiest timeline is 24 px or more, no raw name is in small
    type, and the labels, reckoned at that size, still overlap nowhere."""
    result = isr_shrink_like_result()
    events = [
        {"t": 100.0 + i * 0.25, "proc": "producer", "ev": ev, "id": i}
        for i in range(80)
        for ev in ("send", "ack")
    ]
    figure, unlabelled = timeline(events, result, [], type_px=ROOM_PX)
    assert min(figure_font_sizes(figure)) >= ROOM_PX
    texts = [a.text for a in figure.layout.annotations if a.yref and "domain" in a.yref]
    assert texts and not any("<span" in t or "NOT_ENOUGH_REPLICAS" in t for t in texts), texts
    assert overlaps(label_boxes(figure, type_px=ROOM_PX)) == 0
    assert len(texts) + len(unlabelled) == len(fold_bands(fault_bands(result.faults, 100.0)))
    desk, _ = timeline(events, result, [])
    assert min(figure_font_sizes(desk)) < ROOM_PX  # the engineer's screen keeps its type


def test_room_sized_raises_every_text_of_any_figure_and_drops_small_spans():
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=2, cols=1, subplot_titles=("first", "second"))
    figure.add_bar(x=[1, 2], y=[3, 4], text=["3", "4"], textfont={"size": 12}, row=1, col=1)
    figure.add_annotation(
        text="lost <span style='font-size:11px;color:#757575'>lost_id</span>",
        x=1,
        y=3,
        font={"size": 14},
    )
    figure.update_layout(font={"size": 12}, legend={"font": {"size": 10}})
    figure.update_xaxes(tickfont={"size": 9})
    sized = room_sized(figure)
    assert min(figure_font_sizes(sized)) >= ROOM_PX
    assert sized.data[0].textfont.size >= ROOM_PX
    assert all("<span" not in a.text for a in sized.layout.annotations)
    big = room_sized(go.Figure(layout={"font": {"size": 30}}))
    assert big.layout.font.size == 30  # larger type stays as it is


def test_a_lasting_fault_is_one_band_until_the_record_that_ends_it(monkeypatch):
    """The pairing is the kind's (`ended_by`), not the page's: a pause lasts until its resume,
    and a made-up lasting kind registered beside it is drawn the same way."""
    from engine.faults import KINDS
    from engine.faults.base import FaultKind

    class SlowDisk(type(KINDS["pause"])):
        name = "slow-disk"
        words = "on a slow disk"
        colour = "#123456"
        ended_by = "disk-healed"

        def lasting(self, event):
            return f"node {event['node']} on a slow disk", "fsync 2 s"

    monkeypatch.setitem(KINDS, "slow-disk", SlowDisk())
    faults = [
        {"t": 11.0, "kind": "pause", "target": "processor", "signal": "SIGSTOP"},
        {"t": 12.0, "kind": "slow-disk", "target": "2", "node": 2},
        {"t": 13.5, "kind": "resume", "target": "processor"},
        {"t": 15.0, "kind": "disk-healed", "target": "2"},
        {"t": 16.0, "kind": "pause", "target": "sink", "signal": "SIGSTOP"},  # never woken
    ]
    bands = {
        (b["label"], b["raw"]): (b["x0"], b["x1"], b["colour"]) for b in fault_bands(faults, 10.0)
    }
    assert bands == {
        ("processor frozen", "SIGSTOP"): (1.0, 3.5, KINDS["pause"].colour),
        ("node 2 on a slow disk", "fsync 2 s"): (2.0, 5.0, "#123456"),
        ("sink frozen", "SIGSTOP"): (6.0, 6.05, KINDS["pause"].colour),
    }
    assert isinstance(KINDS["slow-disk"], FaultKind)
