package lab.common;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The child's side of engine/proc/leash.py: exit when the process that started this one is gone.
 *
 * <p>The kernel's parent-death signal is set before exec by the Python side; this thread is the
 * second guard (engine/proc/leash.py, point 2): once a second it compares the owner named in {@code
 * LAB_LEASH_OWNER} ("PID:START_TICKS") with /proc, and halts the JVM when it is gone.
 */
public final class Leash {
  private Leash() {}

  public static void watchOwner() {
    String token = System.getenv("LAB_LEASH_OWNER");
    if (token == null || token.isEmpty()) {
      return; // started by hand, not by a run
    }
    String[] parts = token.split(":");
    long pid = Long.parseLong(parts[0]);
    String ticks = parts.length > 1 ? parts[1] : "";
    long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
    Thread watcher =
        new Thread(
            () -> {
              while (true) {
                long now = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
                if (now != parent || !alive(pid, ticks)) {
                  Runtime.getRuntime().halt(70); // no clean-up: the run it belonged to is over
                }
                try {
                  Thread.sleep(1000);
                } catch (InterruptedException e) {
                  return;
                }
              }
            },
            "lab-leash");
    watcher.setDaemon(true);
    watcher.start();
  }

  static boolean alive(long pid, String ticks) {
    try {
      String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      // Field 22 of /proc/PID/stat is the start time; 20 fields follow the state here.
      return ticks.isEmpty() || ticks.equals("0") || fields[19].equals(ticks);
    } catch (IOException | StringIndexOutOfBoundsException | ArrayIndexOutOfBoundsException e) {
      return false;
    }
  }
}
