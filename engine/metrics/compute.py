"""A run's Spark metrics as the dashboard and the CLI want them: computed once, then kept.

Spark reads the run's topics from Kafka when the cluster that recorded the run still holds
them. When it does not (the cluster was stopped, or the run came from another machine), Spark
reads the records saved in the run folder instead, and the output says which source it used.
The result, with Spark's per-message verdicts, is saved as runs/RUN_ID/metrics.json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine import record

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.metrics.session import Progress

RECORD_SOURCE = "the records saved with the run"


def compute_and_save(
    run_id: str,
    *,
    spark: SparkSession | None = None,
    bootstrap: str | None = None,
    from_record: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Spark's metrics of `run_id`, from Kafka if it can, saved beside the run and returned.

    The returned dict is the `engine run --json` object plus `source` (what Spark read),
    `fallback_reason` (why not Kafka, or None) and `verdicts` (Spark's table per level).
    """
    from engine.metrics.session import metrics_bootstrap
    from engine.metrics.spark_job import MetricsError, load_run_inputs, run_metrics, verdict_rows

    inputs = load_run_inputs(run_id)
    reason = None
    if not from_record:
        try:
            output, judged = run_metrics(
                run_id, spark=spark, bootstrap=bootstrap, progress=progress, inputs=inputs
            )
            source = f"Kafka at {bootstrap or metrics_bootstrap(inputs.recorded_bootstrap)}"
        except MetricsError as exc:
            # Kafka is down or the topics are gone: the saved records still hold the run.
            reason, from_record = str(exc), True
    if from_record:
        output, judged = run_metrics(
            run_id, spark=spark, from_record=True, progress=progress, inputs=inputs
        )
        source = RECORD_SOURCE
    try:
        output["verdicts"] = verdict_rows(judged)
    finally:
        judged.release()
    output["fallback_reason"] = reason
    record.save_metrics(run_id, output, source=source)
    return record.load_metrics(run_id) or {**output, "source": source}
