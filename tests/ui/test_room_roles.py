"""Serving a room, in Streamlit's own test runner: who sees which control, and what a viewer's
session is refused on the server even when it calls the actions directly."""

from __future__ import annotations

import subprocess
import sys

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.teach.room import KEY_ENV

APP = str(paths.REPO_ROOT / "app.py")
KEY = "room-test-key-0123456789"


@pytest.fixture
def room(monkeypatch):
    """A dashboard bound to every interface, with a known presenter key and no cluster."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "0")
    from pages._follow import room_feed
    from pages._roles import role_table

    # AppTest gives every test the same session id: start each with no presenter known, and
    # with no run announced (the other tests' runs in this process would be).
    role_table.clear()
    room_feed.clear()
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield
    config.set_option("server.address", before)


def labels(at: AppTest) -> set[str]:
    return {b.label for b in at.button}


def texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.caption, *at.markdown, *at.info, *at.error])


def test_a_browser_without_the_key_is_a_viewer_with_no_control(room):
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "You are watching the presenter" in texts(at)
    # The home page tells a viewer the lesson's cluster, and gives only the presenter its button.
    assert "This lesson needs a cluster of" in texts(at)
    assert not any(label.startswith("Start a ") for label in labels(at))
    at.switch_page("pages/failure_lab.py").run()
    assert not at.exception
    assert "▶ Run" not in labels(at)
    assert [t.label for t in at.toggle] == ["Follow the presenter"]
    assert "has not started a run yet" in texts(at)
    # Not following: the page to look around in, still without Run.
    at.toggle(key="follow_lab").set_value(False).run()
    assert not at.exception
    assert "▶ Run" not in labels(at)
    assert at.selectbox(key="lab_scenario").value == "ack-loss"
    for page in ("pages/free_play.py", "pages/lesson.py", "pages/zombie.py", "pages/cost.py"):
        at.switch_page(page).run()
        assert not at.exception, page
        assert not {"▶ Start free play", "Lock in the prediction", "▶ Run the quick benchmark"} & (
            labels(at)
        ), page
        assert not any(label.startswith("▶ Run the zombie") for label in labels(at)), page


def test_a_wrong_key_gives_a_viewer_and_says_so(room):
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["key"] = "not-the-key"
    at.run()
    assert "That presenter key is not this dashboard's" in texts(at)
    assert "key" not in at.query_params


def test_the_presenter_link_makes_the_presenter_and_leaves_the_address(room):
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["key"] = KEY
    at.run()
    assert not at.exception
    assert "key" not in at.query_params  # gone from the address bar at once
    assert "You are watching" not in texts(at)
    at.switch_page("pages/failure_lab.py").run()  # another page, no key in its address
    assert "▶ Run" in labels(at)


VIEWER_CALLS = {
    "run": """
from engine.scenarios.scenario import list_scenarios, load_scenario
from pages._run_control import run_live
from pages._shared import cluster_service
scenario = load_scenario(list_scenarios()["ack-loss"])
st.session_state["out"] = run_live(cluster_service(), scenario, scenario.levels)
""",
    "node": """
from pages._shared import cluster_service
cluster_service().node_action("kill", 1)
""",
    "stop": """
from pages._shared import cluster_service
cluster_service().stop()
""",
    "restart": """
from pages._shared import cluster_service
cluster_service().restart(nodes=3)
""",
    "start": """
from pages._shared import cluster_service
cluster_service().ensure_started(nodes=1)
""",
}


@pytest.mark.parametrize("action", list(VIEWER_CALLS))
def test_a_viewer_calling_an_action_directly_is_refused_on_the_server(room, action, caplog):
    """What a crafted request could reach at most: the action's own entry point, called
    from a viewer's session. Each refuses before touching anything, and the refusal is
    logged."""
    from pages._shared import cluster_service

    service = cluster_service()
    state = service.state
    script = "import streamlit as st\n" + VIEWER_CALLS[action]
    at = AppTest.from_string(script, default_timeout=30).run()
    shown = [str(e.value) for e in at.error]
    refused = [str(e.value) for e in at.exception] + shown
    assert any("Only the presenter can" in text for text in refused), refused
    assert service.state == state
    assert "refused: a viewer's session" in caplog.text
    if action == "run":
        assert at.session_state["out"] is None


def test_a_room_with_an_empty_key_refuses_to_start_in_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", KEY_ENV: "", "LAB_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "engine", "dashboard", "--address", "0.0.0.0", "--port", "0"],
        cwd=paths.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "LAB_PRESENTER_KEY is empty" in lines[0], done.stderr


def test_a_container_published_on_loopback_is_one_persons_dashboard(monkeypatch):
    # docker-compose.yml's dashboard listens on 0.0.0.0 inside its container but is published
    # on the host's 127.0.0.1 only, and says so: no key is needed, and nobody is a viewer.
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        refused = AppTest.from_file(APP, default_timeout=30).run()
        assert "without a presenter key" in texts(refused)  # a real room with no key
        monkeypatch.setenv("LAB_PUBLISHED_ADDRESS", "127.0.0.1")
        at = AppTest.from_file(APP, default_timeout=30).run()
        assert not at.exception and not at.error
        assert "You are watching the presenter" not in texts(at)
        assert "No cluster is running." in texts(at)
        assert "Start" in labels(at)  # the presenter's control
    finally:
        config.set_option("server.address", before)


@pytest.fixture
def loopback(monkeypatch):
    """A dashboard on 127.0.0.1, as a presenter rehearses on their own machine."""
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "0")
    from pages._follow import room_feed
    from pages._roles import role_table

    role_table.clear()
    room_feed.clear()
    before = config.get_option("server.address")
    config.set_option("server.address", "127.0.0.1")
    yield
    config.set_option("server.address", before)
    # AppTest reuses one session id: a rehearsal viewer left in the table would make the
    # next test's loopback session a viewer too (seen: the Log views test found no buttons).
    role_table.clear()


def test_rehearsing_the_room_on_loopback_opens_a_viewers_tab(loopback):
    """On loopback every tab presents; one opened from "Rehearse the room" is a viewer for
    as long as it lives, so a second tab shows what the class will see."""
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "You are watching" not in texts(at)
    assert any(b.label == "👀 Rehearse the room" for b in at.get("link_button"))
    at.switch_page("pages/failure_lab.py").run()
    assert "▶ Run" in labels(at)

    role_table_clear()
    viewer = AppTest.from_file(APP, default_timeout=30)
    viewer.query_params["rehearse"] = "viewer"
    viewer.run()
    assert not viewer.exception
    assert "Rehearsal: this tab is a viewer" in texts(viewer)
    assert not any(b.label == "👀 Rehearse the room" for b in viewer.get("link_button"))
    viewer.switch_page("pages/failure_lab.py").run()  # the address no longer says so
    assert not viewer.exception
    assert "▶ Run" not in labels(viewer)
    assert [t.label for t in viewer.toggle] == ["Follow the presenter"]


def role_table_clear() -> None:
    from pages._roles import role_table

    role_table.clear()
