package lab.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A fault point counts its event and nothing else. (Reaching it stops the JVM with SIGSTOP, so that
 * is shown by the Python tests that run the roles, tests/integration.)
 */
class FailPointTest {
  @TempDir Path dir;

  @Test
  void aSpecWithoutAFaultPointArmsNone() {
    assertNull(FailPoint.fromSpec(Map.of("topic", "t")));
  }

  @Test
  void itIsNamedAsEngineFailpointsNamesIt() {
    FailPoint point = FailPoint.fromSpec(Map.of("failpoint", Map.of("event", "ack", "count", 3)));
    assertEquals("after ack #3", point.name());
  }

  @Test
  void otherEventsAndEarlierOccurrencesPassThrough() throws Exception {
    Path file = dir.resolve("history.jsonl");
    try (History history = new History(file.toString(), "producer", new FailPoint("ack", 3))) {
      for (int i = 0; i < 5; i++) {
        history.write("send", History.attrs("id", i));
      }
      history.write("ack", History.attrs("id", 0));
      history.write("ack", History.attrs("id", 1));
    }
    List<String> lines = Files.readAllLines(file);
    assertEquals(7, lines.size());
    assertEquals(0, lines.stream().filter(l -> l.contains("failpoint_reached")).count());
  }
}
