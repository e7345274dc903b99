"""Footnotes for a story or a lesson step: where each claim comes from.

A room believes what it reads, and an engineer may ask "where does it say that?": every
story and explanation names its sources (a KIP, Kafka's or librdkafka's code or
documentation, or the lab's own test on a real broker), small, under the text.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from engine.face import (
    Source,
)


def footnote_markdown(sources: Sequence[Source]) -> str:
    """One line: "Sources: [1] label · [2] label", each a link; a lab test by its label only
    (its pytest id is for the curious, in footnote_tests, not for the projected line)."""
    parts = []
    for number, source in enumerate(sources, start=1):
        label = source.label.replace("[", "(").replace("]", ")")
        if source.url.startswith("https://"):
            parts.append(f"[{number}] [{label}]({source.url})")
        else:
            parts.append(f"[{number}] {label} (a test of the lab on a real broker)")
    return "Sources: " + " · ".join(parts) if parts else ""


def footnote_tests(sources: Sequence[Source]) -> str | None:
    """Where each cited test of the lab lives, for the footnote's hover help."""
    tests = [
        f"[{number}] {source.url}"
        for number, source in enumerate(sources, start=1)
        if not source.url.startswith("https://")
    ]
    return "The lab's tests, in its repository: " + "; ".join(tests) if tests else None


def render_sources(sources: Sequence[Source]) -> None:
    if text := footnote_markdown(sources):
        st.caption(text, help=footnote_tests(sources))
