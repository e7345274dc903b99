"""AppTest checks of the Free play page with no cluster (the browser test runs it on one)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from engine import paths

APP = str(paths.REPO_ROOT / "app.py")


def test_free_play_without_a_cluster_says_so_and_cannot_start(monkeypatch):
    from pages._shared import cluster_service

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    (paths.state_dir() / "current.json").unlink(missing_ok=True)
    cluster_service.clear()  # a server process with no cluster (an earlier test may have one)
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.switch_page("pages/free_play.py").run()
    assert not at.exception
    assert at.title[0].value == "Free play"
    start = next(b for b in at.button if b.label == "▶ Start free play")
    assert start.disabled
    assert any("The cluster is not ready yet" in i.value for i in at.info)
    # Each fault the buttons strike is named, for real, in the page's introduction.
    intro = at.markdown[0].value
    for words in ("SIGKILL", "SIGSTOP", "SIGCONT", "drops the broker's answer"):
        assert words in intro
