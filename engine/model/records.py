"""A record read back from a topic, as the judge counts it: where it is and which message it
carries. Kept here, below both, so that the Kafka readers (engine/kafka/reader.py) and the
checkers (engine/judging/) share it without the thin wrappers over Kafka knowing the judge.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoredRecord:
    partition: int
    offset: int
    id: int | None
    created_at: float | None = None
