"""The metrics service a dashboard keeps (one for all its sessions): a run's metrics are
computed by one caller at a time, and a caller that waited for another's computation uses
its saved result instead of computing again (the room's sixty viewers open Metrics at the
same moment: benchmarks/README.md, "A room's heavy reads")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine.run import record

Metrics = dict[str, Any]


class MetricsService:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, threading.Lock] = {}

    def _lock_of(self, run_id: str) -> threading.Lock:
        with self._lock:
            return self._runs.setdefault(run_id, threading.Lock())

    def saved_or_computed(
        self, run_id: str, compute: Callable[[], Metrics | None]
    ) -> Metrics | None:
        """The run's saved metrics, or `compute()`'s (which saves them) if none are saved."""
        with self._lock_of(run_id):
            return record.load_metrics(run_id) or compute()

    def computed_again(self, run_id: str, compute: Callable[[], Metrics | None]) -> Metrics | None:
        """`compute()`'s metrics, computed again even if some are saved."""
        with self._lock_of(run_id):
            return compute()
