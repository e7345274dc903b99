"""Home: where a class starts (the first lesson, its length and its cluster), then the delivery
guarantees with the real settings each one runs with."""

from __future__ import annotations

import json

import streamlit as st

from engine.face import (
    CORE_LEVELS,
    LEVELS,
    PROCESSOR_CONSUMER,
    kafka_version,
    lesson_plans,
    nodes_text,
)
from pages._shared import cluster_service, require_app
from pages._teacher import lesson_cluster

require_app()

st.title("Kafka failure lab")
st.markdown(
    "What happens to your messages when things break? Each level below is run against a "
    "**real Apache Kafka cluster**, with **real faults**: lost acks, crashed processes, "
    "zombie instances and dead brokers."
)

st.header("Where to start")
plans = lesson_plans()
if not plans:
    st.error("No lesson file in lessons/ loads: open the Lesson page to see what is wrong.")
    st.stop()
first, *others = plans
with st.container(border=True):
    st.subheader(f"🎓 {first.title}")
    st.markdown(
        f"**{first.minutes} minutes**, {first.steps} steps, on a **{first.nodes}-node** "
        "cluster. For each step the room predicts what Kafka will do, the lab runs the failure "
        "for real, and the page explains the evidence. Start the cluster before the class: "
        "no step then stops to restart it."
    )
    lesson_cluster(cluster_service(), first.nodes, key="home_lesson_cluster")
    st.page_link("pages/lesson.py", label="Open the lesson", icon="🎓")
st.caption(
    "Then: "
    + "; ".join(f"{p.title} ({p.minutes} min, {nodes_text(p.nodes)})" for p in others)
    + ", on the Lesson page. Every scenario on its own: the Failure lab. A 45- and a "
    "90-minute class plan: docs/teachers-guide.md."
)

st.header("Three guarantees")
for column, name in zip(st.columns(3), CORE_LEVELS, strict=True):
    level = LEVELS[name]
    with column, st.container(border=True):
        st.subheader(level.title)
        st.markdown(f"**Promise.** {level.promise}")
        st.markdown(f"**Broken by.** {level.broken_by}")
        st.markdown(f"**Commits input offsets** {level.commit}.")
        st.caption("Producer settings (the writer under test, or the processor's output)")
        st.code(json.dumps(level.producer, indent=1), language="json")
        st.caption("Downstream consumer settings (the sink the run is judged by)")
        st.code(json.dumps(level.consumer, indent=1), language="json")

st.caption(
    "The processor's input consumer is the same at every level (it reads an input written "
    "without transactions, so its isolation level changes nothing); the levels differ in when "
    "it commits. Each run adds only names to these settings: bootstrap servers, client and "
    "group ids, the processor's `group.instance.id` (static membership, KIP-345) and, at "
    "exactly-once, its `transactional.id`."
)
st.code(json.dumps(PROCESSOR_CONSUMER, indent=1), language="json")

st.header("Two more, for comparison")
for column, name in zip(st.columns(2), ("idempotent-only", "idempotency-key"), strict=True):
    level = LEVELS[name]
    with column, st.container(border=True):
        st.subheader(level.title)
        st.markdown(f"**Promise.** {level.promise}")
        st.markdown(f"**Broken by.** {level.broken_by}")
        st.caption("Producer settings")
        st.code(json.dumps(level.producer, indent=1), language="json")

st.header("Kafka Streams, and each client's own defaults")
st.caption(
    f"A Kafka Streams application (Kafka Streams {kafka_version()}, the version of the lab's "
    "Kafka, in its own JVM) at its two "
    "processing.guarantee values, one setting apart; and a level that names no delivery "
    "setting, run on librdkafka or on the Java producer (the Failure lab's client choice)."
)
OTHER_LEVELS = ("streams-at-least-once", "streams-exactly-once", "client-defaults")
for column, name in zip(st.columns(3), OTHER_LEVELS, strict=True):
    level = LEVELS[name]
    with column, st.container(border=True):
        st.subheader(level.title)
        st.markdown(f"**Promise.** {level.promise}")
        st.markdown(f"**Broken by.** {level.broken_by}")
        if level.extra:
            st.caption("The application's setting")
            st.code(json.dumps(level.extra, indent=1), language="json")
        st.caption(
            "Producer settings Kafka Streams applies"
            if "processing.guarantee" in level.extra
            else "Producer settings (none: the client's own defaults decide)"
        )
        st.code(json.dumps(level.producer, indent=1), language="json")
