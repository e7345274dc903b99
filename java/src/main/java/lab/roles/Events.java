package lab.roles;

/**
 * Every event a history line can carry, as engine/events.py names them. Made by {@code python -m
 * engine.events --java}; do not edit.
 */
final class Events {
  private Events() {}

  static final String GROUP_COMMITTED = "group_committed";
  static final String START = "start";
  static final String DONE = "done";
  static final String ERROR = "error";
  static final String FENCED = "fenced";
  static final String FAILPOINT_REACHED = "failpoint_reached";
  static final String READY = "ready";
  static final String SEND = "send";
  static final String ACK = "ack";
  static final String FAIL = "fail";
  static final String RESUME = "resume";
  static final String RESTART = "restart";
  static final String TXN_INIT = "txn_init";
  static final String TXN_BEGIN = "txn_begin";
  static final String TXN_FLUSHED = "txn_flushed";
  static final String TXN_OPEN = "txn_open";
  static final String TXN_COMMIT = "txn_commit";
  static final String TXN_ABORT = "txn_abort";
  static final String TXN_COMMIT_UNKNOWN = "txn_commit_unknown";
  static final String ASSIGNED = "assigned";
  static final String REVOKED = "revoked";
  static final String PARTITIONS_LOST = "partitions_lost";
  static final String CONSUMED = "consumed";
  static final String IDLE = "idle";
  static final String OUTPUT_ACKED = "output_acked";
  static final String OUTPUT_FAILED = "output_failed";
  static final String BATCH_FAILED = "batch_failed";
  static final String COMMITTED = "committed";
  static final String COMMIT_GAP = "commit_gap";
  static final String COMMIT_REJECTED = "commit_rejected";
  static final String AUTO_COMMITTED = "auto_committed";
  static final String TXN_COMMIT_RETRY = "txn_commit_retry";
  static final String TXN_SEND_OFFSETS_RETRY = "txn_send_offsets_retry";
  static final String RESTORE_STARTED = "restore_started";
  static final String RESTORED = "restored";
  static final String STORE_OPENED = "store_opened";
  static final String STORE_CHECKED = "store_checked";
  static final String EFFECT_APPLIED = "effect_applied";
  static final String EFFECT_SKIPPED = "effect_skipped";
  static final String SUBSCRIBED = "subscribed";
  static final String DELIVERED = "delivered";
  static final String PROCESSING_FAILED = "processing_failed";
  static final String ACKNOWLEDGED = "acknowledged";
  static final String ACK_COMMITTED = "ack_committed";
  static final String ACK_REFUSED = "ack_refused";
  static final String NEMESIS = "nemesis";
  static final String PROXY = "proxy";
}
