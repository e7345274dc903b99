"""`python -m engine metrics RUN_ID [--json]`: a recorded run's metrics, computed by Spark.

engine/commands/cli.py wires this in with `add_commands(subparsers)`. The JSON printed is the
`engine run --json` object ({"run_id", "scenario", "results"}) with the metrics' extra
fields per level; every failure a user can meet is a LabError (one line, exit code 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_commands(subparsers: Any) -> None:
    """Add `metrics` to the engine's sub-commands."""
    metrics = subparsers.add_parser(
        "metrics",
        help="compute a recorded run's metrics with Spark, reading its topics from Kafka",
        description=(
            "Compute a recorded run's metrics with PySpark: the run's topics are read from "
            "Kafka at both isolation levels and judged with the checker's definitions."
        ),
    )
    metrics.add_argument("run_id", help="a run id, as `python -m engine runs` lists them")
    metrics.add_argument("--json", action="store_true", help="print the results as JSON")
    metrics.add_argument(
        "--bootstrap",
        help="Kafka bootstrap to read through (default: LAB_METRICS_BOOTSTRAP, else the "
        "direct listener recorded for the run's cluster)",
    )
    metrics.add_argument(
        "--from-record",
        action="store_true",
        help="use the records saved in the run folder instead of reading Kafka",
    )
    metrics.add_argument(
        "--master", help="Spark master URL (default: LAB_SPARK_MASTER, else local[*])"
    )
    metrics.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    metrics.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    # Imported here so that `python -m engine --help` does not import pyspark.
    from engine.metrics.compute import RECORD_SOURCE
    from engine.metrics.inputs import load_run_inputs
    from engine.metrics.session import metrics_bootstrap
    from engine.metrics.spark_job import run_metrics
    from engine.metrics.verdict_table import verdict_fields
    from engine.run import record

    inputs = load_run_inputs(args.run_id)  # a missing run fails before Spark starts

    def progress(what: str, fraction: float) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {what}", file=sys.stderr)

    output, judged = run_metrics(
        inputs.run_id,
        spark_master=args.master,
        bootstrap=args.bootstrap,
        from_record=args.from_record,
        progress=progress,
        inputs=inputs,
    )
    try:
        # Kept beside the run, so the dashboard's Metrics page shows it without recomputing.
        saved = {**output, **verdict_fields(judged, inputs.run_id), "fallback_reason": None}
    finally:
        judged.release()
    source = (
        RECORD_SOURCE
        if args.from_record
        else f"Kafka at {args.bootstrap or metrics_bootstrap(inputs.recorded_bootstrap)}"
    )
    record.save_metrics(inputs.run_id, saved, source=source)
    if args.json:
        print(json.dumps(output, indent=2, sort_keys=True, default=str))
    else:
        print_table(output)
    return 0


def print_table(output: dict[str, Any]) -> None:
    print(f"run {output['run_id']} ({output['scenario']}), computed by Spark")
    print(
        f"{'level':<18}{'sent':>6}{'acked':>7}{'deliv':>7}{'dups':>6}{'dup%':>7}{'lost':>6}"
        f"{'reord':>7}{'abort':>7}{'p50 ms':>9}{'p99 ms':>9}{'msg/s':>9}"
    )
    for level, r in output["results"].items():
        p50, p99 = r["latency_ms"]["p50"], r["latency_ms"]["p99"]
        rate = r["throughput"]["messages_per_s"]
        print(
            f"{level:<18}{r['sent']:>6}{r['acked']:>7}{r['delivered']:>7}{r['duplicates']:>6}"
            f"{r['duplicated_share']:>7.1%}{r['lost']:>6}{r['reordered']:>7}"
            f"{r['aborted_visible']:>7}{'-' if p50 is None else f'{p50:.0f}':>9}"
            f"{'-' if p99 is None else f'{p99:.0f}':>9}{'-' if rate is None else f'{rate:.0f}':>9}"
        )
