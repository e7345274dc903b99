"""The sink: a consumer at the level's isolation that records when each message became visible.

It subscribes in its own consumer group, reads every partition of its topic from the
beginning (a new group, `auto.offset.reset=earliest`), and writes a `consumed` event with
the message id, partition, offset and the moment it was read, until it is told to stop.
End-to-end latency is that moment minus the message's `created_at`.

With `dedup_store` (the idempotency-key level) it also applies each message's effect to a
real database (SQLite, or PostgreSQL under docker-compose) keyed by message id: an INSERT
that the primary key turns into a no-op for an id already applied. Events `effect_applied`
and `effect_skipped` record which it was.
"""

from __future__ import annotations

import sqlite3
import time

from confluent_kafka import Consumer

from engine.base.values import parse_value
from engine.model.events import Event
from engine.model.history import HistoryWriter
from engine.roles.common import StopFlag, client_logger, load_spec
from engine.roles.registry import Role
from engine.roles.specs import SinkSpec

ROLE = Role(
    name="sink",
    entry="sink",
    java=False,
    part="sink",
    spec_model=SinkSpec,
    events=frozenset({Event.START, Event.ASSIGNED, Event.CONSUMED, Event.DONE}),
    about="The downstream consumer the level is judged by, at its isolation (librdkafka).",
)


def run(spec: SinkSpec) -> int:
    history = HistoryWriter(spec.history, spec.name)
    stop = StopFlag()
    conf = {
        **spec.config,  # the level's consumer settings, as the Guarantees page shows them
        "bootstrap.servers": spec.bootstrap,
        "client.id": spec.client_id,
        "group.id": spec.group,
    }
    consumer = Consumer({**conf, "logger": client_logger()})
    # A downstream application: it subscribes in its own consumer group and, being new,
    # starts from the beginning of every partition.
    consumer.subscribe(
        [spec.topic],
        on_assign=lambda _, parts: history.write(
            Event.ASSIGNED, partitions=[tp.partition for tp in parts]
        ),
    )
    store = open_effect_store(spec)
    kind = (spec.dedup_store or {}).get("kind")
    history.write(Event.START, isolation=conf["isolation.level"], config=conf, dedup_store=kind)
    try:
        while not stop.stopped:
            msg = consumer.poll(0.05)  # short: the run waits for the sink to stop
            if msg is None or msg.error():
                continue
            value = parse_value(msg.value())
            history.write(
                Event.CONSUMED,
                id=value["id"] if value else None,
                created_at=value.get("created_at") if value else None,
                partition=msg.partition(),
                offset=msg.offset(),
            )
            if store is not None and value is not None:
                applied = store.apply(value["id"], msg.partition(), msg.offset())
                history.write("effect_applied" if applied else "effect_skipped", id=value["id"])
        history.write(Event.DONE)
        return 0
    finally:
        consumer.close()


class SqliteEffectStore:
    """The consumer-side idempotency key: one row per message id, in SQLite.

    The check and the effect are one statement in one database transaction, so a message
    delivered twice is applied once however the consumer interleaves with a crash.
    """

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, partition INTEGER, "
            "offset INTEGER, applied_at REAL)"
        )

    def apply(self, message_id: int, partition: int, offset: int) -> bool:
        cursor = self.db.execute(
            "INSERT INTO effects VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (message_id, partition, offset, time.time()),
        )
        return cursor.rowcount == 1


class PostgresEffectStore:
    """The same idempotency key in PostgreSQL (the docker-compose setup), keyed per run."""

    def __init__(self, dsn: str, run_id: str, level: str) -> None:
        import psycopg

        self.db = psycopg.connect(dsn, autocommit=True)
        self.key = (run_id, level)
        self.db.execute(POSTGRES_SCHEMA)

    def apply(self, message_id: int, partition: int, offset: int) -> bool:
        cursor = self.db.execute(
            "INSERT INTO lab_effects VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (run_id, level, id) DO NOTHING",
            (*self.key, message_id, partition, offset, time.time()),
        )
        return cursor.rowcount == 1


POSTGRES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS lab_effects (run_id TEXT, level TEXT, id BIGINT, "
    'partition INT, "offset" BIGINT, applied_at DOUBLE PRECISION, '
    "PRIMARY KEY (run_id, level, id))"
)


def open_effect_store(spec: SinkSpec) -> SqliteEffectStore | PostgresEffectStore | None:
    store = spec.dedup_store
    if not store:
        return None
    if store["kind"] == "postgres":
        return PostgresEffectStore(store["dsn"], spec.run_id, spec.level)
    return SqliteEffectStore(store["path"])


if __name__ == "__main__":
    raise SystemExit(run(load_spec(SinkSpec)))
