"""The Metrics page's pure parts: the damage chart's panels and the room's reason."""

from __future__ import annotations

from pages._metrics_view import RATES, rates_figure, room_reason


def result(duplicates: int = 0, lost: int = 0) -> dict:
    return {
        "messages": 30,
        "duplicates": duplicates,
        "duplicated_messages": duplicates,
        "duplicated_share": duplicates / 30,
        "lost": lost,
        "reordered": 0,
        "aborted_visible": 0,
    }


def test_each_kind_of_damage_has_its_own_panel_and_colour() -> None:
    results = {"at-most-once": result(lost=5), "at-least-once": result(duplicates=5)}
    figure = rates_figure(results)
    assert len(figure.data) == len(RATES)
    by_name = {trace.name: trace for trace in figure.data}
    lost, duplicated = by_name["messages lost"], by_name["messages duplicated"]
    assert lost.marker.color != duplicated.marker.color
    assert lost.xaxis != duplicated.xaxis  # separate panels
    assert list(lost.x) == ["at-most-once", "at-least-once"] and list(lost.text) == ["5", ""]
    titles = [a.text for a in figure.layout.annotations]
    assert titles == [label for _key, label in RATES]


def test_the_page_gives_the_reason_without_command_line_advice() -> None:
    reason = (
        "The cluster at 127.0.0.1:1 has no topic lab.x: run r was recorded on another "
        "cluster, or its topics were deleted. Point LAB_METRICS_BOOTSTRAP (or --bootstrap) "
        "at the run's cluster, or use --from-record."
    )
    assert "LAB_METRICS_BOOTSTRAP" not in room_reason(reason)
    assert room_reason(reason).endswith("its topics were deleted.")
    down = "No Kafka broker answers at b (x). Start the run's cluster, point LAB_METRICS_BOOTSTRAP"
    assert room_reason(down) == "No Kafka broker answers at b (x)."


def test_the_rooms_reads_are_shared_until_a_file_changes(tmp_path, monkeypatch) -> None:
    """Sixty viewers share one parse of each run.json and metrics.json version."""
    import json
    import os

    from pages._metrics_view import shared_metrics, shared_runs

    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    folder = tmp_path / "20260101-000000-ack-loss-abcd"
    folder.mkdir()
    meta = {"run_id": folder.name, "status": "complete", "started_at": 1.0}
    (folder / "run.json").write_text(json.dumps(meta))
    first = shared_runs()
    assert [m["run_id"] for m in first] == [folder.name]
    assert shared_runs() is first  # nothing changed: the same parsed list
    (folder / "run.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    os.utime(folder / "run.json", (5.0, 5.0))
    assert shared_runs()[0]["status"] == "interrupted"

    assert shared_metrics(folder.name) is None
    (folder / "metrics.json").write_text(json.dumps({"results": {}}))
    saved = shared_metrics(folder.name)
    assert saved == {"results": {}} and shared_metrics(folder.name) is saved
