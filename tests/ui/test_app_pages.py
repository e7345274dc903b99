"""AppTest checks of the dashboard pages (no browser; the page scripts run for real)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from engine import paths
from engine.levels import LEVELS
from engine.scenario import list_scenarios, load_scenario

APP = str(paths.REPO_ROOT / "app.py")


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_home_shows_each_level_with_its_real_settings(monkeypatch):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "Kafka failure lab"
    subheaders = [s.value for s in at.subheader]
    for level in LEVELS.values():
        assert level.title in subheaders
    codes = [c.value for c in at.code]
    assert json.dumps(LEVELS["exactly-once"].consumer, indent=1) in codes
    # Without a cluster, the sidebar offers to start one instead of failing.
    assert "No cluster is running." in markdown_text(at)


@pytest.mark.kafka
def test_sidebar_shows_the_running_cluster_and_its_nodes(monkeypatch, cluster1):
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    from engine.kafka.admin import create_topic

    if "sidebar-leaders" not in (cluster1.status().partition_leaders or {}):
        create_topic(cluster1.direct_bootstrap, "sidebar-leaders", partitions=2)
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "local", "name": cluster1.name}))
    try:
        at = AppTest.from_file(APP, default_timeout=30).run()
        assert not at.exception
        assert not at.error
        text = markdown_text(at)
        assert "node 1: running · controller · leads" in text
        assert "`sidebar-leaders`: p0 → node 1, p1 → node 1" in text
        assert any("local" in c.value for c in at.caption)
    finally:
        pointer.unlink(missing_ok=True)


def register_current(cluster) -> None:
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "local", "name": cluster.name}))


@pytest.mark.kafka
def test_failure_lab_runs_a_scenario_and_shows_the_levels(monkeypatch, cluster1):
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    try:
        # Run app.py first, as a browser's first visit would: it sets up st.navigation.
        at = AppTest.from_file(APP, default_timeout=120).run()
        at.switch_page("pages/failure_lab.py").run()
        assert not at.exception
        at.selectbox(key="lab_scenario").set_value("ack-loss").run()
        at.button[0].click().run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        metrics = {(m.label, m.value) for m in at.metric}
        assert ("Duplicates", "1") in metrics  # at-least-once stored the retried batch twice
        assert ("Delivered", "20") in metrics
        assert at.dataframe, "the verdict table is shown"
        run_id = at.session_state["lab_run_id"]
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)

    # Replay shows the same run from disk, with no cluster at all.
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    replay = AppTest.from_file(APP, default_timeout=30).run()
    replay.switch_page("pages/replay.py").run()
    assert not replay.exception
    chosen = replay.selectbox(key="replay_run")
    assert chosen.value["run_id"] == run_id
    assert ("Duplicates", "1") in {(m.label, m.value) for m in replay.metric}


def test_replay_without_runs_says_how_to_make_one(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/replay.py").run()
    assert not at.exception
    assert any("No recorded runs yet" in i.value for i in at.info)


def test_every_lesson_file_validates():
    from engine.lesson import list_lessons, load_lesson

    lessons = list_lessons()
    assert lessons
    for path in lessons.values():
        lesson = load_lesson(path)
        assert sum(step.minutes for step in lesson.steps) <= lesson.minutes


@pytest.mark.kafka
def test_lesson_mode_predict_run_explain(monkeypatch, cluster1):
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    try:
        at = AppTest.from_file(APP, default_timeout=120).run()
        at.switch_page("pages/lesson.py").run()
        assert not at.exception
        at.radio[0].set_value("two").run()  # the room predicts two copies of message 2
        next(b for b in at.button if b.label == "Lock in the prediction").click().run()
        # The story tells the outcome, so it is not on screen before the run.
        story = load_scenario(list_scenarios()["ack-loss"]).story[:40]
        assert not any(story in e.value for e in [*at.markdown, *at.caption])
        next(b for b in at.button if b.label == "▶ Run the scenario").click().run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        texts = "\n".join(m.value for m in at.markdown)
        assert "The room was right." in texts
        assert not at.warning, "the run confirmed the expected outcome"
        metrics = {(m.label, m.value) for m in at.metric}
        assert ("Duplicates", "1") in metrics
        # The count the answer rests on is beside the explanation.
        assert ("Duplicates at at-least-once", "1") in metrics
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)


def test_log_views_page_opens_through_the_app_without_a_cluster(monkeypatch):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/log_views.py").run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.kafka
def test_zombie_page_shows_the_fencing_and_the_epoch_bump(monkeypatch, cluster1):
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    try:
        at = AppTest.from_file(APP, default_timeout=180).run()
        at.switch_page("pages/zombie.py").run()
        assert not at.exception
        next(b for b in at.button if b.label.startswith("▶ Run the zombie")).click().run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Registrations"] == "2"
        assert metrics["Rejected (fenced)"] == "1"
        assert any("Fencing worked" in s.value for s in at.success)
        assert not at.error, [e.value for e in at.error]
        batches = at.dataframe[0].value
        ours = batches[batches["producer id"] >= 0]
        assert ours["epoch"].nunique() >= 2, "the replacement bumped the epoch"
        assert "zombie (first instance)" in set(batches["written by"])
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)
