"""AppTest checks of the dashboard pages (no browser; the page scripts run for real)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from engine import paths
from engine.levels import LEVELS

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
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "local", "name": cluster1.name}))
    try:
        at = AppTest.from_file(APP, default_timeout=30).run()
        assert not at.exception
        assert not at.error
        text = markdown_text(at)
        assert "node 1: running · controller" in text
        assert any("local" in c.value for c in at.caption)
    finally:
        pointer.unlink(missing_ok=True)
