"""The projector view: the dashboard sized for a projector and read from the back of a room.

Any browser may switch it on, a viewer's as well as the presenter's: it changes how a page
looks, never who may act ("the presenter" is the one browser allowed to act, pages._roles).
On with the sidebar's button or with `?projector=1` in the address (a link a teacher can keep),
off with the button at the top right of the page or `?projector=0`. It hides the sidebar
and Streamlit's own chrome and enlarges every rem-sized text; the run view then opens on one
card per level with the numbers its scenario teaches (pages._run_view.render_verdict_cards).

The view was called "presenter mode" before; an old link's `?presenter=1` still works and is
rewritten to `?projector=1`. (This module keeps its name: pages._run_view imports it.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
import streamlit as st

PARAM = "projector"
OLD_PARAM = "presenter"  # links made while the view was called presenter mode
STATE = "projector_view"
SEEN = "projector_param_seen"  # the address's value last applied, so a toggle can override it
ON_WORDS = ("1", "true", "on", "yes")

# Streamlit sizes its type in rem: a larger root size enlarges all of it together. The
# sidebar, the toolbar and the header strip take room the projector needs for the numbers.
STYLE = """<style>
html { font-size: 20px; }
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"],
[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"] {
  display: none !important;
}
.stMainBlockContainer { padding-top: 1.2rem !important; max-width: 100% !important; }
.stMainBlockContainer h1 { font-size: 2rem !important; padding: 0 !important; }
/* The way out sits at the top right, in the page's flow: floating, it covered a card. */
.st-key-projector_leave { display: flex; justify-content: flex-end; }
/* Read from the back row: a number's label and a table's cell at 1.2rem, 24 px (ROOM_PX). */
html body [data-testid='stMetricLabel'] p, html body .lab-label, html body .lab-level,
html body [data-testid='stTable'] td, html body [data-testid='stTable'] th,
html body [data-testid='stProgress'] p {
  font-size: 1.2rem !important;
}
</style>"""


def presenter_on() -> bool:
    """Whether this session shows the projector view (the address wins when it changes)."""
    old = st.query_params.get(OLD_PARAM)
    if old is not None:  # an old link: the same switch under its new name
        del st.query_params[OLD_PARAM]
        st.query_params.setdefault(PARAM, old)
    param = st.query_params.get(PARAM)
    if param is not None and param != st.session_state.get(SEEN):
        st.session_state[SEEN] = param
        st.session_state[STATE] = param.lower() in ON_WORDS
    return bool(st.session_state.get(STATE, False))


def _set(on: bool) -> None:
    st.session_state[STATE] = on
    st.session_state[SEEN] = "1" if on else "0"
    st.query_params[PARAM] = st.session_state[SEEN]


def presenter_controls() -> bool:
    """Draw the way in (sidebar) or out (top of the page) and the style; True when on."""
    on = presenter_on()
    if on:
        st.markdown(STYLE, unsafe_allow_html=True)
        st.query_params[PARAM] = "1"  # kept in the address across pages, for a reload
        st.button("Leave the projector view", key="projector_leave", on_click=_set, args=(False,))
    else:
        st.sidebar.button(
            "📽️ Projector view",
            key="projector_enter",
            on_click=_set,
            args=(True,),
            help="Hides the sidebar and Streamlit's menus and enlarges the type for a "
            "projector; after a run, one card per level shows the numbers that matter. "
            "Any browser may switch it on; it changes nothing of who may act. `?projector=1` in "
            "the address does the same.",
        )
    return on


# The smallest type on the projector, in CSS px: every number's label, chart tag and table
# cell (issue 62: read from the back of a room at 1080p). STYLE's 1.2rem is this at 20 px.
ROOM_PX = 24
DESK_PX = 16  # a chart's type on an engineer's screen


def room_sized(figure: go.Figure, px: int = ROOM_PX) -> go.Figure:
    """`figure` with every text at least `px`: its default, axes, legend, titles and notes.

    Plotly has no minimum font size, so each place that may carry its own size is raised.
    A figure whose layout depends on its type's size (the run view's timeline, which rows
    its labels in) is drawn at the size instead: pages._run_view.timeline(type_px=...).
    """

    def at_least(size: float | None) -> int:
        return max(int(size or 0), px)

    figure.update_layout(font_size=at_least(figure.layout.font.size))
    figure.update_layout(legend_font_size=at_least(figure.layout.legend.font.size))
    figure.update_layout(title_font_size=at_least(figure.layout.title.font.size))
    for axis in (*figure.select_xaxes(), *figure.select_yaxes()):
        axis.update(tickfont_size=at_least(axis.tickfont.size))
        axis.update(title_font_size=at_least(axis.title.font.size))
    for note in figure.layout.annotations:
        note.update(font_size=at_least(note.font.size))
        # Inline small type (a raw name's span) is for the engineer's screen only.
        note.update(text=_SMALL_SPAN.sub("", note.text or ""))
    figure.for_each_trace(_bigger_text(at_least))
    return figure


_SMALL_SPAN = re.compile(r"\s*<span style='font-size:\d+px[^']*'>.*?</span>")


def _bigger_text(at_least: Callable[[float | None], int]) -> Callable[[Any], None]:
    def bump(trace: Any) -> None:
        if "textfont" in trace:
            trace.update(textfont_size=at_least(trace.textfont.size))

    return bump


def room_chart(
    figure: go.Figure, *, where: Any = None, projector: bool | None = None, **kwargs: Any
) -> None:
    """st.plotly_chart, in projector type when the projector view is on (`projector`, given
    by a cached drawing whose key it is; else this session's view)."""
    target = where if where is not None else st
    on = presenter_on() if projector is None else projector
    target.plotly_chart(room_sized(figure) if on else figure, **kwargs)


def room_table(
    data: Any,
    *,
    where: Any = None,
    hide_index: bool | None = None,
    projector: bool | None = None,
    **kwargs: Any,
) -> None:
    """st.dataframe, or on the projector st.table, whose cells take the projector's type.

    st.dataframe draws its cells on a canvas at a size no page style reaches; st.table is
    HTML, so STYLE sets its cells at 1.2rem. The keyword arguments only st.dataframe knows
    (height, width, column_config...) apply at the desk. `projector` as for room_chart.
    """
    target = where if where is not None else st
    if presenter_on() if projector is None else projector:
        target.table(data, hide_index=hide_index)
    else:
        target.dataframe(data, hide_index=hide_index, **kwargs)
