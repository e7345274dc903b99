package lab.common;

import java.util.function.BooleanSupplier;

/**
 * SIGTERM as the Python roles take it (engine/roles/common.py's StopFlag): the JVM's shutdown hook
 * tells the role to stop, then gives its main thread up to 8 s to finish the current step and write
 * {@code done}.
 */
public final class Sigterm {
  private Sigterm() {}

  /**
   * Call from the main thread. {@code finished} says the main thread is past its work: it may be in
   * System.exit, which runs this hook and would wait for it, so the hook must not wait back.
   */
  public static void finishMainFirst(Runnable stop, BooleanSupplier finished) {
    Thread main = Thread.currentThread();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  stop.run();
                  if (!finished.getAsBoolean()) {
                    try {
                      main.join(8000);
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                    }
                  }
                }));
  }
}
