"""Thin typed wrappers over confluent_kafka, Kafka's wire protocol and the release's jars,
used by the clusters, the roles, a level's read back and the log views. They know nothing
of the engine above its base and its model (pyproject.toml's kafka-is-the-floor contract).
"""
