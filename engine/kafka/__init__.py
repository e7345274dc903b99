"""Thin typed wrappers over confluent_kafka used by the cluster, the clients and the checkers."""
