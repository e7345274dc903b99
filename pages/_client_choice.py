"""The Failure lab's client choice: the producer on librdkafka or on the Java client.

Each level's settings are shown as the chosen client gets them (engine/model/java_client.py), the
very map the producer role is handed, with what was renamed or left out and why.
"""

from __future__ import annotations

import json

import streamlit as st

from engine.face import (
    CLIENTS,
    LEVELS,
    LabError,
    Scenario,
    describe,
    kafka_version,
    producer_client_settings,
    with_client,
)
from pages._shared import show_error


def client_label(client: str) -> str:
    """The client as the picker names it: the Java roles are built against the lab's Kafka."""
    if client == "java":
        return f"Java (kafka-clients {kafka_version()})"
    return "librdkafka (confluent-kafka, Python)"


def choose_client(scenario: Scenario, levels: list[str], key: str) -> Scenario | None:
    """The scenario with the room's chosen producer client; None if it cannot run so."""
    if scenario.pipeline != "producer":
        return scenario  # the processor pipeline's roles are librdkafka's
    client = st.radio(
        "Producer client",
        CLIENTS,
        index=CLIENTS.index(scenario.client),
        format_func=client_label,
        horizontal=True,
        key=key,
        help="The same scenario, faults and checker, with the producer on either client. "
        "The level 'client-defaults' names no delivery setting: each client's own defaults "
        "decide (librdkafka is not idempotent by default; the Java producer is, since 3.0).",
    )
    try:
        chosen = with_client(scenario, client)
    except LabError as exc:
        show_error(exc)
        return None
    with st.expander(f"The settings the {client} producer really gets"):
        for name in levels:
            settings = producer_client_settings(chosen, LEVELS[name])
            st.markdown(f"**{name}**")
            st.code(json.dumps(settings.config, indent=1), language="json")
            for line in describe(settings):
                st.caption(line)
        if client == "java":
            st.caption(
                "Each run's producer history also records the settings the Java client "
                "resolved (its `start` event's `effective`), defaults included."
            )
    return chosen
