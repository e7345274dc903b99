"""What the role processes share: reading the spec, stopping on SIGTERM, message values."""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("engine.roles")


class StopFlag:
    """Set by SIGTERM/SIGINT, so a role finishes its current step and exits cleanly."""

    def __init__(self) -> None:
        self.stopped = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: object) -> None:
        self.stopped = True


def load_spec() -> dict[str, Any]:
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: python -m {sys.argv[0]} SPEC.json")
    return json.loads(Path(sys.argv[1]).read_text())


def client_logger() -> logging.Logger:
    """librdkafka's log lines go to the role's stderr log file, not to the terminal."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    return logging.getLogger("engine.roles.librdkafka")


def make_value(message_id: int, run_id: str, level: str, by: str) -> bytes:
    return json.dumps(
        {"id": message_id, "created_at": time.time(), "run": run_id, "level": level, "by": by},
        separators=(",", ":"),
    ).encode()


def parse_value(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) and "id" in value else None
