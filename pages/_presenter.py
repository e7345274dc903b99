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
