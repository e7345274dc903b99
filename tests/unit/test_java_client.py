"""The level settings as the Java producer gets them: the translation table is pure logic.

What the Java client then really ran with (its defaults, idempotence as it decided it) is
measured on a real broker in tests/integration/test_java_producer.py.
"""

from __future__ import annotations

import pytest

from engine.base.paths import REPO_ROOT
from engine.cluster.external import ExternalCluster
from engine.judging.client_evidence import client_evidence
from engine.model.java_client import (
    JAVA_PRODUCER_MAIN,
    NO_EQUIVALENT,
    RENAMED,
    SAME,
    SAME_NAME_OTHER_MEANING,
    UntranslatedSetting,
    describe,
    settings_for,
    to_java,
)
from engine.model.levels import LEVELS
from engine.run.level_run import LevelRun, producer_client_settings
from engine.scenarios.scenario import ScenarioError, list_scenarios, load_scenario, with_client


def test_the_same_names_pass_with_values_as_java_reads_them():
    settings = to_java(LEVELS["at-least-once"].producer)
    assert settings.config == {
        "acks": "all",
        "retries": "2147483647",
        "enable.idempotence": "false",
        "max.in.flight.requests.per.connection": "5",
    }
    assert settings.renamed == {} and settings.dropped == {}


def test_librdkafka_only_names_are_renamed_or_left_out_with_the_reason():
    settings = to_java({"message.timeout.ms": 60000, "batch.num.messages": 1, "acks": -1})
    assert settings.config == {"delivery.timeout.ms": "60000", "acks": "all"}
    assert settings.renamed == {"message.timeout.ms": "delivery.timeout.ms"}
    assert set(settings.dropped) == {"batch.num.messages"}
    lines = describe(settings)
    assert "`message.timeout.ms` is `delivery.timeout.ms` in the Java client" in lines
    assert any(line.startswith("`batch.num.messages` is not given:") for line in lines)


def test_an_unknown_setting_is_refused_not_guessed():
    with pytest.raises(UntranslatedSetting, match=r"queue\.buffering\.backpressure\.threshold"):
        to_java({"queue.buffering.backpressure.threshold": 1})


def test_librdkafka_gets_the_level_settings_unchanged():
    config = LEVELS["at-most-once"].producer
    settings = settings_for("librdkafka", config)
    assert settings.config == config and settings.config is not config
    # The contrast: the Java client is not handed the same map (booleans and acks differ).
    assert settings_for("java", config).config != config


def test_the_defaults_level_names_no_delivery_setting():
    assert LEVELS["client-defaults"].producer == {}
    assert to_java({}).config == {}
    assert "java's own defaults decide the rest" in describe(to_java({}))[-1]


def test_the_table_has_no_name_twice():
    assert not set(RENAMED) & SAME
    assert not set(NO_EQUIVALENT) & (SAME | set(RENAMED))
    assert not set(SAME_NAME_OTHER_MEANING) & (SAME | set(RENAMED) | set(NO_EQUIVALENT))


def test_a_name_both_clients_know_but_read_differently_is_handed_on_and_said():
    """request.timeout.ms is librdkafka's broker-enforced Produce timeout and the Java client's
    wait for any answer as well (librdkafka's CONFIGURATION.md, kafka-clients' ProducerConfig);
    partitioner is no Java setting at all (partitioner.class, murmur2 by default)."""
    settings = to_java({"request.timeout.ms": 1000, "partitioner": "consistent_random"})
    assert settings.config == {"request.timeout.ms": "1000"}
    assert "request.timeout.ms" in settings.differs and "partitioner" in settings.dropped
    lines = describe(settings)
    assert any("`request.timeout.ms` is given under the same name, but" in x for x in lines)
    assert any("`partitioner` is not given" in x and "murmur2" in x for x in lines)


@pytest.mark.parametrize("name", sorted(list_scenarios()))
def test_every_producer_scenarios_settings_translate(name):
    """Every level a producer scenario runs can run on the Java client (no unknown name)."""
    scenario = load_scenario(REPO_ROOT / "scenarios" / f"{name}.yaml")
    if scenario.pipeline != "producer":
        with pytest.raises(ScenarioError, match="client: java runs the producer"):
            with_client(scenario, "java")
        return
    java = with_client(scenario, "java")
    for level in java.levels:
        producer_client_settings(java, LEVELS[level])


def test_a_java_run_starts_the_java_role_with_the_translated_settings(tmp_path):
    scenario = with_client(load_scenario(REPO_ROOT / "scenarios" / "ack-loss.yaml"), "java")
    run = LevelRun(scenario, LEVELS["at-least-once"], ExternalCluster("127.0.0.1:1"), "r", tmp_path)
    assert run.producer_spec([1])["config"] == to_java(LEVELS["at-least-once"].producer).config
    assert any("Java client" in note for note in run.notes)
    assert JAVA_PRODUCER_MAIN == "lab.producer.JavaProducer"
    assert (REPO_ROOT / "java/src/main/java/lab/producer/JavaProducer.java").is_file()
    librdkafka = LevelRun(
        load_scenario(REPO_ROOT / "scenarios" / "ack-loss.yaml"),
        LEVELS["at-least-once"],
        ExternalCluster("127.0.0.1:1"),
        "r",
        tmp_path / "l",
    )
    assert librdkafka.producer_spec([1])["config"] == LEVELS["at-least-once"].producer
    assert not librdkafka.notes


def _start(client: str | None, idempotence: bool) -> dict:
    event = {"t": 1.0, "proc": "producer", "ev": "start", "config": {}}
    if client:
        event |= {"client": client, "effective": {"acks": "-1", "enable.idempotence": idempotence}}
    return event


def test_the_card_says_what_the_java_client_resolved_and_reported():
    history = [
        _start("java", True),
        {
            "proc": "producer",
            "ev": "fail",
            "id": 3,
            "error": "NETWORK_EXCEPTION",
            "exception": "NetworkException",
        },
    ]
    lines = client_evidence(history, "client-defaults")
    assert lines[0].endswith("it resolved acks=all, enable.idempotence=true.")
    assert "librdkafka's default is enable.idempotence=false" in lines[1]
    assert "callback got NetworkException (`NETWORK_EXCEPTION`) for 1 message(s)" in lines[2]
    # The contrast: a librdkafka run's history gives no such line, and a Java producer told
    # enable.idempotence=false is not said to have chosen idempotence.
    assert client_evidence([_start(None, True)], "client-defaults") == []
    told = client_evidence([_start("java", False)], "at-least-once")
    assert not any("chose an idempotent producer" in line for line in told)


def client_choice_page() -> None:
    import streamlit as st

    from engine.base.paths import REPO_ROOT
    from engine.scenarios.scenario import load_scenario
    from pages._client_choice import choose_client

    scenario = load_scenario(REPO_ROOT / "scenarios" / "ack-loss.yaml")
    chosen = choose_client(scenario, ["at-least-once", "client-defaults"], key="client")
    st.session_state["chosen_client"] = chosen.client if chosen else None


def test_the_failure_labs_client_choice_shows_the_settings_each_client_gets():
    from streamlit.testing.v1 import AppTest

    page = AppTest.from_function(client_choice_page).run()
    assert not page.exception
    assert page.session_state["chosen_client"] == "librdkafka"
    # librdkafka is handed the level's own map (booleans as JSON booleans).
    assert '"enable.idempotence": false' in page.code[0].value
    page.radio[0].set_value("java").run()
    assert page.session_state["chosen_client"] == "java"
    assert '"enable.idempotence": "false"' in page.code[0].value
    assert page.code[1].value == "{}"  # client-defaults: nothing but the names
    assert any("java's own defaults decide the rest" in c.value for c in page.caption)


def test_a_java_scenario_with_a_setting_the_table_lacks_is_refused_when_read():
    text = (REPO_ROOT / "scenarios" / "ack-loss.yaml").read_text()
    odd = (
        text
        + "\nproducer_overrides:\n  at-least-once: {queue.buffering.backpressure.threshold: 1}\n"
    )
    from engine.scenarios.scenario import parse_scenario

    assert parse_scenario(odd).client == "librdkafka"  # librdkafka takes its own names
    with pytest.raises(ScenarioError, match=r"producer_overrides\.at-least-once: 'queue"):
        parse_scenario(odd + "client: java\n")


def test_the_card_says_a_java_delivery_timeout_is_the_clients_own_give_up():
    expired = {
        "proc": "producer",
        "ev": "fail",
        "id": 0,
        "error": "_MSG_TIMED_OUT",
        "reason": "Expiring 1 record(s) for t-0:6001 ms has passed since batch creation",
        "exception": "TimeoutException",
    }
    lines = client_evidence([_start("java", False), expired, {**expired, "id": 1}], "x")
    assert "got TimeoutException for 2 message(s): the client gave up" in lines[1]
    assert "`_MSG_TIMED_OUT`" in lines[1] and "broker timed out" not in lines[1]
    # The contrast: the broker's REQUEST_TIMED_OUT, carried by the same Java class, is named.
    broker = {**expired, "error": "REQUEST_TIMED_OUT", "reason": "The request timed out."}
    said = client_evidence([_start("java", False), broker], "x")[1]
    assert "got TimeoutException (`REQUEST_TIMED_OUT`) for 1 message(s)" in said


def test_the_card_says_where_the_java_clients_retries_reordered():
    java_plain = _start("java", False)
    lines = client_evidence([java_plain], "at-least-once", reordered=12)
    assert "12 message(s) out of order, from the Java client's retries" in lines[-1]
    assert "RecordAccumulator.reenqueue" in lines[-1]
    # The contrasts: no reordering, an idempotent Java producer, a librdkafka run.
    assert not any("out of order" in x for x in client_evidence([java_plain], "x"))
    idempotent = client_evidence([_start("java", True)], "x", reordered=3)
    assert not any("out of order" in x for x in idempotent)
    assert client_evidence([_start(None, False)], "x", reordered=3) == []


def test_leader_moves_on_java_teaches_the_java_clients_own_lesson():
    """Its file's on_java block: the story says what differs, and the expectations follow."""
    scenario = load_scenario(list_scenarios()["leader-moves"])
    assert "reordered" in scenario.teaches["at-least-once"]
    java = with_client(scenario, "java")
    assert "**On the Java client:**" in java.story
    assert "reordered" not in java.teaches["at-least-once"]
    assert java.teaches["idempotent-only"]["reordered"] == "0"
    assert any("reenqueue" in s.label for s in java.sources)
    # The contrast: a scenario without an on_java block is the same file on either client.
    ack_loss = load_scenario(list_scenarios()["ack-loss"])
    on_java = with_client(ack_loss, "java")
    assert (on_java.story, on_java.teaches) == (ack_loss.story, ack_loss.teaches)


def test_a_file_that_names_the_java_client_gets_its_java_lesson_once():
    """As a run's own copy of leader-moves run with --client java is read back (Replay)."""
    import yaml

    from engine.scenarios.scenario import Scenario

    path = list_scenarios()["leader-moves"]
    data = {**yaml.safe_load(path.read_text()), "client": "java"}
    java = Scenario.model_validate(data)
    assert java.story.count("**On the Java client:**") == 1
    assert "reordered" not in java.teaches["at-least-once"]
    again = Scenario.model_validate(java.model_dump(exclude_unset=True))
    assert again.story == java.story and again.teaches == java.teaches
    assert with_client(load_scenario(path), "java") == java
