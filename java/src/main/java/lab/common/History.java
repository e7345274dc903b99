package lab.common;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The run's record, written as engine/model/history.py writes it: one JSON line per event, with at
 * least {@code t} (epoch seconds), {@code proc} (who) and {@code ev} (what), appended and flushed
 * one line at a time so that a SIGKILL loses at most the line being written.
 *
 * <p>An armed fault point (engine/proc/failpoints.py) is checked after every line: at its event's
 * {@code count}-th occurrence the role writes {@code failpoint_reached} and stops itself.
 */
public final class History implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final OutputStream out;
  private final String proc;
  private final FailPoint failPoint; // null when none is armed on this role

  public History(String path, String proc, FailPoint failPoint) throws IOException {
    this.out = new FileOutputStream(path, true);
    this.proc = proc;
    this.failPoint = failPoint;
  }

  /** The attributes of an event, in order, as {@code attrs("offset", 7, "id", 3)}. */
  public static Map<String, Object> attrs(Object... keysAndValues) {
    Map<String, Object> map = new LinkedHashMap<>();
    for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
      map.put((String) keysAndValues[i], keysAndValues[i + 1]);
    }
    return map;
  }

  public synchronized void write(String ev, Map<String, Object> attrs) {
    Map<String, Object> record = new LinkedHashMap<>();
    record.put("t", System.currentTimeMillis() / 1000.0);
    record.put("proc", proc);
    record.put("ev", ev);
    record.putAll(attrs);
    try {
      out.write((JSON.writeValueAsString(record) + "\n").getBytes(StandardCharsets.UTF_8));
      out.flush();
    } catch (IOException e) {
      throw new IllegalStateException("cannot write the history: " + e.getMessage(), e);
    }
    if (failPoint != null) {
      failPoint.after(ev, attrs, this);
    }
  }

  public void write(String ev) {
    write(ev, Map.of());
  }

  @Override
  public synchronized void close() throws IOException {
    out.close();
  }
}
