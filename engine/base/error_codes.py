"""Kafka's protocol error codes by number, for those the lab's runs meet or its lessons name.

One table for every reader of a number: the fault proxy names a Produce response's error
with it, and the room's words (engine.model.words) name librdkafka's "error code N" with it. The
names are Kafka's own (kafka-clients 4.1.2's `Errors`, the protocol's table at
kafka.apache.org/protocol#protocol_error_codes); a number not here is shown as its number.
"""

from __future__ import annotations

ERROR_NAMES: dict[int, str] = {
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    22: "ILLEGAL_GENERATION",
    25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING",
    51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED",
    56: "KAFKA_STORAGE_ERROR",
    59: "UNKNOWN_PRODUCER_ID",
    74: "FENCED_LEADER_EPOCH",
    82: "FENCED_INSTANCE_ID",
    90: "PRODUCER_FENCED",
    111: "UNRELEASED_INSTANCE_ID",
}


def error_name(code: int) -> str:
    """Kafka's name of an error code, or "error code N" for one the table lacks."""
    return ERROR_NAMES.get(code, f"error code {code}")
