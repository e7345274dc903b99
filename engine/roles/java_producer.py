"""The producer on the Java client (kafka-clients): java/.../lab/producer/JavaProducer.java,
given the level's settings as engine/model/java_client.py translates them. It plays the producer
of every level of a scenario whose `client` is java, and writes the Python producer's events
(tests/integration/test_java_producer.py)."""

from __future__ import annotations

from engine.model.java_client import JAVA_PRODUCER_MAIN
from engine.roles.producer import ROLE as PYTHON_PRODUCER
from engine.roles.registry import Role
from engine.roles.specs import ProducerSpec

ROLE = Role(
    name="java-producer",
    entry=JAVA_PRODUCER_MAIN,
    java=True,
    part="producer",
    spec_model=ProducerSpec,
    # The same events as librdkafka's producer: the checker reads both alike.
    events=PYTHON_PRODUCER.events,
    about="The producing application on the Java client (kafka-clients), the same spec.",
    serves=lambda scenario, level: scenario.client == "java",
)
