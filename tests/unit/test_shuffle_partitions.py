"""The shuffle partitions a judgement starts from: 2 for a class's runs (one task per core
of a 2-core machine: each task deserializes its stage's plan, benchmarks/METRICS.md), and
4 in a big run's process, as its figures were measured."""

from __future__ import annotations

import pytest

from engine.metrics.session import big_run_environment, shuffle_partitions


def test_a_class_run_starts_from_two_partitions_and_a_big_run_from_four(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LAB_SPARK_SHUFFLE_PARTITIONS", raising=False)
    assert shuffle_partitions() == 2
    assert big_run_environment()["LAB_SPARK_SHUFFLE_PARTITIONS"] == "4"


def test_a_setting_above_the_big_runs_floor_is_kept_for_big_runs_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAB_SPARK_SHUFFLE_PARTITIONS", "8")
    assert shuffle_partitions() == 8
    assert big_run_environment()["LAB_SPARK_SHUFFLE_PARTITIONS"] == "8"
