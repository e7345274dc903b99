"""AppTest checks of the "Cost of guarantees" page (no browser; the page runs for real).

Once app.py lists the page in st.navigation, the tests open it the way a browser does (app.py
first, then switch_page); until then they run the page script alone, as if app.py had run.
"""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.cost import published, report
from pages._shared import APP_MARK, cluster_service

APP = paths.REPO_ROOT / "app.py"
PAGE = "pages/cost.py"


def open_page(timeout: float) -> AppTest:
    if PAGE in APP.read_text():
        at = AppTest.from_file(str(APP), default_timeout=timeout).run()
        at.switch_page(PAGE).run()
        return at
    at = AppTest.from_file(str(paths.REPO_ROOT / PAGE), default_timeout=timeout)
    at.session_state[APP_MARK] = True
    return at.run()


@pytest.fixture
def no_cluster_service():
    """A fresh, idle cluster service: earlier AppTests in this process may have left one ready."""
    cluster_service.clear()
    yield
    cluster_service.clear()


def test_the_page_shows_the_published_claims_without_a_cluster(monkeypatch, no_cluster_service):
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "0")
    at = open_page(30)
    assert not at.exception
    assert [t.value for t in at.title][-1] == "Cost of guarantees"
    claims = at.table[0].value  # a static table: long sources wrap instead of running off
    assert list(claims.index) == [c.what for c in published.CLAIMS]
    assert list(claims["published"]) == [c.figure for c in published.CLAIMS]
    assert published.COURSE_EOS in set(claims["source"])
    run = at.button(key="cost_run")
    assert run.disabled, "no cluster: the quick run cannot start"
    # The first screen answers the question; what only the benchmark's author needs (its
    # command line, load averages) stays off the page, and no heading is said twice.
    headings = [h.value for h in at.subheader]
    assert headings[0] == "What each guarantee costs here"
    assert len(headings) == len(set(headings))
    shown = " ".join(m.value for m in at.markdown)
    assert "measured here" in shown and "Produced by" not in shown
    assert ".venv/bin/python -m benchmarks" not in shown


@pytest.mark.kafka
def test_the_quick_run_shows_measurements_beside_the_claims(monkeypatch, cluster1):
    monkeypatch.setenv("LAB_AUTOSTART", "1")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "0")
    pointer = paths.state_dir() / "current.json"
    pointer.write_text(json.dumps({"backend": "local", "name": cluster1.name}))
    try:
        at = open_page(180)
        assert not at.exception
        at.number_input(key="cost_messages").set_value(500)
        at.number_input(key="cost_rounds").set_value(2)
        at.run()
        at.button(key="cost_run").click().run()
        assert not at.exception
        assert not at.error, [e.value for e in at.error]
        result = at.session_state["cost_quick"]
        assert result.conditions["nodes"] == 1
        # The page judges this run from its own rounds, whichever way it went.
        judged = report.quick_steadiness(result.matrix)
        said = at.success if judged.comparable else at.warning
        assert [m.value for m in said][-1].startswith(report.steadiness_text(judged))
        tables = [d.value for d in at.dataframe] + [t.value for t in at.table]
        beside = next(t for t in tables if "measured here" in t.columns)
        assert len(beside) == len(published.CLAIMS)
        assert not beside["measured here"].str.contains("not measured").any()
        setups = next(t for t in tables if "setup" in t.columns)
        assert "transactional (100 ms)" in set(setups["setup"])
        assert any("isolation" in t.columns for t in tables)
    finally:
        pointer.unlink(missing_ok=True)
