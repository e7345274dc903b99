"""`python -m engine compaction` and `python -m engine dump-log`: the log views' commands.

engine/commands/cli.py calls `add_commands(subparsers)`. Each command's func(args) returns the exit
code and raises LabError for anything a user can fix (printed as one line, exit code 2).
`python -m engine.commands.logs_cli ...` runs the same commands on their own.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from engine import logs
from engine.commands.cli_common import run_command  # the CLI's own error handling, not a copy of it


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def cmd_compaction(args: argparse.Namespace) -> int:
    # Parse and check the input before touching the cluster: a typo fails at once.
    records = logs.parse_records(args.records)
    settings = logs.CompactionSettings(
        min_cleanable_dirty_ratio=args.min_cleanable_dirty_ratio,
        segment_ms=args.segment_ms,
        min_compaction_lag_ms=args.min_compaction_lag_ms,
        delete_retention_ms=args.delete_retention_ms,
    )
    settings.validate()
    logs.check_cleaner_timeout(args.timeout)
    from engine.cluster import current_cluster

    cluster = current_cluster()

    def progress(step: str) -> None:
        if not args.json:
            print(step, file=sys.stderr)

    result = logs.run_compaction(
        cluster,
        records,
        settings,
        timeout=args.timeout,
        wait_for_tombstones=not args.no_wait_tombstones,
        progress=progress,
    )
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        _print_json(result.to_json())
        return 0
    print(f"topic {result.topic}: cleaner took {result.cleaner_seconds} s", end="")
    if result.tombstones_waited:
        print(f", tombstones gone after {result.tombstone_seconds} s", end="")
    print()
    print(f"{'offset':>7}  {'key':<10} {'value':<18} {'status':<22} why")
    for row in logs.compaction_rows(result):
        value = "" if row["value"] is None else str(row["value"])
        print(
            f"{row['offset']:>7}  {row['key']!s:<10} {value:<18} {row['status']:<22} {row['why']}"
        )
    return 0


def cmd_dump_log(args: argparse.Namespace) -> int:
    from engine.cluster import current_cluster

    if args.partition < 0:
        raise logs.LogViewError(f"A partition number is 0 or more, not {args.partition}.")
    dump = logs.dump_log(
        current_cluster(),
        args.topic,
        args.partition,
        node_id=args.node,
        print_data=not args.no_data,
    )
    if args.json:
        _print_json(dump.to_json(raw=args.raw))
        return 0
    print(f"{dump.topic}-{dump.partition} on node {dump.node_id} ({len(dump.files)} segment(s))")
    print(
        f"{'base':>6} {'last':>6} {'n':>4}  {'producer':>8} {'epoch':>5} {'seq':>5}  "
        f"{'txn':<5} {'ctrl':<5} type"
    )
    for b in dump.batches:
        print(
            f"{b.base_offset:>6} {b.last_offset:>6} {b.count:>4}  {b.producer_id:>8} "
            f"{b.producer_epoch:>5} {b.base_sequence:>5}  {b.is_transactional!s:<5} "
            f"{b.is_control!s:<5} {b.control_type or ''}"
        )
    if args.raw:
        print(dump.raw)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `compaction` and `dump-log` to the engine's command line."""
    defaults = logs.CompactionSettings()
    comp = subparsers.add_parser(
        "compaction",
        help="write keyed records to a compacted topic and show it before and after cleaning",
    )
    comp.add_argument(
        "--records",
        default=logs.LECTURE_PRESET,
        help="KEY=VALUE,KEY=VALUE,... (KEY= is a tombstone); default: the lecture's example",
    )
    comp.add_argument(
        "--min-cleanable-dirty-ratio", type=float, default=defaults.min_cleanable_dirty_ratio
    )
    comp.add_argument("--segment-ms", type=int, default=defaults.segment_ms)
    comp.add_argument("--min-compaction-lag-ms", type=int, default=defaults.min_compaction_lag_ms)
    comp.add_argument("--delete-retention-ms", type=int, default=defaults.delete_retention_ms)
    comp.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the cleaner (5-600)"
    )
    comp.add_argument(
        "--no-wait-tombstones",
        action="store_true",
        help="stop after the first cleaning; do not wait for tombstones to be removed",
    )
    comp.add_argument("--json", action="store_true", help="print the result as JSON")
    comp.set_defaults(func=cmd_compaction)

    dump = subparsers.add_parser(
        "dump-log", help="run Kafka's DumpLogSegments on a partition and list its batches"
    )
    dump.add_argument("topic")
    dump.add_argument("partition", type=int, nargs="?", default=0)
    dump.add_argument("--node", type=int, help="the node whose copy to read; default: leader")
    dump.add_argument("--no-data", action="store_true", help="leave out keys and payloads")
    dump.add_argument("--raw", action="store_true", help="also print the tool's own output")
    dump.add_argument("--json", action="store_true", help="print the batches as JSON")
    dump.set_defaults(func=cmd_dump_log)


def main(argv: Sequence[str] | None = None) -> int:
    """The two commands on their own, with engine/commands/cli.py's error handling."""
    parser = argparse.ArgumentParser(prog="python -m engine.commands.logs_cli")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
