"""A run's Spark metrics as the dashboard and the CLI want them: computed once, then kept.

Spark reads the run's topics from Kafka when the cluster that recorded the run still holds
them. When it does not (the cluster was stopped, or the run came from another machine), Spark
reads the records saved in the run folder instead, and the output says which source it used.
The result, with Spark's per-message verdicts, is saved as runs/RUN_ID/metrics.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from engine.base import paths, settings
from engine.base.errors import LabError
from engine.proc import leash
from engine.run import record

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.metrics.session import Progress

RECORD_SOURCE = "the records saved with the run"
STREAM_SOURCE = "Kafka, followed while the run ran (Spark Structured Streaming)"
# From this many verdict rows (levels x messages) on, a run is big: its metrics are computed
# in a process of their own with big-run settings (session.big_run_environment), so the
# dashboard's session keeps the settings that make a class's runs fast.
# Set in that process, so that it does not start another.
_BIG_PROCESS = settings.METRICS_BIG_PROCESS.name
_PROGRESS = "@progress "  # how that process's progress lines start on its stderr


class Follower(Protocol):
    """What this module needs of a run's follower (engine.metrics.streaming.RunFollower,
    which imports this module: a protocol here keeps the import one-way)."""

    spark: SparkSession

    def finish(self) -> tuple[Any, Any]: ...

    def stop(self, *, wait: bool = True) -> None: ...


def big_run_rows() -> int:
    return settings.METRICS_BIG_RUN.integer()


def compute_and_save(
    run_id: str,
    *,
    spark: SparkSession | None = None,
    bootstrap: str | None = None,
    from_record: bool = False,
    progress: Progress | None = None,
    follower: Follower | None = None,
) -> dict[str, Any]:
    """Spark's metrics of `run_id`, from Kafka if it can, saved beside the run and returned.

    With `follower` (engine.metrics.streaming), the records its streaming queries read
    while the run ran are judged, on its session; if it cannot finish, the batch job reads
    Kafka instead and `fallback_reason` says why. The follower is stopped either way.

    The returned dict is the `engine run --json` object plus `source` (what Spark read),
    `fallback_reason` (why not Kafka, or None) and `verdicts` (Spark's table per level; for a
    big run None, with `verdicts_parquet` naming its Parquet copy: engine.metrics.verdict_table).
    """
    from engine.metrics.inputs import MetricsError, load_run_inputs
    from engine.metrics.session import metrics_bootstrap
    from engine.metrics.spark_job import run_metrics
    from engine.metrics.verdict_table import verdict_fields

    try:
        inputs = load_run_inputs(run_id)
    except BaseException:
        if follower is not None:
            follower.stop()
        raise
    big = inputs.messages * len(inputs.levels) >= big_run_rows()
    if follower is not None and big:
        follower.stop()  # a big run's metrics are the big process's (a session of its own)
        follower = None
    if big and not settings.METRICS_BIG_PROCESS.get():
        return compute_in_big_process(
            run_id, bootstrap=bootstrap, from_record=from_record, progress=progress
        )
    reason = None
    judged = None
    if follower is not None:
        spark = spark or follower.spark
        try:
            frames = follower.finish()
            output, judged = run_metrics(
                run_id, spark=follower.spark, progress=progress, inputs=inputs, records=frames
            )
            source = STREAM_SOURCE
        except MetricsError as exc:
            reason = (
                f"The records Spark's streaming queries read while the run ran were not used: {exc}"
            )
            follower.stop(wait=False)  # a query stuck on a dead broker stops in its time
            follower = None
    if judged is None and not from_record:
        try:
            output, judged = run_metrics(
                run_id, spark=spark, bootstrap=bootstrap, progress=progress, inputs=inputs
            )
            source = f"Kafka at {bootstrap or metrics_bootstrap(inputs.recorded_bootstrap)}"
        except MetricsError as exc:
            # Kafka is down or the topics are gone: the saved records still hold the run.
            reason, from_record = " ".join(filter(None, (reason, str(exc)))), True
    if judged is None and from_record:
        output, judged = run_metrics(
            run_id, spark=spark, from_record=True, progress=progress, inputs=inputs
        )
        source = RECORD_SOURCE
    try:
        output.update(verdict_fields(judged, run_id))
    finally:
        judged.release()
        if follower is not None:
            follower.stop()
    output["fallback_reason"] = reason
    record.save_metrics(run_id, output, source=source)
    return record.load_metrics(run_id) or {**output, "source": source}


def compute_in_big_process(
    run_id: str,
    *,
    bootstrap: str | None = None,
    from_record: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """compute_and_save in a new Python process with the big-run Spark settings.

    Its progress lines come back through stderr; its result is the metrics.json it saved.
    """
    from engine.metrics.inputs import MetricsError
    from engine.metrics.session import big_run_environment

    report = progress or (lambda _what, _fraction: None)
    report("starting a Spark process for a big run", 0.02)
    args = [run_id]
    args += ["--bootstrap", bootstrap] if bootstrap else []
    args += ["--from-record"] if from_record else []
    env = {**os.environ, **big_run_environment(), _BIG_PROCESS: "1"}
    # On a leash (engine/proc/leash.py): a dashboard killed mid-computation leaves no Spark behind.
    with leash.spawn(
        "engine.metrics.compute",
        args,
        cwd=paths.REPO_ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        last = ""
        assert child.stderr is not None
        for line in child.stderr:
            if line.startswith(_PROGRESS):
                fraction, _, what = line[len(_PROGRESS) :].strip().partition(" ")
                report(what, float(fraction))
            elif line.strip():
                last = line.strip()
    leash.forget(child.pid)
    if child.returncode != 0:
        raise MetricsError(
            last.removeprefix("error: ") or f"The metrics process exited with {child.returncode}."
        )
    saved = record.load_metrics(run_id)
    if saved is None:
        raise MetricsError(f"The metrics process finished but saved no metrics for {run_id}.")
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m engine.metrics.compute RUN_ID [--bootstrap B] [--from-record]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="engine.metrics.compute")
    parser.add_argument("run_id")
    parser.add_argument("--bootstrap")
    parser.add_argument("--from-record", action="store_true")
    args = parser.parse_args(argv)

    def progress(what: str, fraction: float) -> None:
        print(f"{_PROGRESS}{fraction:.3f} {what}", file=sys.stderr, flush=True)

    try:
        compute_and_save(
            args.run_id, bootstrap=args.bootstrap, from_record=args.from_record, progress=progress
        )
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
