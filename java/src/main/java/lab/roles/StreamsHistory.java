package lab.roles;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The Streams role's record: the shared {@link History}, plus what its idle watcher needs to
 * know (the last event written, when the last record was consumed), since Kafka Streams calls
 * the role from several threads (the stream thread, the producer's sender thread).
 *
 * <p>After the line that reaches the fault point it also makes sure the stop has landed
 * before the role goes on: the kill(1) that FailPoint runs returns once SIGSTOP is sent, and
 * on a busy machine the JVM's threads were seen to run for a few milliseconds more (one more
 * delivery report written after {@code failpoint_reached}). So the thread that wrote it
 * waits, holding this record, while the stop is still pending or under way.
 */
final class StreamsHistory {
  /** SIGSTOP's bit in /proc's signal masks (signal 19). */
  private static final long SIGSTOP_BIT = 1L << 18;

  private static final long STOP_WAIT_NANOS = 5_000_000_000L;

  private final History history;
  private final String pointEvent; // null: no fault point armed
  private final int pointCount;
  private int pointSeen;
  private final Set<String> fences = new HashSet<>();
  private volatile String lastEvent = "";
  private volatile long lastConsumedNanos = System.nanoTime();

  StreamsHistory(History history, Map<String, Object> spec) {
    this.history = history;
    if (spec.get("failpoint") instanceof Map<?, ?> point) {
      this.pointEvent = (String) point.get("event");
      this.pointCount = ((Number) point.get("count")).intValue();
    } else {
      this.pointEvent = null;
      this.pointCount = 0;
    }
  }

  synchronized void write(String ev, Map<String, Object> attrs) {
    if (ev.equals("fenced") && !fences.add(attrs.get("error") + " by " + attrs.get("by"))) {
      return; // the same fence seen again (by the commit, then by the dying thread)
    }
    lastEvent = ev;
    if (ev.equals("consumed")) {
      lastConsumedNanos = System.nanoTime();
    }
    history.write(ev, attrs);
    if (ev.equals(pointEvent) && ++pointSeen == pointCount) {
      awaitStop();
    }
  }

  String lastEvent() {
    return lastEvent;
  }

  /** Milliseconds since the last record was consumed (or since the role started). */
  long quietMillis() {
    return (System.nanoTime() - lastConsumedNanos) / 1_000_000L;
  }

  /** Spin while SIGSTOP is pending or another of this JVM's threads is already stopped. */
  static void awaitStop() {
    long deadline = System.nanoTime() + STOP_WAIT_NANOS;
    while (System.nanoTime() < deadline && (stopPending() || anotherThreadStopped())) {
      Thread.onSpinWait();
    }
  }

  static boolean stopPending() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("ShdPnd:") || line.startsWith("SigPnd:")) {
          if ((Long.parseUnsignedLong(line.substring(7).trim(), 16) & SIGSTOP_BIT) != 0) {
            return true;
          }
        }
      }
    } catch (IOException | NumberFormatException e) {
      return false;
    }
    return false;
  }

  static boolean anotherThreadStopped() {
    try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
      return tasks.anyMatch(StreamsHistory::stopped);
    } catch (IOException e) {
      return false;
    }
  }

  private static boolean stopped(Path task) {
    try {
      String stat = Files.readString(task.resolve("stat"));
      char state = stat.charAt(stat.lastIndexOf(')') + 2);
      return state == 'T' || state == 't';
    } catch (IOException | StringIndexOutOfBoundsException e) {
      return false;
    }
  }
}
