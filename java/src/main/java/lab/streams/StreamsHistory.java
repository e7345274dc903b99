package lab.streams;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import lab.common.Events;
import lab.common.FailPoint;
import lab.common.History;

/**
 * The Streams role's record: the shared {@link History} (which also stops the role at its fault
 * point, {@link FailPoint}), plus what its idle watcher needs to know (the last event written, when
 * the last record was consumed), since Kafka Streams calls the role from several threads (the
 * stream thread, the producer's sender thread).
 */
final class StreamsHistory {
  private final History history;
  private final Set<String> fences = new HashSet<>();
  private volatile String lastEvent = "";
  private volatile long lastConsumedNanos = System.nanoTime();

  StreamsHistory(History history) {
    this.history = history;
  }

  synchronized void write(String ev, Map<String, Object> attrs) {
    if (ev.equals(Events.FENCED) && !fences.add(attrs.get("error") + " by " + attrs.get("by"))) {
      return; // the same fence seen again (by the commit, then by the dying thread)
    }
    lastEvent = ev;
    if (ev.equals(Events.CONSUMED)) {
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
