"""Footnotes for a story or a lesson step: where each claim comes from.

A room believes what it reads, and an engineer may ask "where does it say that?": every
story and explanation names its sources (a KIP, Kafka's or librdkafka's code or
documentation, or the lab's own test on a real broker), small, under the text.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from engine.scenario import Source


def footnote_markdown(sources: Sequence[Source]) -> str:
    """One line: "Sources: [1] label · [2] label", each a link, or a lab test's path."""
    parts = []
    for number, source in enumerate(sources, start=1):
        label = source.label.replace("[", "(").replace("]", ")")
        if source.url.startswith("https://"):
            parts.append(f"[{number}] [{label}]({source.url})")
        else:
            parts.append(f"[{number}] {label} (the lab's test `{source.url}`)")
    return "Sources: " + " · ".join(parts) if parts else ""


def render_sources(sources: Sequence[Source]) -> None:
    if text := footnote_markdown(sources):
        st.caption(text)
