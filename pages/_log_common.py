"""What the Log views' tabs share: full-height coloured tables, the cluster-not-ready note,
and the topic picker.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.face import (
    Cluster,
    list_topic_names,
)
from pages._presenter import room_table

ROW_HEIGHT = 35  # st.dataframe's row height: tables are sized to show every row at once


def not_ready() -> None:
    st.info(
        "The cluster is not ready: start it in the sidebar (or with "
        "`python -m engine cluster up`). Recorded runs work without one.",
        icon="⏳",
    )


def table(df: pd.DataFrame, colors: dict[str, str]) -> None:
    """A full-height table, each row coloured by its hidden `_state` column."""

    df = no_none(df).reset_index(drop=True)
    height = min(ROW_HEIGHT * (len(df) + 1) + 3, 900)
    states = df.pop("_state").astype(str)

    def paint(row: pd.Series) -> list[str]:
        color = colors.get(states[row.name], "")
        return [f"background-color: {color}" if color else ""] * len(row)

    # The state column is left out, not hidden: st.table (the projector's) shows every column.
    room_table(df.style.apply(paint, axis=1), hide_index=True, height=height)


EMPTY = "—"  # an empty cell on the projector: a dash, never "None"


def no_none(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every empty cell (None, NaN) shown as a dash.

    Whole-number columns with gaps would otherwise show as floats (2.000000) or as "None".
    A column with a dash is all text: Arrow cannot hold numbers and a dash in one column,
    and Streamlit's fallback logs a traceback for each such table.
    """
    df = df.copy()
    for column in df.columns:
        values = df[column]
        if not values.isna().any() or column == "_state":
            continue
        if values.dtype == float and values.dropna().apply(float.is_integer).all():
            values = values.astype("Int64")
        df[column] = [EMPTY if pd.isna(value) else str(value) for value in values]
    return df


def topic_picker(cluster: Cluster, key: str) -> tuple[str, int] | None:
    """A topic of the cluster (the one used last preselected) and a partition number."""
    # The cost benchmark's scratch topics (cost-tp-..., cost-lat-...) are deleted as it goes,
    # but a deletion can lag or a stopped run leave some: they are not the room's to browse.
    topics = [t for t in list_topic_names(cluster.direct_bootstrap) if not t.startswith("cost-")]
    if not topics:
        st.info("The cluster has no topics yet: run the compaction or transaction demo first.")
        return None
    # A topic the page just made (compaction, demo) is picked once; then the user's choice.
    newest = st.session_state.get("logs_last_topic")
    if newest in topics and st.session_state.get(f"{key}_newest") != newest:
        st.session_state[key] = st.session_state[f"{key}_newest"] = newest
    elif st.session_state.get(key) not in topics:
        st.session_state[key] = topics[-1]
    left, right = st.columns([4, 1])
    topic = left.selectbox("Topic", topics, key=key)
    partition = int(right.number_input("Partition", 0, 999, 0, key=f"{key}_partition"))
    return topic, partition
