"""The Kafka Streams role's pure parts: the truth per account, the counts read from results,
its spec, and the scenario rule its counting needs (tests/integration/test_streams.py runs it)."""

from __future__ import annotations

import json

import pytest

from engine.base import paths
from engine.cluster.external import ExternalCluster
from engine.model.levels import LEVELS, STREAMS_LEVELS
from engine.run.level_run import LevelRun
from engine.scenarios import streams
from engine.scenarios.scenario import ScenarioError, parse_scenario, scenarios_dir
from engine.scenarios.streams import AccountTotals

PAYMENTS_JAVA = paths.REPO_ROOT / "java/src/main/java/lab/streams/Payments.java"


def test_thirty_payments_make_three_per_account():
    made = streams.payments_made(range(30))
    assert set(made) == set(range(10))
    assert {t.count for t in made.values()} == {3}
    # account 7: ids 7, 17, 27 -> amounts 30, 30, 30
    assert made[7] == AccountTotals(3, 90)


def test_the_java_role_derives_account_and_amount_as_the_truth_does():
    source = PAYMENTS_JAVA.read_text()
    assert "return id % accounts;" in source
    assert "return 10L * (id % 5 + 1);" in source
    assert [streams.account_of(i) for i in (0, 7, 13)] == [0, 7, 3]
    assert [streams.amount_of(i) for i in (0, 4, 5, 13)] == [10, 50, 10, 40]


def result(message_id: int, count: int, total: int) -> dict:
    return {
        "id": message_id,
        "account": streams.account_of(message_id),
        "account_count": count,
        "account_sum": total,
    }


def test_the_last_result_of_an_account_is_what_the_store_said():
    results = [result(7, 1, 30), result(17, 2, 60), result(7, 3, 90), result(17, 4, 120)]
    assert streams.counted(results) == {7: AccountTotals(4, 120)}


def test_miscounted_names_an_over_counted_account_and_passes_an_exact_one():
    made = streams.payments_made(range(30))
    exact = {a: AccountTotals(t.count, t.sum) for a, t in made.items()}
    assert streams.miscounted(made, exact) == {}
    over = {**exact, 7: AccountTotals(6, 180)}
    assert streams.miscounted(made, over) == {7: (AccountTotals(6, 180), AccountTotals(3, 90))}


def test_results_of_keeps_results_and_drops_the_rest():
    raw = [json.dumps(result(1, 1, 20)).encode(), b"not json", None, b'{"no": "id"}']
    assert [r["id"] for r in streams.results_of(raw)] == [1]


@pytest.mark.parametrize("name", STREAMS_LEVELS)
def test_the_spec_is_the_processor_groups_application_with_the_levels_guarantee(name, tmp_path):
    scenario = parse_scenario((scenarios_dir() / "streams-crash.yaml").read_text())
    level = LEVELS[name]
    run = LevelRun(scenario, level, ExternalCluster("127.0.0.1:1"), "run", tmp_path)
    spec = streams.streams_spec(run)
    # engine.run.level_run judges the input done from this group's committed offsets.
    assert spec["application_id"] == f"run-{name}-processor"
    assert spec["processing_guarantee"] == level.extra["processing.guarantee"]
    assert spec["commit_interval_ms"] is None  # Kafka Streams' own default
    assert spec["input"] == run.input_topic and spec["output"] == run.output_topic
    assert spec["state_dir"].startswith(str(run.folder))


def test_the_two_levels_differ_in_one_setting_of_the_application():
    at_least_once, exactly_once = (LEVELS[name] for name in STREAMS_LEVELS)
    assert at_least_once.extra == {"processing.guarantee": "at_least_once"}
    assert exactly_once.extra == {"processing.guarantee": "exactly_once_v2"}


def test_a_streams_level_needs_one_input_partition():
    text = (scenarios_dir() / "streams-crash.yaml").read_text()
    wrong = text.replace("partitions: 1", "partitions: 2")
    with pytest.raises(ScenarioError, match=r"workload\.partitions: 1"):
        parse_scenario(wrong)
    parse_scenario(text)


def history_of_a_crash() -> list[dict]:
    """A replacement that restored account 7 counted twice, then read ids 7, 17 and 27."""
    return [
        {"proc": "processor", "ev": "store_opened", "accounts": {}},
        {"proc": "processor", "ev": "consumed", "id": 7},
        {"proc": "processor#2", "ev": "restored", "store": "account-totals", "records": 2},
        {
            "proc": "processor#2",
            "ev": "store_opened",
            "accounts": {"7": {"count": 2, "sum": 60}},
        },
        *({"proc": "processor#2", "ev": "consumed", "id": i} for i in (7, 17, 27)),
    ]


def test_the_store_at_the_end_is_the_last_instances_restore_plus_what_it_read():
    assert streams.store_at_end(history_of_a_crash()) == {7: AccountTotals(5, 150)}
    assert streams.store_at_end([{"proc": "processor", "ev": "consumed", "id": 1}]) is None


def test_the_evidence_names_the_restore_and_the_over_counted_account():
    lines = streams.store_evidence(history_of_a_crash(), [7, 17, 27])
    assert lines == [
        "processor#2 restored its state store (account-totals) from the changelog topic: "
        "2 records.",
        "processor#2 started counting from 2 payments already in the store, as restored.",
        "Account 7: 5 payments counted (150 in all), 3 made (90).",
    ]
    exact = [e for e in history_of_a_crash() if e.get("proc") == "processor"]
    exact += [{"proc": "processor", "ev": "consumed", "id": i} for i in (17, 27)]
    assert streams.store_evidence(exact, [7, 17, 27])[-1].startswith("Every account's count")
    assert streams.store_evidence([{"ev": "consumed", "id": 1}], [1]) == []


def test_the_pages_rows_put_the_store_beside_the_truth():
    from pages._streams_view import restore_line, store_rows

    rows = store_rows(history_of_a_crash(), [7, 17, 27])
    assert rows == [
        {
            "account": 7,
            "payments counted": 5,
            "payments made": 3,
            "amount counted": 150,
            "amount made": 90,
            "right": "❌ over-counted",
        }
    ]
    assert restore_line(history_of_a_crash()).startswith("processor 2 restored 2 records")
    assert store_rows([{"proc": "processor", "ev": "consumed", "id": 1}], [1]) is None


def test_more_than_one_input_partition_is_refused_before_the_run() -> None:
    from engine.scenarios.scenario import list_scenarios, load_scenario

    scenario = load_scenario(list_scenarios()["streams-crash"])
    assert scenario.runs_kafka_streams and scenario.cannot_teach() is None
    three = scenario.model_copy(
        update={"workload": scenario.workload.model_copy(update={"partitions": 3})}
    )
    assert "one input partition" in (three.cannot_teach() or "")
    # The contrast: the Python processor's scenarios take three partitions.
    crash = load_scenario(list_scenarios()["consumer-crash"])
    crash3 = crash.model_copy(
        update={"workload": crash.workload.model_copy(update={"partitions": 3})}
    )
    assert not crash.runs_kafka_streams and crash3.cannot_teach() is None


def test_the_fidelity_grid_offers_what_the_page_offers_a_streams_scenario() -> None:
    from benchmarks.fidelity import PROCESSING_MS, grid
    from engine.scenarios.scenario import list_scenarios, load_scenario

    points = grid(load_scenario(list_scenarios()["streams-crash"]))
    assert {p.partitions for p in points} == {1} and len(points) == len(PROCESSING_MS)
    assert len(grid(load_scenario(list_scenarios()["consumer-crash"]))) > len(points)


def _checked(verdict: str, guarantee: str, version: str = "4.4.0") -> list[dict]:
    line = (
        "[t] WARN org.apache.kafka.streams.processor.internals.ProcessorStateManager - "
        "stream-task [0_0] State store account-totals ..."
    )
    return [
        {"ev": "start", "proc": "processor#2", "processing_guarantee": guarantee,
         "kafka_streams_version": version},
        {"ev": "store_checked", "proc": "processor#2", "store": "account-totals",
         "verdict": verdict, "offset": "null", "line": line},
    ]  # fmt: skip


def test_a_wiped_store_is_told_with_its_version_and_kafkas_own_line():
    history = _checked("wiped", "exactly_once_v2")
    [said] = streams.store_check_words(history[1], history)
    assert "Kafka Streams 4.4.0" in said and "wiped the store" in said
    assert "KIP-1035" in said and "“stream-task [0_0] State store account-totals ...”" in said


def test_a_store_kept_from_its_checkpoint_at_exactly_once_names_the_bug():
    history = _checked("from_checkpoint", "exactly_once_v2", "4.1.2")
    [said] = streams.store_check_words(history[1], history)
    assert "Kafka Streams 4.1.2" in said and "kept the state store" in said
    assert "KAFKA-20685" in said and "wiped" not in said.split("4.3")[0]


@pytest.mark.parametrize(
    ("verdict", "guarantee"),
    [("wiped", "at_least_once"), ("from_checkpoint", "at_least_once"),
     ("no_checkpoint", "exactly_once_v2")],
)  # fmt: skip
def test_only_exactly_once_wipes_or_kept_stores_are_told(verdict, guarantee):
    """at_least_once never wipes a store (Kafka Streams keeps it and replays), and a store
    found with no checkpoint at all is a first start: no sentence."""
    history = _checked(verdict, guarantee)
    assert streams.store_check_words(history[1], history) == []


def test_the_evidence_carries_the_store_check_of_a_replacement_only():
    history = _checked("wiped", "exactly_once_v2")
    first = [{**e, "proc": "processor"} for e in history]
    with_store = [*first, *history, {"ev": "store_opened", "proc": "processor#2", "accounts": {}}]
    said = streams.store_evidence(with_store, [])
    assert sum("wiped the store" in line for line in said) == 1
