"""The log views: compaction before and after, the two isolation levels, and the batches.

What these functions show is read from Kafka, never worked out on the client:

- records come from a consumer on the direct listener that reads every offset of a partition;
- high watermark and last stable offset come from ListOffsets at each isolation level;
- batches, producer ids, epochs and transaction markers come from Kafka's own log-dump tool
  (`kafka.tools.DumpLogSegments`) run against the broker's segment files.

The client only adds labels that explain what the broker returned (which later write made a
record obsolete, which gap is a control marker).

- `reading`: a partition read from its first offset to its end, and the demos' writes;
- `layout`: the log on the broker's disk: segment files, the cleaner's checkpoint, and the
  log-dump tool run there;
- `compaction`: the record list, the compaction demo, and what became of each offset;
- `batches`: DumpLogSegments' output parsed into batches and records;
- `isolation`: read_committed next to read_uncommitted, live, recorded, or held open;
- `errors`: what each of them raises.

This file only hands their names on: `from engine import logs` then `logs.run_compaction`.
"""

from engine.logs.batches import Batch, DumpedRecord, LogDump, batch_rows, dump_log, parse_dump
from engine.logs.compaction import (
    LECTURE_PRESET,
    MAX_RECORDS,
    ROLL_KEY,
    SHOWN_BROKER_SETTINGS,
    SHOWN_TOPIC_SETTINGS,
    CompactionResult,
    CompactionSettings,
    check_cleaner_timeout,
    compaction_rows,
    effective_settings,
    parse_records,
    run_compaction,
    segment_label,
)
from engine.logs.errors import LogDumpError, LogViewError, RecordListError, TopicGoneError
from engine.logs.isolation import (
    INFERRED_MARKERS,
    IsolationRow,
    IsolationView,
    OpenTransactionDemo,
    apply_batches,
    build_isolation_rows,
    isolation_from_run,
    isolation_live,
    open_transaction_demo,
    run_has_transactions,
    wait_until_stable,
)
from engine.logs.layout import LogLayout, dump_class, log_layout, parse_cleaner_checkpoint
from engine.logs.reading import (
    LogRecord,
    PartitionRead,
    PartitionReader,
    Progress,
    list_topic_names,
    new_topic_name,
    read_partition,
    require_partition,
)

__all__ = [
    "INFERRED_MARKERS",
    "LECTURE_PRESET",
    "MAX_RECORDS",
    "ROLL_KEY",
    "SHOWN_BROKER_SETTINGS",
    "SHOWN_TOPIC_SETTINGS",
    "Batch",
    "CompactionResult",
    "CompactionSettings",
    "DumpedRecord",
    "IsolationRow",
    "IsolationView",
    "LogDump",
    "LogDumpError",
    "LogLayout",
    "LogRecord",
    "LogViewError",
    "OpenTransactionDemo",
    "PartitionRead",
    "PartitionReader",
    "Progress",
    "RecordListError",
    "TopicGoneError",
    "apply_batches",
    "batch_rows",
    "build_isolation_rows",
    "check_cleaner_timeout",
    "compaction_rows",
    "dump_class",
    "dump_log",
    "effective_settings",
    "isolation_from_run",
    "isolation_live",
    "list_topic_names",
    "log_layout",
    "new_topic_name",
    "open_transaction_demo",
    "parse_cleaner_checkpoint",
    "parse_dump",
    "parse_records",
    "read_partition",
    "require_partition",
    "run_compaction",
    "run_has_transactions",
    "segment_label",
    "wait_until_stable",
]
