"""A viewer of Free play sees every number the presenter's table shows (issue 62)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def draw_stream_lane() -> None:
    import streamlit as st

    from engine.teach.live import LevelSnapshot
    from pages._live_view import LiveView

    snapshot = LevelSnapshot(
        "at-least-once", sent=40, acked=39, failed=1, read=45, outputs=44, seen=44, seen_ids=41
    )
    LiveView(st.container(), ["at-least-once"], "stream").draw([snapshot], "running")


def test_a_viewers_free_play_lane_shows_every_count_the_presenters_table_does():
    at = AppTest.from_function(draw_stream_lane).run()
    shown = {m.label: m.value for m in at.metric}
    assert shown == {
        "Sent": "40",
        "Acked": "39",
        "Failed": "1",
        "Reads by the processor": "45",
        "Outputs written": "44",
        "Seen by the sink": "44",
        "Seen more than once": "3",  # 44 sightings of 41 ids
    }
