"""Dashboard plumbing shared by the pages: the one cluster service, and error display.

The cluster service (engine.cluster.service) is created once per server process
(`st.cache_resource`), so every browser session sees the same cluster; only the presenter
may change it (pages._roles.require_presenter).
"""

from __future__ import annotations

import streamlit as st

from engine.face import (
    ClusterService,
    LabError,
    NodeAdvice,
    SharedExclusiveLock,
    node_advice,
)
from pages._keep import kept
from pages._roles import require_presenter

# The service's names, as the pages and their tests take them from here.
__all__ = ["ClusterService", "NodeAdvice", "SharedExclusiveLock", "node_advice"]


APP_MARK = "_lab_app_ran"


def mark_app_ran() -> None:
    st.session_state[APP_MARK] = True


def require_app() -> None:
    """Make sure a page runs under app.py's st.navigation, on the page its URL names.

    Streamlit decides once per server process whether an app uses the old `pages/` folder
    mode: until a main script has called `st.navigation`, a `pages/` folder beside app.py
    makes Streamlit build a navigation of its own from the folder's files and run the page a
    URL names without app.py (streamlit/runtime/scriptrunner/script_runner.py, `_mpa_v1`,
    and `PagesManager.uses_pages_directory`). So the first request of a new server that
    names a page, such as a link a teacher hands out, arrives here without app.py. Turning
    that mode off and rerunning sends the same page through app.py: a page's hash is its URL
    path in both modes, so the rerun keeps the page and the address. (Sending the browser to
    app.py instead would open the home page.)
    """
    if st.session_state.get(APP_MARK):
        return
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
    # Otherwise the page runs alone on purpose (Streamlit's AppTest of one page file).


@kept
def cluster_service() -> ClusterService:
    return ClusterService(authorize=require_presenter)


def show_error(exc: Exception) -> None:
    """One sentence for the room; never a traceback."""
    if isinstance(exc, LabError):
        st.error(str(exc), icon="⚠️")
    else:
        st.error(
            f"Something went wrong: {exc}. The terminal running the dashboard has details.",
            icon="⚠️",
        )
