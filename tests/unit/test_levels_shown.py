"""The home page's settings are the objects the runner hands to the clients."""

from __future__ import annotations

import pytest

from engine.base.paths import REPO_ROOT
from engine.cluster.external import ExternalCluster
from engine.model.levels import LEVELS, PROCESSOR_CONSUMER
from engine.run.runner import LevelRun, producer_config
from engine.scenarios.scenario import load_scenario


@pytest.mark.parametrize("name", sorted(LEVELS))
def test_each_client_spec_carries_the_settings_the_page_shows(name, tmp_path):
    scenario = load_scenario(REPO_ROOT / "scenarios" / "consumer-crash.yaml")
    assert scenario.pipeline == "processor"
    level = LEVELS[name]
    # Never started: building the specs touches no broker.
    run = LevelRun(scenario, level, ExternalCluster("127.0.0.1:1"), "run", tmp_path)
    assert run.sink_spec()["config"] is level.consumer
    processor = run.processor_spec()
    assert processor["consumer_config"] is PROCESSOR_CONSUMER
    assert processor["config"] == producer_config(scenario, level)
    assert run.producer_spec([1, 2])["config"] == producer_config(scenario, level)


def test_a_level_that_runs_as_something_else_is_labelled_so(tmp_path):
    """aborted-transaction makes every producer transactional: at-least-once is a reader."""
    from engine.face import LevelResult
    from pages._run_view import level_heading

    scenario = load_scenario(REPO_ROOT / "scenarios" / "aborted-transaction.yaml")
    cluster = ExternalCluster("127.0.0.1:1")
    labels = {
        name: LevelRun(scenario, LEVELS[name], cluster, "run", tmp_path).label()
        for name in scenario.levels
    }
    assert labels == {
        "at-least-once": "a read_uncommitted reader of a transactional producer",
        "exactly-once": None,
    }
    counts = {k: 0 for k in ("sent", "acked", "delivered", "duplicates", "lost", "reordered")}
    recorded = {**counts, "aborted_visible": 0, "latency_ms": {}}
    result = LevelResult.from_json("at-least-once", {**recorded, "label": labels["at-least-once"]})
    assert level_heading("at-least-once", result) == (
        "at-least-once: a read_uncommitted reader of a transactional producer"
    )
    unlabelled = LevelResult.from_json("exactly-once", {**recorded, "label": None})
    assert level_heading("exactly-once", unlabelled) == "exactly-once"
    other = load_scenario(REPO_ROOT / "scenarios" / "ack-loss.yaml")
    assert LevelRun(other, LEVELS["at-least-once"], cluster, "r", tmp_path).label() is None
