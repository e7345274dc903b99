"""AppTest checks of the Free play page with no cluster (the browser test runs it on one)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from engine.base import paths

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


class _Settings:
    levels = ("at-most-once", "at-least-once")
    broker_faults = True


class _RunningSession:
    """Stands in for engine.run.freeplay.FreePlay mid-stream: what the page reads of it."""

    active = True
    phase = "running"
    stage = "Streaming"
    run_id = "20261125-000000-free-play"
    settings = _Settings()
    killed_node = None
    restart_due = None
    notices = ()
    cluster = None

    def remaining_s(self) -> float:
        return 30.0

    def refused(self, kind: str) -> str | None:
        return None


class _QuietWatch:
    def poll(self) -> list:
        return []


def test_free_play_running_draws_without_a_duplicate_key(monkeypatch):
    """Issue 33: on every start the page showed StreamlitDuplicateElementKey 'fp_restart'.

    The restart-delay slider and the "restart the broker" strike button had the same key; both
    are drawn in the script run that follows a start, while the session is running.
    """
    from pages._shared import cluster_service

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    (paths.state_dir() / "current.json").unlink(missing_ok=True)
    cluster_service.clear()
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.session_state["free_play"] = _RunningSession()
    at.session_state["free_play_watch"] = _QuietWatch()
    at.switch_page("pages/free_play.py").run()
    assert not at.exception, [e.message for e in at.exception]
    labels = {b.label for b in at.button}
    assert "🔁 Restart the broker now" in labels  # the strike buttons were drawn
    assert at.slider(key="fp_restart").disabled  # and so was the slider, beside them
