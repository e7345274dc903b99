package lab.common;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A fault point (engine/proc/failpoints.py's FailPoint): stop right after the role writes its
 * {@code count}-th {@code event}. The role stops itself with SIGSTOP, so every thread stops at once
 * (the clients' network threads included) and the nemesis's real signal lands there.
 *
 * <p>{@link History#write} calls it holding the history's lock, and it returns only once the stop
 * has landed: the kill(1) it runs returns when SIGSTOP is sent, and on a busy machine the JVM's
 * other threads were seen to run a few milliseconds more (a Streams delivery report written after
 * {@code failpoint_reached}). So no line follows the fault point's until the process is continued.
 */
public final class FailPoint {
  /** SIGSTOP's bit in /proc's signal masks (signal 19). */
  private static final long SIGSTOP_BIT = 1L << 18;

  private static final long STOP_WAIT_NANOS = 5_000_000_000L;

  private final String event;
  private final int count;
  private int seen;
  private boolean reached;

  public FailPoint(String event, int count) {
    this.event = event;
    this.count = count;
  }

  /** The spec's {@code "failpoint": {"event": ..., "count": ...}}, or null when absent. */
  public static FailPoint fromSpec(Map<String, Object> spec) {
    Object point = spec.get("failpoint");
    if (!(point instanceof Map<?, ?> map)) {
      return null;
    }
    return new FailPoint((String) map.get("event"), ((Number) map.get("count")).intValue());
  }

  public String name() {
    return "after " + event + " #" + count;
  }

  void after(String ev, Map<String, Object> attrs, History history) {
    if (reached || !ev.equals(event) || ++seen < count) {
      return;
    }
    reached = true;
    Map<String, Object> at = new LinkedHashMap<>();
    at.put("ev", ev);
    at.putAll(attrs);
    history.write(Events.FAILPOINT_REACHED, History.attrs("point", name(), "at", at));
    stopSelf();
    // Execution goes on here after SIGCONT (a paused zombie), exactly where it stopped.
  }

  /**
   * SIGSTOP to this JVM, and wait until it has landed. Java has no call that signals its own
   * process, so the kernel's kill(1) does it.
   */
  static void stopSelf() {
    try {
      new ProcessBuilder("kill", "-STOP", Long.toString(ProcessHandle.current().pid()))
          .inheritIO()
          .start()
          .waitFor();
    } catch (IOException e) {
      throw new IllegalStateException("cannot stop at the fault point: " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    awaitStop();
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
      return tasks.anyMatch(FailPoint::stopped);
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
