"""The idempotency-key level against real databases: SQLite, and a real PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest

from engine.runner import run_scenario
from engine.scenario import list_scenarios, load_scenario
from tests.postgres import PostgresServer

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def test_duplicates_reach_the_log_but_the_effect_happens_once_in_postgres(
    cluster1, postgres, monkeypatch
):
    monkeypatch.setenv("LAB_DEDUP_DSN", postgres.dsn)
    scenario = load_scenario(list_scenarios()["ack-loss"])
    output = run_scenario(scenario, cluster1, levels=["idempotency-key"])
    result = output["results"]["idempotency-key"]
    assert result["effect_store"] == "postgres"
    assert result["duplicates"] == 1  # the lost ack's retry is in the log...
    assert result["effects"] == 20  # ...but applied once
    assert result["duplicates_absorbed"] == 1
    # Counted again with a separate client, straight from the table.
    with psycopg.connect(postgres.dsn) as conn:
        rows = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT id) FROM lab_effects WHERE run_id = %s",
            (output["run_id"],),
        ).fetchone()
    assert rows == (20, 20)
