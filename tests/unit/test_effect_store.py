"""The idempotency key: a second delivery of the same id changes nothing (real SQLite)."""

from __future__ import annotations

import sqlite3

from engine.roles.sink import SqliteEffectStore as EffectStore


def test_an_id_is_applied_once_however_often_it_is_delivered(tmp_path):
    db = tmp_path / "effects.sqlite"
    store = EffectStore(str(db))
    assert store.apply(7, 0, 10) is True
    assert store.apply(7, 0, 11) is False  # the duplicate, stored at another offset
    assert store.apply(8, 0, 12) is True
    again = EffectStore(str(db))  # a restarted consumer keeps what was applied
    assert again.apply(7, 0, 13) is False
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, offset FROM effects ORDER BY id").fetchall() == [
            (7, 10),
            (8, 12),
        ]
