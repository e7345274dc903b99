"""The websocket viewer asks for a page as a browser does, and reads what the server sends."""

from __future__ import annotations

import os
import time

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks.room_load import METRICS_NOT_YET, METRICS_SHOWN, metrics_writes
from benchmarks.ws_viewer import WsViewer, element_text, page_request


def test_a_page_is_asked_for_by_its_url_path() -> None:
    state = page_request("metrics").rerun_script
    assert state.page_name == "metrics"
    assert state.page_script_hash == ""
    assert state.fragment_id == ""
    assert not state.is_auto_rerun


def test_a_fragment_rerun_carries_the_page_hash_and_the_fragment() -> None:
    state = page_request("", "abc123", fragment_id="frag", auto=True).rerun_script
    assert (state.page_script_hash, state.fragment_id, state.is_auto_rerun) == (
        "abc123",
        "frag",
        True,
    )


def forward(kind: str, **fields) -> bytes:
    msg = ForwardMsg()
    if kind == "navigation":
        page = msg.navigation.app_pages.add()
        page.url_pathname, page.page_script_hash = fields["path"], fields["hash"]
    elif kind == "script_finished":
        msg.script_finished = ForwardMsg.ScriptFinishedStatus.Value(fields["status"])
    elif kind == "alert":
        msg.delta.new_element.alert.body = fields["body"]
    elif kind == "markdown":
        msg.delta.new_element.markdown.body = fields["body"]
    elif kind == "page_not_found":
        msg.page_not_found.page_name = ""
    return msg.SerializeToString()


def test_the_viewer_learns_its_page_hash_and_when_its_page_loaded() -> None:
    viewer = WsViewer("http://127.0.0.1:1", "metrics", (METRICS_SHOWN, METRICS_NOT_YET))
    viewer._read(forward("navigation", path="failure_lab", hash="other"))
    viewer._read(forward("navigation", path="metrics", hash="mine"))
    assert viewer.page_hash == "mine"
    assert viewer._rerun(fragment_id="f").rerun_script.page_script_hash == "mine"
    viewer._read(forward("script_finished", status="FINISHED_FRAGMENT_RUN_SUCCESSFULLY"))
    assert viewer.loaded_at is None  # a fragment's run is not the page's
    viewer._read(forward("script_finished", status="FINISHED_SUCCESSFULLY"))
    first = viewer.loaded_at
    assert first is not None
    viewer._read(forward("script_finished", status="FINISHED_SUCCESSFULLY"))
    assert viewer.loaded_at == first


def test_the_viewer_notes_what_its_metrics_page_drew() -> None:
    viewer = WsViewer("http://127.0.0.1:1", "metrics", (METRICS_SHOWN, METRICS_NOT_YET))
    viewer._read(forward("markdown", body="Spark reads the run's topics from Kafka"))
    assert viewer.found == {}  # the page's subtitle is not a result
    viewer._read(forward("markdown", body="Spark read **Kafka at x** (computed at 10:00:00)."))
    assert set(viewer.found) == {METRICS_SHOWN}
    viewer._read(forward("alert", body=f"{METRICS_NOT_YET}. Spark computes them once"))
    assert set(viewer.found) == {METRICS_SHOWN, METRICS_NOT_YET}
    viewer._read(forward("page_not_found"))
    assert viewer.page_not_found


def test_element_text_reads_markdown_and_alerts_only() -> None:
    msg = ForwardMsg()
    msg.delta.new_element.alert.body = "hello"
    assert element_text(msg.delta.new_element) == "hello"
    msg.delta.new_element.markdown.body = "md"
    assert element_text(msg.delta.new_element) == "md"
    msg.delta.new_element.empty.SetInParent()
    assert element_text(msg.delta.new_element) == ""


def test_metrics_writes_are_those_since_the_moment(tmp_path) -> None:
    now = time.time()
    for run, age in (("old", 100), ("new", 0), ("none", None)):
        (tmp_path / run).mkdir()
        if age is not None:
            path = tmp_path / run / "metrics.json"
            path.write_text("{}")
            os.utime(path, (now - age, now - age))
    (tmp_path / "none" / "run.json").write_text("{}")
    assert metrics_writes(tmp_path, now - 10) == ["new"]
    assert metrics_writes(tmp_path, now - 1000) == ["new", "old"]
    assert metrics_writes(tmp_path / "missing", now) == []
