"""Every event a history line can carry (its `ev`), in one place.

The roles, the fault points, the nemesis and the level run write these; the checker, the
judge, the explainer, the live view and the pages read them. `Event` is a StrEnum, so a
member equals its name as read back from a JSON history line (`Event.SEND == "send"`).
The room's words for each are engine/model/words.py's EVENT_WORDS, keyed by these members.
tests/unit/test_events.py reads the code: every event written and every event name a
reader compares against is a member here, so a new or misspelt name fails there.
"""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    # the level run, as the run ends (engine.run.level_run)
    GROUP_COMMITTED = "group_committed"
    # every role
    START = "start"
    DONE = "done"
    ERROR = "error"
    FENCED = "fenced"
    FAILPOINT_REACHED = "failpoint_reached"
    # the producer (and the source that writes a processor's input)
    READY = "ready"
    SEND = "send"
    ACK = "ack"
    FAIL = "fail"
    RESUME = "resume"
    RESTART = "restart"
    TXN_INIT = "txn_init"
    TXN_BEGIN = "txn_begin"
    TXN_FLUSHED = "txn_flushed"
    TXN_OPEN = "txn_open"
    TXN_COMMIT = "txn_commit"
    TXN_ABORT = "txn_abort"
    TXN_COMMIT_UNKNOWN = "txn_commit_unknown"
    # the processor
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    PARTITIONS_LOST = "partitions_lost"
    CONSUMED = "consumed"
    IDLE = "idle"
    OUTPUT_ACKED = "output_acked"
    OUTPUT_FAILED = "output_failed"
    BATCH_FAILED = "batch_failed"
    COMMITTED = "committed"
    # the moment a batch is exposed: what is done differs by commit mode (its `state` says)
    COMMIT_GAP = "commit_gap"
    COMMIT_REJECTED = "commit_rejected"
    AUTO_COMMITTED = "auto_committed"
    TXN_COMMIT_RETRY = "txn_commit_retry"
    TXN_SEND_OFFSETS_RETRY = "txn_send_offsets_retry"
    # the Kafka Streams processor (java/.../StreamsProcessor.java), beside the events above
    RESTORE_STARTED = "restore_started"
    RESTORED = "restored"
    STORE_OPENED = "store_opened"
    STORE_CHECKED = "store_checked"  # what Kafka Streams made of the store on disk
    # the sink with an idempotency key
    EFFECT_APPLIED = "effect_applied"
    EFFECT_SKIPPED = "effect_skipped"
    # the share-group worker (engine/roles/share_worker.py), beside idle and output_acked
    SUBSCRIBED = "subscribed"
    DELIVERED = "delivered"
    PROCESSING_FAILED = "processing_failed"
    ACKNOWLEDGED = "acknowledged"
    ACK_COMMITTED = "ack_committed"
    ACK_REFUSED = "ack_refused"
    # the nemesis and the fault proxy, as history lines (their `kind` says more)
    NEMESIS = "nemesis"
    PROXY = "proxy"


class NemesisRecord(StrEnum):
    """What the nemesis and the run's watch of the cluster record (a `nemesis` line's `kind`)
    beside the fault kinds themselves, which are named by their own files (engine/faults/).
    The room's words: engine/model/words.py's RECORD_WORDS."""

    KILL_NODE = "kill-node"
    NODE_STOPPED = "node-stopped"
    NODE_READY = "node-ready"
    RESTART_FAILED = "restart-failed"
    SUPERVISOR_RESTART = "supervisor-restart"
    FAULT_NOT_REACHED = "fault-not-reached"
    ISR = "isr"
    ELR = "elr"
    OFFSETS = "offsets"
    BROKER_LOG = "broker-log"
    RESTART = "restart"
    WIPE = "wipe"


class ProxyRecord(StrEnum):
    """What the fault proxy records (a `proxy` line's `kind`, engine/proxy/server.py). The
    room's words: engine/model/words.py's PROXY_WORDS."""

    PRODUCE_RESPONSE_DROPPED = "produce_response_dropped"
    PRODUCE_REQUEST_DROPPED = "produce_request_dropped"
    OFFSET_COMMIT_RESPONSE_DROPPED = "offset_commit_response_dropped"
    OFFSET_COMMIT_REQUEST_DROPPED = "offset_commit_request_dropped"
    END_TXN_RESPONSE_DROPPED = "end_txn_response_dropped"
    END_TXN_REQUEST_DROPPED = "end_txn_request_dropped"
    PRODUCE_ERROR = "produce_error"
    CONNECTION_HELD = "connection_held"
    CONNECTION_RESET = "connection_reset"
    BLACKHOLE_START = "blackhole_start"
    BLACKHOLE_END = "blackhole_end"
    LATENCY_SET = "latency_set"
    RULES_CLEARED = "rules_cleared"
    PROXY_STARTED = "proxy_started"
    BROKER_DISCOVERED = "broker_discovered"
    BROKER_ADDRESS_CHANGED = "broker_address_changed"
    REWRITE_FAILED = "rewrite_failed"


def java_source() -> str:
    """java/src/main/java/lab/common/Events.java: the same names for the Java roles, made from
    this enum (`python -m engine.model.events --java`); tests/unit/test_events.py keeps it
    current."""
    lines = [f'  public static final String {e.name} = "{e.value}";' for e in Event]
    return (
        "package lab.common;\n\n"
        "/**\n"
        " * Every event a history line can carry, as engine/model/events.py names them. Made by "
        "{@code python\n"
        " * -m engine.model.events --java}; do not edit.\n"
        " */\n"
        "public final class Events {\n"
        "  private Events() {}\n\n" + "\n".join(lines) + "\n}\n"
    )


if __name__ == "__main__":
    import sys

    from engine.base import paths

    if sys.argv[1:] != ["--java"]:
        raise SystemExit("usage: python -m engine.model.events --java")
    target = paths.REPO_ROOT / "java/src/main/java/lab/common/Events.java"
    target.write_text(java_source())
    print(f"wrote {target}")
