"""The lab's message value, both ways: what a producer writes and what a reader parses.

Every value is compact JSON with an integer "id" (plus "created_at", "run", "level", "by"
and an optional "pad"). The writers (the roles, the metrics' warm-up) and the readers (the
topic reader, the sinks, Spark's cut of the text in engine.metrics.sql) share this one file
so that Kafka access (engine.kafka) needs nothing from the roles.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any


class Stamp:
    """The time as JSON number text, formatted anew only once `resolution_s` has passed.

    Formatting a float costs a producer more per message than the rest of a value or a
    history line, and messages come faster than one per 0.1 ms, so consecutive messages
    share one text. A stamp is at most `resolution_s` earlier than the moment it marks.
    """

    def __init__(self, resolution_s: float) -> None:
        self.resolution_s = resolution_s
        self._at = 0.0
        self._text = "0.0"

    def __call__(self) -> str:
        now = time.time()
        if now - self._at >= self.resolution_s:
            self._at = now
            self._text = repr(now)
        return self._text


# created_at is stamped to 0.1 ms: the lab's latencies are milliseconds and up.
CREATED_AT_RESOLUTION_S = 0.0001
PAD_FIELD = ',"pad":"'


def value_maker(run_id: str, level: str, by: str, size: int = 0) -> Callable[[int], bytes]:
    """A function from message id to its value: {"id", "created_at", "run", "level", "by"}.

    Compact JSON, formatted by hand because json.dumps of a new dict per message costs more
    than the produce() call itself; the constant tail is encoded once. With `size`, a "pad"
    field of x's makes each value exactly `size` bytes (readers ignore unknown fields).
    """
    stamp = Stamp(CREATED_AT_RESOLUTION_S)
    tail = json.dumps({"run": run_id, "level": level, "by": by}, separators=(",", ":"))[1:]
    padded_tails: dict[int, str] = {}  # by the length of the part before the tail

    def padded_tail(head_length: int) -> str:
        missing = size - head_length - 1 - len(tail) - len(PAD_FIELD) - 1
        if missing <= 0:
            return tail
        return f'{tail[:-1]}{PAD_FIELD}{"x" * missing}"}}'

    def make(message_id: int) -> bytes:
        head = f'{{"id":{message_id},"created_at":{stamp()}'
        if not size:
            return f"{head},{tail}".encode()
        end = padded_tails.get(len(head))
        if end is None:
            end = padded_tails[len(head)] = padded_tail(len(head))
        return f"{head},{end}".encode()

    return make


def parse_value(raw: bytes | None) -> dict[str, Any] | None:
    """A lab value as a dict, or None for anything else (no value, not JSON, no id)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) and "id" in value else None
