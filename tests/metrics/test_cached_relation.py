"""The judgement reads its cached records and facts through their cached relations.

engine.metrics.sql.cached_relation gives a persisted DataFrame whose plan is its cached
relation alone, so that the SQL bound to it is not analysed over the whole plan beneath
(0.2-0.3 s of a class's judgement on 2 cores, benchmarks/METRICS.md). The data must be the
same, and the judgement must really bind its later texts to those relations: each check
is shown beside the case it tells apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine.metrics import summary
from engine.metrics.sql import cached_relation
from engine.metrics.warm_up import warm_up_judgement


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from engine.metrics.session import get_spark

    yield get_spark("local[2]")


def root(frame: Any) -> str:
    """The class of the node at the top of `frame`'s analysed plan."""
    return frame._jdf.queryExecution().analyzed().getClass().getSimpleName()


def test_a_persisted_frame_is_read_through_its_cached_relation_with_the_same_rows(spark):
    counted = spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().persist()
    try:
        leaf = cached_relation(counted)
        assert root(leaf) == "InMemoryRelation"
        assert root(counted) == "Aggregate"  # the frame itself carries its whole plan
        assert sorted(leaf.collect()) == sorted(counted.collect())
    finally:
        counted.unpersist()


def test_a_frame_not_cached_is_returned_as_it_is(spark):
    frame = spark.range(10).selectExpr("id * 2 AS twice")
    assert cached_relation(frame) is frame
    assert root(frame) == "Project"


def test_unpersisting_the_frame_frees_what_its_relation_read(spark):
    frame = spark.range(100).selectExpr("id + 1 AS n").persist()
    cached_relation(frame).count()
    frame.unpersist(blocking=True)
    assert cached_relation(frame) is frame  # nothing cached under that plan any more


def _roots_bound(spark: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """The plan roots of the frames the judgement binds to each of its SQL texts."""
    bound: dict[str, dict[str, str]] = {}
    real = summary.run_sql

    def recording(session: Any, text: str, **views: Any) -> Any:
        bound[text.split("AS (")[0].split()[-1]] = {k: root(v) for k, v in views.items()}
        return real(session, text, **views)

    monkeypatch.setattr(summary, "run_sql", recording)
    warm_up_judgement(spark, rounds=1, ids=50)
    return bound


def test_the_facts_and_the_summary_are_bound_to_the_cached_relations(spark, monkeypatch):
    bound = _roots_bound(spark, monkeypatch)
    # positions_sql reads the two views; facts_sql the positions; summary_sql the facts.
    assert bound["views"] == {"uncommitted": "Project", "committed": "Project"}
    assert bound["record_facts"]["records"] == "InMemoryRelation"
    assert bound["timed"] == {"facts": "InMemoryRelation"}


def test_without_cached_relation_the_texts_are_bound_to_the_whole_plans(spark, monkeypatch):
    monkeypatch.setattr(summary, "cached_relation", lambda frame: frame)
    bound = _roots_bound(spark, monkeypatch)
    assert bound["record_facts"]["records"] != "InMemoryRelation"
    assert bound["timed"]["facts"] != "InMemoryRelation"
