"""A room's viewers make no heavy work: no Spark computation, no log dump of their own.

They see what the presenter's session computed (a run's metrics.json, the presenter's latest
log dump), or one line saying the presenter has not computed it yet.
"""

from __future__ import annotations

import json
import time

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.base.errors import LabError
from engine.logs.batches import LogDump
from engine.teach.room import KEY_ENV

APP = str(paths.REPO_ROOT / "app.py")
KEY = "room-test-key-0123456789"


class FakeSpark:
    """A Spark that is up, and counts who asks it to start."""

    state, step, fraction, error = "ready", "ready", 1.0, None

    def __init__(self) -> None:
        self.starts = 0

    def ensure_started(self) -> None:
        self.starts += 1

    def session(self) -> None:
        return None


@pytest.fixture
def room(monkeypatch, tmp_path):
    """A room with one complete run that has no metrics yet, and a Spark that counts work."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "1")  # a viewer's visit must not start it
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    folder = tmp_path / "20261126-000000-ack-loss-abcd"
    folder.mkdir()
    meta = {
        "run_id": folder.name,
        "scenario": "ack-loss",
        "status": "complete",
        "levels": ["at-least-once"],
        "started_at": time.time(),
    }
    (folder / "run.json").write_text(json.dumps(meta))
    (folder / "result.json").write_text(json.dumps({"results": {}}))
    spark = FakeSpark()
    computed: list[str] = []

    def compute_and_save(run_id: str, **_: object) -> dict:
        computed.append(run_id)
        raise LabError("no Kafka in this test")

    import engine.face
    import pages._spark
    from pages._roles import role_table
    from pages._room_results import room_results

    monkeypatch.setattr(pages._spark, "spark_service", lambda: spark)
    monkeypatch.setattr(engine.face, "compute_and_save", compute_and_save)
    role_table.clear()
    room_results.clear()
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield spark, computed, folder
    config.set_option("server.address", before)


def texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.caption, *at.markdown, *at.info, *at.error])


def test_a_viewers_metrics_visit_starts_no_computation(room):
    spark, computed, folder = room
    viewer = AppTest.from_file(APP, default_timeout=30).run()
    viewer.switch_page("pages/metrics.py").run()
    assert not viewer.exception
    assert computed == [] and spark.starts == 0
    assert not (folder / "metrics.json").exists()
    assert "The presenter has not computed this run's metrics yet" in texts(viewer)
    assert not [b for b in viewer.button if "Spark" in b.label or "Compute" in b.label]

    # The presenter's visit computes (here it fails, in one line, without a traceback).
    presenter = AppTest.from_file(APP, default_timeout=30)
    presenter.query_params["key"] = KEY
    presenter.run()
    presenter.switch_page("pages/metrics.py").run()
    assert not presenter.exception
    assert computed == [folder.name]
    assert "no Kafka in this test" in texts(presenter)


def test_a_viewer_sees_the_presenters_metrics_and_no_recompute_button(room):
    spark, computed, folder = room
    (folder / "metrics.json").write_text(
        json.dumps({"results": {}, "source": "kafka", "computed_at": time.time()})
    )
    viewer = AppTest.from_file(APP, default_timeout=30).run()
    viewer.switch_page("pages/metrics.py").run()
    assert not viewer.exception
    assert computed == [] and spark.starts == 0
    assert "Spark read **kafka**" in texts(viewer)
    assert not [b for b in viewer.button if "Recompute" in b.label]


def saved_metrics(started: float) -> dict:
    """A metrics.json as Spark saves it, small: one level, every chart with something to draw."""
    level = {
        "messages": 10,
        "sent": 10,
        "acked": 10,
        "delivered": 10,
        "duplicates": 1,
        "duplicated_share": 0.1,
        "lost": 0,
        "reordered": 0,
        "aborted_visible": 0,
        "started_at": started,
        "latency_ms": {"p50": 3.0, "p95": 8.0, "p99": 9.0, "max": 9.0},
        "latency_distribution_ms": [{"q": 50, "ms": 3.0}, {"q": 100, "ms": 9.0}],
        "throughput": {
            "bucket_s": 0.05,
            "per_bucket": [4, 6],
            "window_start": started,
            "messages": 10,
            "messages_per_s": 100.0,
        },
    }
    return {"results": {"at-least-once": level}, "source": "kafka", "computed_at": started}


def test_the_metrics_charts_are_built_once_for_the_whole_room(room, monkeypatch):
    """Sixty viewers opening Metrics build its Plotly figures once, not once each: a later
    session is sent the elements the first one drew; a new metrics.json is drawn anew."""
    import os

    import pages._metrics_view as view

    spark, computed, folder = room
    built: list[str] = []
    for name in ("rates_figure", "latency_cdf_figure", "throughput_figure"):
        original = getattr(view, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            built.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(view, name, counted)
    for drawing in (view.draw_damage, view.draw_latency, view.draw_throughput):
        drawing.clear()
    path = folder / "metrics.json"
    path.write_text(json.dumps(saved_metrics(time.time())))

    specs = []
    for _viewer in range(3):
        viewer = AppTest.from_file(APP, default_timeout=30).run()
        viewer.switch_page("pages/metrics.py").run()
        assert not viewer.exception
        specs.append([chart.proto.spec for chart in viewer.get("plotly_chart")])
    assert sorted(built) == ["latency_cdf_figure", "rates_figure", "throughput_figure"]
    assert len(specs[0]) == 3 and specs[1] == specs[0] and specs[2] == specs[0]
    assert computed == [] and spark.starts == 0

    # The presenter recomputes: a new version of metrics.json, drawn again, once.
    path.write_text(json.dumps({**saved_metrics(time.time()), "source": "the record"}))
    os.utime(path, (time.time() + 5, time.time() + 5))
    viewer = AppTest.from_file(APP, default_timeout=30).run()
    viewer.switch_page("pages/metrics.py").run()
    assert not viewer.exception
    assert len(built) == 6
    assert "Spark read **the record**" in texts(viewer)


def test_a_viewer_gets_the_presenters_log_dump_and_no_dump_button(room):
    from pages._room_results import room_results

    viewer = AppTest.from_file(APP, default_timeout=30).run()
    viewer.switch_page("pages/log_views.py").run()
    assert not viewer.exception
    assert "Only the presenter dumps the log" in texts(viewer)
    assert "Dump the log" not in {b.label for b in viewer.button}
    dump = LogDump("payments", 0, 1, "/tmp/x", ["00000000000000000000.log"], [], "")
    room_results().put("log dump", dump)
    viewer.run()
    assert not viewer.exception
    assert "The presenter's latest dump" in texts(viewer)
    assert "`payments` partition 0 on node 1" in texts(viewer)


def test_several_browsers_may_hold_the_presenter_link_at_once():
    """The room's promise (docs/serving-a-room.md): every session that opened the link
    presents, none displaces another (a session that never did is a viewer)."""
    from pages._roles import RoleTable

    table = RoleTable()
    table.make_presenter("laptop")
    table.make_presenter("tablet")
    assert table.is_presenter("laptop") and table.is_presenter("tablet")
    assert not table.is_presenter("a-viewer")
