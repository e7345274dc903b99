"""A Kafka Streams run's state store beside the truth: each account's payments as the store
counted them, and as they were made ("account 7: 6 payments counted, 3 made").

The store's counts are read from the run's own history
(engine.scenarios.streams.store_at_end: what the last instance restored from the changelog, plus
what it processed after), the truth from the ledger; tests/integration/test_streams.py checks the
first against the results kcat reads.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from engine.face import (
    STREAMS_LEVELS,
    AccountTotals,
    Event,
    LevelResult,
    RecordedRun,
    payments_made,
    process_words,
    store_at_end,
)
from pages._presenter import room_table


def store_rows(history: list[dict[str, Any]], ledger: list[int]) -> list[dict[str, Any]] | None:
    """One row per account: counted and made, payments and amounts; None without a store.
    (The history's events are free-form JSON; the rows are the table's, by column.)"""
    store = store_at_end(history)
    if store is None:
        return None
    made = payments_made(ledger)
    rows = []
    for account in sorted(set(made) | set(store)):
        counted = store.get(account, AccountTotals(0, 0))
        truth = made.get(account, AccountTotals(0, 0))
        rows.append(
            {
                "account": account,
                "payments counted": counted.count,
                "payments made": truth.count,
                "amount counted": counted.sum,
                "amount made": truth.sum,
                "right": verdict(counted, truth),
            }
        )
    return rows


def verdict(counted: AccountTotals, made: AccountTotals) -> str:
    if counted == made:
        return "✅"
    return "❌ over-counted" if counted.count > made.count else "❌ under-counted"


def restore_line(history: list[dict[str, Any]]) -> str | None:
    """What the replacement restored from the changelog, in the room's words."""
    restored = [e for e in history if e.get("ev") == Event.RESTORED and "#" in str(e.get("proc"))]
    if not restored:
        return None
    event = restored[-1]
    return (
        f"{process_words(event['proc'])} restored {event.get('records')} records of the state "
        "store from "
        f"its changelog topic, then went on from the last committed input offset."
    )


def render_store_counts(run: RecordedRun, results: dict[str, LevelResult]) -> None:
    """The state store beside the truth, one column per Kafka Streams level of the run."""
    shown = [lv for lv in results if lv in STREAMS_LEVELS and lv in run.levels]
    if not shown:
        return
    with st.expander("The state store beside the truth", expanded=True):
        columns = st.columns(len(shown))
        for column, level in zip(columns, shown, strict=True):
            recorded = run.levels[level]
            ledger = [v["id"] for v in recorded.verdicts]
            rows = store_rows(recorded.history, ledger)
            with column:
                st.markdown(f"**{level}**")
                if rows is None:
                    st.caption("No Kafka Streams instance opened its store in this run.")
                    continue
                if (line := restore_line(recorded.history)) is not None:
                    st.markdown(f"- {line}")
                wrong = [r for r in rows if r["right"] != "✅"]
                for row in wrong[:1]:
                    st.markdown(
                        f"- Account {row['account']}: **{row['payments counted']} payments "
                        f"counted, {row['payments made']} made**."
                    )
                room_table(pd.DataFrame(rows), hide_index=True, width="stretch")
