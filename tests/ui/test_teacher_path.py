"""The teacher's path in the dashboard: where to start, the sections, the grouped scenarios and
the projector view's name (AppTest, without a cluster)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from engine.base import paths
from engine.teach.lesson import list_lessons, load_lesson
from engine.teach.teaching import FIRST_LESSON, GROUPS, grouped_scenario_names, lesson_nodes

APP = str(paths.REPO_ROOT / "app.py")


@pytest.fixture
def app(monkeypatch) -> AppTest:
    monkeypatch.setenv("LAB_AUTOSTART", "0")
    monkeypatch.setenv("LAB_SPARK_AUTOSTART", "0")
    from pages._roles import role_table

    role_table.clear()  # AppTest reuses one session id: a loopback session presents
    return AppTest.from_file(APP, default_timeout=30)


def shown(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.subheader, *at.markdown, *at.caption, *at.info])


def test_the_home_page_says_where_to_start_and_offers_the_lessons_cluster(app):
    at = app.run()
    assert not at.exception
    lesson = load_lesson(list_lessons()[FIRST_LESSON])
    nodes = lesson_nodes(lesson)
    text = shown(at)
    assert lesson.title in text
    assert f"**{lesson.minutes} minutes**, {len(lesson.steps)} steps" in text
    assert f"**{nodes}-node** cluster" in text
    # No cluster runs: the one button starts it with the lesson's nodes, before the class.
    assert f"This lesson needs a cluster of {nodes} nodes." in text
    assert f"Start a {nodes}-node cluster" in {b.label for b in at.button}


def test_the_failure_labs_picker_is_grouped_with_nodes_and_length(app):
    at = app.run()
    at.switch_page("pages/failure_lab.py").run()
    assert not at.exception
    picker = at.selectbox(key="lab_scenario")
    names = grouped_scenario_names()
    assert [option.split(" — ")[0] for option in picker.options] == names
    # The picker is in group order, not alphabetical (the first group is not a-z sorted).
    assert names != sorted(names)
    first = picker.options[0]
    assert first.startswith(f"{GROUPS[0].scenarios[0]} — {GROUPS[0].short} · 1 node · about ")
    assert any(" · 3 nodes · " in option for option in picker.options)
    picker.set_value("broker-failover").run()
    assert not at.exception
    text = shown(at)
    assert "**Replication: brokers that die.**" in text
    assert "Needs a cluster of 3 nodes; its recorded run took about" in text


def test_the_projector_view_is_named_so_and_an_old_presenter_link_still_opens_it(app):
    at = app.run()
    labels = {b.label for b in at.sidebar.button}
    assert "📽️ Projector view" in labels
    assert not any("resenter mode" in label for label in labels)
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["projector"] = "1"  # a link a teacher keeps
    at.run()
    assert not at.exception
    assert "Leave the projector view" in {b.label for b in at.button}
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["presenter"] = "1"  # a link made when it was called presenter mode
    at.run()
    assert not at.exception
    assert "Leave the projector view" in {b.label for b in at.button}
    assert at.query_params.get("projector") in ("1", ["1"])
    assert "presenter" not in at.query_params
