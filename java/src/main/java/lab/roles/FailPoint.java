package lab.roles;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A fault point (engine/failpoints.py's FailPoint): stop right after the role writes its
 * {@code count}-th {@code event}. The role stops itself with SIGSTOP, so every thread stops at
 * once (the clients' network threads included) and the nemesis's real signal lands there.
 */
public final class FailPoint {
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
    history.write("failpoint_reached", History.attrs("point", name(), "at", at));
    stopSelf();
    // Execution goes on here after SIGCONT (a paused zombie), exactly where it stopped.
  }

  /**
   * SIGSTOP to this JVM. Java has no call that signals its own process, so the kernel's
   * kill(1) does it; waitFor() returns once the process is continued (or never: a crash).
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
  }
}
