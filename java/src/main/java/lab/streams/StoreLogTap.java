package lab.streams;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import lab.common.Events;
import lab.common.History;

/**
 * What Kafka Streams made of the state store it found on disk, as {@code store_checked} events.
 *
 * <p>Whether Kafka Streams trusts a store that a dead instance left behind is decided in its
 * ProcessorStateManager and told only in its log: no listener, metric or state says it. So the role
 * reads its own log, which slf4j-simple writes to standard error (it looks System.err up at every
 * line unless {@code org.slf4j.simpleLogger.cacheOutputStream} is set, which the role does not
 * set). Each line still reaches the role's log file unchanged.
 */
final class StoreLogTap extends OutputStream {
  // The three answers of ProcessorStateManager's store-offset initialisation (its log lines in
  // Kafka Streams 4.1.2 to 4.4.0), each naming the store.
  static final Pattern STORE_LINE =
      Pattern.compile(
          "ProcessorStateManager - .*State store (\\S+) (?:"
              + "(?<wiped>did not find checkpoint offsets while stores are not empty)"
              + "|initialized from checkpoint with offset (?<offset>\\S+)"
              + "|(?<none>did not find checkpoint offset, hence would default to the starting"
              + " offset))");
  static final int LINE_KEPT = 400; // characters of Kafka's own line kept as the evidence

  private final OutputStream original;
  private final StreamsHistory history;
  private final ByteArrayOutputStream line = new ByteArrayOutputStream();
  private final Set<String> seen = new HashSet<>();

  private StoreLogTap(OutputStream original, StreamsHistory history) {
    this.original = original;
    this.history = history;
  }

  /** Tap standard error from now on; call before Kafka Streams logs anything. */
  static void install(StreamsHistory history) {
    System.setErr(
        new PrintStream(new StoreLogTap(System.err, history), true, StandardCharsets.UTF_8));
  }

  /**
   * The event one log line makes: {@code store}, {@code verdict} (wiped: stores not empty and no
   * committed offset under exactly-once, so the task's state is wiped and rebuilt; from_checkpoint:
   * the store is kept, its restore starting from the offset found, "null" for none; no_checkpoint:
   * no offset found and the store kept) and Kafka's {@code line}; null for any other line.
   */
  static Map<String, Object> eventOf(String text) {
    Matcher m = STORE_LINE.matcher(text);
    if (!m.find()) {
      return null;
    }
    String verdict =
        m.group("wiped") != null
            ? "wiped"
            : m.group("none") != null ? "no_checkpoint" : "from_checkpoint";
    String kept = text.length() > LINE_KEPT ? text.substring(0, LINE_KEPT) + "…" : text;
    return History.attrs(
        "store", m.group(1), "verdict", verdict, "offset", m.group("offset"), "line", kept);
  }

  @Override
  public synchronized void write(int b) throws java.io.IOException {
    original.write(b);
    take(b);
  }

  @Override
  public synchronized void write(byte[] bytes, int off, int len) throws java.io.IOException {
    original.write(bytes, off, len);
    for (int i = off; i < off + len; i++) {
      take(bytes[i]);
    }
  }

  @Override
  public void flush() throws java.io.IOException {
    original.flush();
  }

  private void take(int b) {
    if (b != '\n') {
      line.write(b);
      return;
    }
    String text = line.toString(StandardCharsets.UTF_8);
    line.reset();
    Map<String, Object> event = eventOf(text);
    // Kafka Streams 4.3+ logs a verdict twice (its startup pre-registration, then the stream
    // thread): the first says it.
    if (event != null && seen.add(event.get("store") + "/" + event.get("verdict"))) {
      history.write(Events.STORE_CHECKED, event);
    }
  }
}
