"""The Metrics page: Spark's results of real runs, charted; Kafka first, the record otherwise."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.run import record
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario

APP = str(paths.REPO_ROOT / "app.py")
COUNTS = ("sent", "acked", "delivered", "duplicates", "lost", "reordered", "aborted_visible")

pytestmark = pytest.mark.kafka


def open_metrics(run_id: str, *, timeout: float = 240.0) -> AppTest:
    """Open the page on `run_id` and rerun it (as its fragment would) until Spark has computed."""
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.session_state["lab_run_id"] = run_id
    at.switch_page("pages/metrics.py").run()
    deadline = time.monotonic() + timeout
    while record.load_metrics(run_id) is None and time.monotonic() < deadline:
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        time.sleep(1.0)
        at.run()
    at.run()  # once more, so the page shows what was saved
    return at


@pytest.fixture(scope="module")
def ack_loss_run(cluster1) -> dict:
    path = list_scenarios()["ack-loss"]
    return run_scenario(load_scenario(path), cluster1, source_text=path.read_text())


def test_metrics_page_charts_what_spark_read_from_kafka(monkeypatch, ack_loss_run):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    run_id = ack_loss_run["run_id"]
    at = open_metrics(run_id)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    saved = record.load_metrics(run_id)
    assert saved is not None, "Spark's metrics were saved beside the run"
    assert saved["source"].startswith("Kafka at 127.0.0.1:")
    assert saved["fallback_reason"] is None
    for level, checked in ack_loss_run["results"].items():
        for key in COUNTS:
            assert saved["results"][level][key] == checked[key], (level, key)
    # at-least-once stored the retried batch twice; exactly-once kept one copy.
    assert saved["results"]["at-least-once"]["duplicates"] >= 1
    assert saved["results"]["exactly-once"]["duplicates"] == 0
    assert len(saved["verdicts"]["exactly-once"]) == saved["results"]["exactly-once"]["messages"]

    assert any("equal the engine's checker" in s.value for s in at.success)
    charts = at.get("plotly_chart")
    assert len(charts) >= 3, "rates, latency distribution and throughput are drawn"
    assert any("Spark read **Kafka at" in c.value for c in at.caption)

    # Throughput over time in buckets sized to the run: a few-second level gets many bars.
    figure = next(json.loads(c.proto.spec) for c in charts if "messages per" in c.proto.spec)
    for trace in figure["data"]:
        level = trace["name"]
        tp = saved["results"][level]["throughput"]
        assert trace["width"] == pytest.approx(0.9 * tp["bucket_s"]) and tp["bucket_s"] < 1.0
        assert trace["y"] == tp["per_bucket"] and sum(trace["y"]) == tp["messages"]
        assert len(trace["y"]) >= 5, (level, tp)

    # The verdict table: the Failure lab's columns and order, times in seconds since the start.
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert list(table.columns[:3]) == ["id", "verdict", "copies"]
    # Seconds since the level began; a message the sink never read says so in words.
    seen = pd.to_numeric(table["first seen (s)"], errors="coerce")
    assert seen.dropna().between(0, 600).all()
    assert set(table["first seen (s)"][seen.isna()]) <= {"never seen", "—"}


def test_a_run_whose_cluster_is_gone_is_computed_from_its_record(monkeypatch, ack_loss_run):
    """A run copied from another machine: Kafka does not hold it, its folder still does."""
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    source = record.run_folder(ack_loss_run["run_id"])
    copy_id = ack_loss_run["run_id"] + "-copy"
    copy = record.run_folder(copy_id)
    shutil.copytree(source, copy)
    (copy / "metrics.json").unlink(missing_ok=True)
    meta = json.loads((copy / "run.json").read_text())
    meta.update(run_id=copy_id, started_at=meta["started_at"] + 1)
    (copy / "run.json").write_text(json.dumps(meta))
    config = json.loads((copy / "config.json").read_text())
    config["cluster"]["direct_bootstrap"] = "127.0.0.1:9"  # nothing listens there
    (copy / "config.json").write_text(json.dumps(config))

    at = open_metrics(copy_id)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    saved = record.load_metrics(copy_id)
    assert saved is not None
    assert saved["source"] == "the records saved with the run"
    assert "127.0.0.1:9" in saved["fallback_reason"]
    for level, checked in ack_loss_run["results"].items():
        for key in ("delivered", "duplicates", "lost", "reordered"):
            assert saved["results"][level][key] == checked[key], (level, key)
    # In the room's words, without the command line's advice (a bootstrap variable).
    info = " ".join(i.value for i in at.info)
    assert "no longer serves its topics" in info and "LAB_METRICS_BOOTSTRAP" not in info
    # Two runs of ack-loss now have Spark metrics: the page draws their history.
    assert any(s.value == "Across runs: ack-loss" for s in at.subheader)
    assert len(at.get("plotly_chart")) >= 4


def test_a_big_runs_verdict_table_is_paged_from_parquet(monkeypatch, ack_loss_run):
    """Past LAB_VERDICT_ROWS rows the table stays out of metrics.json: Spark writes it to
    Parquet beside the run and the page lists it a page at a time."""
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_VERDICT_ROWS", "10")
    run_id = ack_loss_run["run_id"]
    (record.run_folder(run_id) / "metrics.json").unlink(missing_ok=True)
    at = open_metrics(run_id)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    saved = record.load_metrics(run_id)
    assert saved["verdicts"] is None and saved["verdicts_parquet"] == "verdicts.parquet"
    assert (record.run_folder(run_id) / "verdicts.parquet" / "level=at-least-once").is_dir()
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert list(table.columns[:3]) == ["id", "verdict", "copies"]
    assert any(c.value.startswith("Rows 1-") for c in at.caption)
    # Every verdict of the level, page by page, equals the checker's count of messages.
    at.multiselect(key=next(m.key for m in at.multiselect)).select("delivered once").run()
    assert not at.exception
    caption = next(c.value for c in at.caption if c.value.startswith("Rows 1-"))
    level = at.radio(key=f"metrics_verdict_level_{run_id}").value
    assert f"of {saved['results'][level]['messages']:,} " in caption


def test_a_followed_runs_metrics_are_the_streaming_queries_final_numbers(monkeypatch, cluster1):
    """A run followed by Spark's streaming queries (as the presenter's dashboard runs them):
    while it is followed, the page charts the counts of the records Spark has read so far;
    then it waits for the follower's final numbers instead of starting the batch job, and
    says which computation produced them."""
    from engine.metrics.compute import STREAM_SOURCE
    from engine.metrics.session import get_spark
    from engine.metrics.streaming import finish_in_background, live_runs, start_following
    from engine.run.runner import new_run_id

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    path = list_scenarios()["ack-loss"]
    scenario = load_scenario(path)
    run_id = new_run_id(scenario.name)
    follower = start_following(
        get_spark(),
        cluster1.direct_bootstrap,
        run_id,
        scenario.levels,
        scenario.pipeline,
        messages=scenario.workload.messages,
        scenario=scenario.name,
    )
    assert [r.follower.run_id for r in live_runs()] == [run_id]
    output = run_scenario(scenario, cluster1, source_text=path.read_text(), run_id=run_id)

    # Still followed (the dashboard finishes it once the verdict is out): the live panel,
    # once the queries have read what the run wrote, shows the run's counts.
    follower.query.processAllAvailable()
    live = AppTest.from_file(APP, default_timeout=180).run()
    live.switch_page("pages/metrics.py").run()
    assert not live.exception, live.exception
    assert any("While ack-loss runs" in h.value for h in live.subheader)
    figure = json.loads(
        next(c for c in live.get("plotly_chart") if "extra copies" in c.proto.spec).proto.spec
    )
    by_panel = {
        trace["name"]: dict(zip(trace["x"], trace["y"], strict=True)) for trace in figure["data"]
    }
    for level, checked in output["results"].items():
        assert by_panel["messages in the topic"][level] == checked["delivered"], level
        assert by_panel["extra copies (duplicates)"][level] == checked["duplicates"], level
        assert by_panel["aborted records visible"][level] == checked["aborted_visible"], level
    assert by_panel["extra copies (duplicates)"]["at-least-once"] >= 1

    finish_in_background(follower)  # as engine.run_handle does once the verdict is out
    assert live_runs() == []
    at = open_metrics(run_id)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    saved = record.load_metrics(run_id)
    assert saved["source"] == STREAM_SOURCE and saved["fallback_reason"] is None
    for level, checked in output["results"].items():
        for key in COUNTS:
            assert saved["results"][level][key] == checked[key], (level, key)
    captions = " ".join(c.value for c in at.caption)
    assert "**Final numbers**, computed by Spark's streaming queries" in captions
    assert not any("runs: what Spark has read so far" in h.value for h in at.subheader)
    assert any("equal the engine's checker" in s.value for s in at.success)


def test_the_dashboards_follower_starts_once_the_topics_exist_and_reads_the_whole_run(cluster1):
    """engine.run_handle.follow, as start_run calls it: Spark's queries wait while the levels
    make their topics (RunHandle.topics_made), then start and still read every record, each
    topic from its first offset: the final metrics are the checker's. The contrast: a run
    that ended before its topics were reported is not followed, and the page will say why."""
    from engine.metrics.compute import STREAM_SOURCE, compute_and_save
    from engine.metrics.session import get_spark
    from engine.metrics.streaming import why_not_followed
    from engine.run.runner import new_run_id
    from engine.run_handle import RunHandle, follow

    path = list_scenarios()["ack-loss"]
    scenario = load_scenario(path)
    spark = get_spark()

    def follower_thread(run_id: str, job: RunHandle, following: list) -> threading.Thread:
        args = (spark, cluster1, scenario, scenario.levels, run_id, following, job)
        thread = threading.Thread(target=follow, args=args, daemon=True)
        thread.start()
        return thread

    run_id, job, following = new_run_id(scenario.name), RunHandle(stage="Starting"), []
    thread = follower_thread(run_id, job, following)
    thread.join(1.0)
    assert thread.is_alive() and following == []  # no topic yet: it waits
    output = run_scenario(
        scenario, cluster1, source_text=path.read_text(), run_id=run_id, progress=job.progress
    )
    job.output = output
    thread.join(60)
    assert len(following) == 1 and following[0].started_at is not None
    metrics = compute_and_save(run_id, follower=following[0])
    assert metrics["source"] == STREAM_SOURCE, metrics["fallback_reason"]
    for level, checked in output["results"].items():
        for key in COUNTS:
            assert metrics["results"][level][key] == checked[key], (level, key)

    # The contrast: the run over (here: failed) before any level reported its topics.
    ended, job, following = new_run_id(scenario.name), RunHandle(stage="Starting"), []
    thread = follower_thread(ended, job, following)
    job.error = RuntimeError("the cluster went away")
    job.topics_made.set()  # as start_run's work() does when the run ends
    thread.join(10)
    assert following == []
    assert "the run ended before they could start" in (why_not_followed(ended) or "")
