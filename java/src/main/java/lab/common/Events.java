package lab.common;

/**
 * Every event a history line can carry, as engine/model/events.py names them. Made by {@code python
 * -m engine.model.events --java}; do not edit.
 */
public final class Events {
  private Events() {}

  public static final String GROUP_COMMITTED = "group_committed";
  public static final String START = "start";
  public static final String DONE = "done";
  public static final String ERROR = "error";
  public static final String FENCED = "fenced";
  public static final String FAILPOINT_REACHED = "failpoint_reached";
  public static final String READY = "ready";
  public static final String SEND = "send";
  public static final String ACK = "ack";
  public static final String FAIL = "fail";
  public static final String RESUME = "resume";
  public static final String RESTART = "restart";
  public static final String TXN_INIT = "txn_init";
  public static final String TXN_BEGIN = "txn_begin";
  public static final String TXN_FLUSHED = "txn_flushed";
  public static final String TXN_OPEN = "txn_open";
  public static final String TXN_COMMIT = "txn_commit";
  public static final String TXN_ABORT = "txn_abort";
  public static final String TXN_COMMIT_UNKNOWN = "txn_commit_unknown";
  public static final String ASSIGNED = "assigned";
  public static final String REVOKED = "revoked";
  public static final String PARTITIONS_LOST = "partitions_lost";
  public static final String CONSUMED = "consumed";
  public static final String IDLE = "idle";
  public static final String OUTPUT_ACKED = "output_acked";
  public static final String OUTPUT_FAILED = "output_failed";
  public static final String BATCH_FAILED = "batch_failed";
  public static final String COMMITTED = "committed";
  public static final String COMMIT_GAP = "commit_gap";
  public static final String COMMIT_REJECTED = "commit_rejected";
  public static final String AUTO_COMMITTED = "auto_committed";
  public static final String TXN_COMMIT_RETRY = "txn_commit_retry";
  public static final String TXN_SEND_OFFSETS_RETRY = "txn_send_offsets_retry";
  public static final String RESTORE_STARTED = "restore_started";
  public static final String RESTORED = "restored";
  public static final String STORE_OPENED = "store_opened";
  public static final String STORE_CHECKED = "store_checked";
  public static final String EFFECT_APPLIED = "effect_applied";
  public static final String EFFECT_SKIPPED = "effect_skipped";
  public static final String SUBSCRIBED = "subscribed";
  public static final String DELIVERED = "delivered";
  public static final String PROCESSING_FAILED = "processing_failed";
  public static final String ACKNOWLEDGED = "acknowledged";
  public static final String ACK_COMMITTED = "ack_committed";
  public static final String ACK_REFUSED = "ack_refused";
  public static final String NEMESIS = "nemesis";
  public static final String PROXY = "proxy";
}
