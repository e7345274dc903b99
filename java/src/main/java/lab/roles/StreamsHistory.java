package lab.roles;

import java.util.Map;

/**
 * The Streams role's record: the shared {@link History}, plus what its idle watcher needs to
 * know (the last event written, when the last record was consumed), since Kafka Streams calls
 * the role from several threads (the stream thread, the producer's sender thread).
 */
final class StreamsHistory {
  private final History history;
  private volatile String lastEvent = "";
  private volatile long lastConsumedNanos = System.nanoTime();

  StreamsHistory(History history) {
    this.history = history;
  }

  synchronized void write(String ev, Map<String, Object> attrs) {
    lastEvent = ev;
    if (ev.equals("consumed")) {
      lastConsumedNanos = System.nanoTime();
    }
    history.write(ev, attrs);
  }

  String lastEvent() {
    return lastEvent;
  }

  /** Milliseconds since the last record was consumed (or since the role started). */
  long quietMillis() {
    return (System.nanoTime() - lastConsumedNanos) / 1_000_000L;
  }
}
