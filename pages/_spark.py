"""The dashboard's one SparkSession, started in the background and shared by every session.

A Spark JVM takes 13 to 20 s to start here, so the dashboard starts it as soon as it opens
(unless LAB_SPARK_AUTOSTART=0) and pages show its progress instead of waiting for it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from engine.face import (
    SPARK_AUTOSTART,
    start_spark_in_background,
    warm_up_judgement,
)
from pages._keep import kept

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pages._shared import ClusterService


# How long the Kafka warm-up waits for the dashboard's cluster to finish starting.
KAFKA_WARM_UP_WAIT_S = 180.0


class SparkService:
    """Owns the Future of the SparkSession and the latest progress line of its start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._future: Future[SparkSession] | None = None
        self.step = "not started"
        self.fraction = 0.0
        self._clusters: ClusterService | None = None

    def ensure_started(self) -> None:
        """Start the session in a thread unless it is starting, running, or failed just now."""
        from pages._shared import cluster_service

        with self._lock:
            self._clusters = cluster_service()  # here, on a page's thread, for the warm-up
            if self._future is not None and not (
                self._future.done() and self._future.exception() is not None
            ):
                return
            self.step, self.fraction = "starting", 0.0
            self._future = start_spark_in_background(self._progress, then=self._warm_up)
            self._future.add_done_callback(self._then_warm_up_kafka)

    def _warm_up(self, spark: SparkSession) -> None:
        self._progress("warming up the metrics job", 0.95)
        warm_up_judgement(spark)

    def _then_warm_up_kafka(self, future: Future[SparkSession]) -> None:
        """Once the session is handed out, warm its Kafka source in a thread of its own: the
        cluster may still be starting, and pages must not wait for it to use Spark."""
        if future.exception() is None:
            threading.Thread(
                target=self._warm_up_kafka,
                args=(future.result(),),
                name="spark-kafka-warm-up",
                daemon=True,
            ).start()

    def _warm_up_kafka(self, spark: SparkSession) -> None:
        """Judge a few records read from the dashboard's cluster, once it is up (best effort).

        Without it, the first real judgement also loads and compiles Spark's Kafka source,
        about a second more (benchmarks/METRICS.md).
        """
        service = self._clusters
        if service is None:
            return
        deadline = time.monotonic() + KAFKA_WARM_UP_WAIT_S
        while service.state == "starting" and time.monotonic() < deadline:
            time.sleep(0.5)
        cluster = service.cluster
        if service.state != "ready" or cluster is None:
            return
        try:
            with service.shared():
                warm_up_judgement(spark, rounds=1, bootstrap=cluster.direct_bootstrap)
        except Exception:  # a warm-up only: a broker down now must not fail anything
            return

    def _progress(self, what: str, fraction: float) -> None:
        self.step, self.fraction = what, fraction

    @property
    def state(self) -> str:
        """idle, starting, ready or failed."""
        future = self._future
        if future is None:
            return "idle"
        if not future.done():
            return "starting"
        return "failed" if future.exception() is not None else "ready"

    @property
    def error(self) -> BaseException | None:
        future = self._future
        return future.exception() if future is not None and future.done() else None

    def session(self) -> SparkSession | None:
        future = self._future
        return future.result() if self.state == "ready" and future is not None else None

    def wait(self, timeout: float | None = None) -> SparkSession:
        """Block until the session is up (for tests and scripts; pages poll `state`)."""
        self.ensure_started()
        assert self._future is not None
        return self._future.result(timeout=timeout)


@kept
def spark_service() -> SparkService:
    return SparkService()


def autostart_spark() -> None:
    """Called by app.py on every rerun; starts Spark once per server process.

    Only a presenter's session starts it (on loopback, everyone's): a room's viewers make
    Spark do no work, not even start again after a failure.
    """
    from pages._roles import is_presenter

    if SPARK_AUTOSTART.get() != "0" and is_presenter():
        spark_service().ensure_started()
