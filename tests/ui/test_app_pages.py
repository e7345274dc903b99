"""AppTest checks of the dashboard pages (no browser; the page scripts run for real)."""

from __future__ import annotations

import json
import time

import pytest
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.model.levels import CORE_LEVELS, LEVELS, PROCESSOR_CONSUMER
from engine.run import record
from engine.scenarios.scenario import list_scenarios, load_scenario

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
    # The very objects the runner hands the clients (tests/unit/test_levels_shown.py).
    for name in CORE_LEVELS:
        assert json.dumps(LEVELS[name].producer, indent=1) in codes
        assert json.dumps(LEVELS[name].consumer, indent=1) in codes
    assert json.dumps(PROCESSOR_CONSUMER, indent=1) in codes
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


def test_replay_shows_a_crafted_run_parameter_as_text(monkeypatch, tmp_path):
    """?run= is anyone's to write: a Markdown link in it must not become a link."""
    import tarfile

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    archive = paths.REPO_ROOT / "tests/data/recorded/runs/ack-loss.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = "x](https://example.invalid) [click`"
    at.run()
    at.switch_page("pages/replay.py").run()
    assert not at.exception
    warning = next(w.value for w in at.warning if "There is no run" in w.value)
    assert warning.startswith("There is no run `x](https://example.invalid) [click` here")


def test_every_lesson_file_validates():
    from engine.teach.lesson import list_lessons, load_lesson

    lessons = list_lessons()
    assert lessons
    for path in lessons.values():
        lesson = load_lesson(path)
        assert sum(step.minutes for step in lesson.steps) <= lesson.minutes


@pytest.mark.kafka
@pytest.mark.kafka
def test_a_lesson_step_that_needs_3_nodes_says_so_before_it_runs(monkeypatch, cluster1):
    from engine.teach.lesson import LessonProgress, list_lessons, load_lesson

    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    lesson = load_lesson(list_lessons()["delivery-guarantees"])
    step = next(i for i, s in enumerate(lesson.steps) if s.scenario == "retry-reorder")
    try:
        at = AppTest.from_file(APP, default_timeout=120).run()
        at.switch_page("pages/lesson.py").run()
        at.session_state["lesson_progress"] = {
            "delivery-guarantees": LessonProgress(lesson="delivery-guarantees", step=step)
        }
        at.run()
        at.radio[0].set_value("2").run()
        next(b for b in at.button if b.label == "Lock in the prediction").click().run()
        assert not at.exception
        infos = "\n".join(i.value for i in at.info)
        assert "needs a 3-node cluster; the running one has 1" in infos
        assert not any(b.label == "▶ Run the scenario" for b in at.button)
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)


def test_lesson_mode_predict_run_explain(monkeypatch, cluster1):
    from engine.teach.lesson import list_lessons, load_lesson

    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    try:
        at = AppTest.from_file(APP, default_timeout=120).run()
        at.switch_page("pages/lesson.py").run()
        assert not at.exception
        # The lesson's cluster is said before its first step: its last step needs 3 nodes.
        lesson = load_lesson(list_lessons()["delivery-guarantees"])
        said = f"{len(lesson.steps)} steps · {lesson.minutes} min · a 3-node cluster"
        assert f"{said} (for retry-reorder)" in [c.value for c in at.caption]
        infos = "\n".join(i.value for i in at.info)
        assert "This lesson needs 3 nodes; the running cluster has 1." in infos
        at.radio[0].set_value("two").run()  # the room predicts two copies of message 2
        next(b for b in at.button if b.label == "Lock in the prediction").click().run()
        # The story tells the outcome, so it is not on screen before the run.
        story = load_scenario(list_scenarios()["ack-loss"]).story[:40]
        assert not any(story in e.value for e in [*at.markdown, *at.caption])
        next(b for b in at.button if b.label == "▶ Run the scenario").click().run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        texts = "\n".join(m.value for m in at.markdown)
        assert "✅ The room was right: the run shows “two”." in texts
        assert not at.warning, "the run confirmed the expected outcome"
        metrics = {(m.label, m.value) for m in at.metric}
        assert ("Duplicates", "1") in metrics
        # The counts the verdict rests on are beside the explanation.
        assert ("Duplicates at at-least-once", "1") in metrics
        assert ("Lost at at-least-once", "0") in metrics
        # The explanation cites this run's counts, and the step can be run again.
        assert "Duplicates = 1 under at-least-once" in texts
        assert any(b.label == "▶ Run this step again" for b in at.button)
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)


def test_the_lessons_place_and_prediction_survive_a_trip_to_other_pages(monkeypatch):
    """Lesson -> Free play -> Metrics -> Replay -> Lesson: the same lesson, step, vote and
    lock (Streamlit drops a widget's state when its page is left; the lesson keeps its own)."""
    from engine.teach.lesson import list_lessons, load_lesson

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/lesson.py").run()
    at.selectbox(key="lesson_name").set_value("kafka-streams").run()
    next(b for b in at.button if b.label == "Next step →").click().run()
    second = load_lesson(list_lessons()["kafka-streams"]).steps[1]
    assert at.header[0].value == load_scenario(list_scenarios()[second.scenario]).title
    at.radio[0].set_value("none").run()
    next(b for b in at.button if b.label == "Lock in the prediction").click().run()
    for page in ("free_play", "metrics", "replay", "lesson"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, page
    assert at.selectbox(key="lesson_name").value == "kafka-streams"
    assert at.header[0].value == load_scenario(list_scenarios()[second.scenario]).title
    assert at.radio[0].value == "none" and at.radio[0].disabled
    assert not any(b.label == "Lock in the prediction" for b in at.button)
    # Another lesson starts at its first step.
    at.selectbox(key="lesson_name").set_value("commits-and-timeouts").run()
    first = load_lesson(list_lessons()["commits-and-timeouts"]).steps[0]
    assert at.header[0].value == load_scenario(list_scenarios()[first.scenario]).title
    assert at.radio[0].value is None


def test_log_views_page_opens_through_the_app_without_a_cluster(monkeypatch):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/log_views.py").run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.kafka
def test_isolation_view_charts_the_lso_waiting_during_a_transaction_timeout(
    monkeypatch, tmp_path, cluster1
):
    """transaction-timeout reads the LSO and high watermark as they move; the recorded run's
    isolation view draws them, and the evidence says how long the LSO stood still."""
    from engine.run.runner import run_scenario

    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    path = list_scenarios()["transaction-timeout"]
    output = run_scenario(load_scenario(path), cluster1, source_text=path.read_text())
    result = output["results"]["exactly-once"]
    readings = [f for f in result["faults"] if f["kind"] == "offsets"]
    # The LSO stood below the high watermark for seconds, then caught up with it.
    assert any(r["lso"] < r["high_watermark"] for r in readings)
    assert readings[-1]["lso"] == readings[-1]["high_watermark"]
    stall = [e for e in result["explain"]["evidence"] if "last stable offset at" in e]
    assert stall and float(stall[0].split(" for ")[1].split(" s ")[0]) >= 4.0

    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/log_views.py").run()
    assert not at.exception
    headers = [h.value for h in at.subheader]
    assert "The last stable offset and the high watermark during the run" in headers


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
        # The zombie is refused once, for its epoch: a write, or a call of its transaction.
        refused = int(metrics["Writes refused (epoch)"]) + int(metrics["Transaction calls refused"])
        assert refused == 1, metrics
        assert any("Fencing worked" in s.value for s in at.success)
        assert not at.error, [e.value for e in at.error]
        batches = at.dataframe[0].value
        ours = batches[batches["producer id"] >= 0]
        assert ours["epoch"].nunique() >= 2, "the replacement bumped the epoch"
        assert "zombie (first instance)" in set(batches["written by"])
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def run_button(at: AppTest):
    return next(b for b in at.button if b.label == "▶ Run")


@pytest.mark.kafka
def test_a_3_node_scenario_on_a_cluster_started_elsewhere_says_how_before_run(
    monkeypatch, cluster1
):
    from pages._shared import cluster_service

    monkeypatch.setenv("LAB_AUTOSTART", "1")
    register_current(cluster1)
    cluster_service.clear()  # a fresh server process: it adopts cluster1, which it does not own
    try:
        at = AppTest.from_file(APP, default_timeout=60).run()
        at.switch_page("pages/failure_lab.py").run()
        at.selectbox(key="lab_scenario").set_value("broker-failover").run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        infos = "\n".join(i.value for i in at.info)
        assert "needs a 3-node cluster; the running one has 1" in infos
        assert "`python -m engine cluster up --nodes 3`" in infos
        assert run_button(at).disabled
        assert not any(b.label.startswith("Restart the cluster") for b in at.button)
    finally:
        (paths.state_dir() / "current.json").unlink(missing_ok=True)
        cluster_service.clear()


@pytest.mark.kafka
def test_the_dashboards_own_cluster_restarts_with_3_nodes_for_broker_failover(monkeypatch):
    from pages._shared import cluster_service

    monkeypatch.setenv("LAB_AUTOSTART", "1")
    monkeypatch.setenv("LAB_NODES", "1")
    (paths.state_dir() / "current.json").unlink(missing_ok=True)
    cluster_service.clear()  # a fresh server process: it starts a 1-node cluster of its own
    service = cluster_service()
    try:
        at = AppTest.from_file(APP, default_timeout=60).run()
        wait_for(lambda: service.state != "starting", 180, "the 1-node cluster")
        assert service.state == "ready", service.error
        assert service.owned
        at.switch_page("pages/failure_lab.py").run()
        at.selectbox(key="lab_scenario").set_value("broker-failover").run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        assert any("needs a 3-node cluster; the running one has 1" in i.value for i in at.info)
        assert run_button(at).disabled
        label = "Restart the cluster with 3 nodes and run"
        restart = next(b for b in at.button if b.label == label)
        restart.click().run()
        assert not at.exception
        assert service.state in ("starting", "ready")
        if service.state == "starting":
            assert run_button(at).disabled
        wait_for(lambda: service.state != "starting", 240, "the 3-node cluster")
        assert service.state == "ready", service.error
        # The next draw of the page runs the scenario by itself, on the new cluster.
        at.run(timeout=300)
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        assert not any("needs a 3-node cluster" in i.value for i in at.info)
        assert not run_button(at).disabled
        run_id = at.session_state["lab_runs"]["broker-failover"]
        meta = record.load_run(run_id).meta
        assert meta["status"] == "complete"
        levels = ["at-most-once", "at-least-once", "idempotent-only", "exactly-once"]
        assert meta["levels"] == levels
        assert "lab_autorun" not in at.session_state
        # The sidebar (drawn by app.py, which a page switched to in AppTest runs without).
        home = AppTest.from_file(APP, default_timeout=60).run()
        text = markdown_text(home)
        for node in (1, 2, 3):
            assert f"node {node}: running" in text
        # What "Stop cluster" does (AppTest does not click inside the sidebar's fragment):
        # the cluster stops and stays stopped; the start controls are offered.
        assert any(b.label == "Stop cluster" for b in home.button)
        service.stop()
        home = AppTest.from_file(APP, default_timeout=60).run()  # the next visit
        assert service.state == "idle", "no second autostart"
        assert "No cluster is running." in markdown_text(home)
        assert any(b.label == "Start" for b in home.button)
    finally:
        service.stop()
        cluster_service.clear()


def test_a_broken_scenario_or_lesson_file_is_named_in_one_line_and_the_rest_works(
    monkeypatch, tmp_path
):
    """One malformed file in scenarios/ (or lessons/) never replaces a page with a traceback:
    its line in the picker says what is wrong, and the other scenarios still open."""
    import shutil

    from engine.scenarios import scenario as scenario_module
    from engine.teach import lesson as lesson_module

    scenarios = tmp_path / "scenarios"
    shutil.copytree(paths.REPO_ROOT / "scenarios", scenarios)
    (scenarios / "zz-broken.yaml").write_text("name: zz-broken\\nfaults: [{kind: nonsense}]\\n")
    (scenarios / "zz-bad-yaml.yaml").write_text("name: [unclosed\\n")
    lessons = tmp_path / "lessons"
    shutil.copytree(paths.REPO_ROOT / "lessons", lessons)
    (lessons / "zz-broken.yaml").write_text("title: t\\nsteps: [{scenario: zz-broken}]\\n")
    monkeypatch.setattr(scenario_module, "scenarios_dir", lambda: scenarios)
    monkeypatch.setattr(lesson_module, "lessons_dir", lambda: lessons)
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, "home"
    at.switch_page("pages/failure_lab.py").run()
    assert not at.exception
    picker = at.selectbox(key="lab_scenario")
    broken = [o for o in picker.options if o.startswith("zz-")]
    assert len(broken) == 2 and all("⚠️ the file does not load: " in o for o in broken), broken
    assert all("\\n" not in o for o in broken)
    picker.set_value("zz-broken").run()
    assert not at.exception and at.error  # the page says it, in its place
    at.switch_page("pages/lesson.py").run()
    at.selectbox(key="lesson_name").set_value("zz-broken").run()
    assert not at.exception and at.error
