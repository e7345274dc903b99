"""The Kafka failure lab's dashboard: `streamlit run app.py` (or `./lab dashboard`)."""

from __future__ import annotations

import streamlit as st

from engine.face import (
    VIEWER,
    PresenterKeyError,
    recover,
)
from pages._keep import kept
from pages._presenter import presenter_controls
from pages._roles import guard_browser_messages, rehearsal_link, session_role, viewer_line
from pages._shared import mark_app_ran, show_error
from pages._spark import autostart_spark
from pages._whereabouts import follow_presenter, presenter_is_on
from pages.cluster_panel import render_cluster_panel

st.set_page_config(page_title="Kafka failure lab", page_icon="🧪", layout="wide")
mark_app_ran()
# Once per server process: end what a crashed dashboard left running, mark its runs interrupted.
# Kept, not cached: a browser's clear_cache must not run it again beside a live run.
kept(recover)()
guard_browser_messages()
# A card's label wraps rather than ending in "…": at 150% zoom four levels side by side leave
# each card little room, and "Delive…" teaches nothing. It wraps between words only
# ("Delivere d" teaches nothing either), and shrinks with the window to fit one word a line;
# a column's title does the same.
st.markdown(
    "<style>[data-testid='stMetricLabel'] * {white-space: normal !important; "
    "overflow: visible !important; text-overflow: clip !important; word-break: normal "
    "!important; overflow-wrap: normal !important; hyphens: none !important;}"
    "[data-testid='stMetricLabel'] {flex-wrap: wrap;}"  # the (?) moves under a long word
    "[data-testid='stMetricLabel'] > div {min-width: 0; max-width: 100%;}"
    "[data-testid='stMetricLabel'] p {font-size: clamp(0.72rem, 0.85vw, 0.875rem) !important;}"
    "[data-testid='stColumn'] h3 {font-size: clamp(1.05rem, 1.45vw, 1.5rem) !important; "
    "word-break: normal !important; overflow-wrap: normal !important; hyphens: none;}"
    "</style>",
    unsafe_allow_html=True,
)

# In sections, in the order a class meets them: the home page says where to start.
sections = {
    "Learn": [
        st.Page("pages/home.py", title="Start here", icon="🧭", default=True),
        st.Page("pages/lesson.py", title="Lesson", icon="🎓"),
    ],
    "Break things": [
        st.Page("pages/failure_lab.py", title="Failure lab", icon="💥"),
        st.Page("pages/free_play.py", title="Free play", icon="🎮"),
        st.Page("pages/zombie.py", title="Zombie fencing", icon="🧟"),
    ],
    "Look inside": [
        st.Page("pages/log_views.py", title="Log views", icon="📜"),
        st.Page("pages/replay.py", title="Replay", icon="⏪"),
    ],
    "Measure": [
        st.Page("pages/metrics.py", title="Metrics", icon="📊"),
        st.Page("pages/cost.py", title="Cost of guarantees", icon="💰"),
    ],
}
navigation = st.navigation(sections)
# Serving a room: a viewer is told so on every page, and follows the presenter from page to
# page unless it chose to look elsewhere; a room with no key serves nothing.
try:
    if session_role() == VIEWER:
        st.caption(f"👀 {viewer_line()}")
        pages = {page.url_path: page for section in sections.values() for page in section}
        follow_presenter(navigation, pages)
    else:
        presenter_is_on(navigation)
except PresenterKeyError as exc:
    show_error(exc)
    st.stop()
render_cluster_panel()
with st.sidebar:
    rehearsal_link()
presenter_controls()  # the projector view's layout; before the page draws
autostart_spark()  # the JVM takes 13-20 s; by the time someone opens Metrics it is up
navigation.run()
