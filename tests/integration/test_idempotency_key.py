"""The idempotency-key level against real databases: SQLite, and a real PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest

from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario
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


def test_a_missing_postgres_is_one_line_and_the_other_levels_are_kept(cluster1, monkeypatch):
    from engine.cluster.ports import free_ports
    from engine.run import record

    # A port nothing listens on: what a user meets when LAB_DEDUP_DSN's server is not up.
    dsn = f"postgresql://lab:s3cret@127.0.0.1:{free_ports(1)[0]}/lab"
    monkeypatch.setenv("LAB_DEDUP_DSN", dsn)
    scenario = load_scenario(list_scenarios()["ack-loss"])
    output = run_scenario(scenario, cluster1, levels=["at-least-once", "idempotency-key"])

    assert list(output["results"]) == ["at-least-once"]
    assert output["results"]["at-least-once"]["duplicates"] == 1  # the level ran in full
    why = output["not_run"]["idempotency-key"]
    assert "\n" not in why and "Traceback" not in why
    assert why.startswith("The idempotency-key level keeps its keys in the PostgreSQL")
    assert "s3cret" not in why and "lab:***@127.0.0.1" in why
    assert "Connection refused" in why
    assert "`docker compose up -d postgres`" in why and "unset LAB_DEDUP_DSN" in why
    recorded = record.load_run(output["run_id"])
    assert recorded.meta["status"] == "complete"
    assert recorded.meta["not_run"] == {"idempotency-key": why}
    assert list(recorded.results) == ["at-least-once"]


def test_the_command_line_prints_the_kept_results_then_one_error_line(cluster1, tmp_path):
    import os
    import subprocess
    import sys

    from engine.base import paths
    from engine.cluster.ports import free_ports

    env = {
        **os.environ,
        "LAB_DEDUP_DSN": f"postgresql://lab:x@127.0.0.1:{free_ports(1)[0]}/lab",
    }
    done = subprocess.run(
        [
            sys.executable, "-m", "engine", "run", "scenarios/ack-loss.yaml", "--quiet",
            "--guarantee", "at-least-once", "--guarantee", "idempotency-key",
        ],
        capture_output=True, text=True, env=env, cwd=paths.REPO_ROOT, timeout=240,
    )  # fmt: skip
    assert done.returncode == 2
    table = done.stdout.splitlines()
    assert table[1].split()[0] == "level" and table[2].split()[0] == "at-least-once"
    assert not any(line.startswith("idempotency-key") for line in table)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert errors[-1].startswith("error: The idempotency-key level keeps its keys")
    assert "Traceback" not in done.stderr
