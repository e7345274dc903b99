"""The Kafka failure lab's dashboard: `streamlit run app.py` (or `./lab dashboard`)."""

from __future__ import annotations

import streamlit as st

from pages.cluster_panel import render_cluster_panel

st.set_page_config(page_title="Kafka failure lab", page_icon="🧪", layout="wide")

navigation = st.navigation([st.Page("pages/home.py", title="Guarantees", icon="🛡️", default=True)])
render_cluster_panel()
navigation.run()
