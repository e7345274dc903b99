package lab.producer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import lab.common.History;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a replacement producer resends, from its outbox (engine/roles/producer.py agrees). */
class ProducerResumeTest {
  @TempDir Path dir;

  private Map<String, Object> spec(String policy, Path outbox) {
    Map<String, Object> spec = new HashMap<>();
    spec.put("ids", List.of(0, 1, 2, 3, 4));
    if (policy != null) {
      spec.put("resume", Map.of("policy", policy, "outbox", outbox.toString()));
    }
    return spec;
  }

  private Path outbox(String... lines) throws Exception {
    Path path = dir.resolve("outbox.jsonl");
    Files.writeString(path, String.join("\n", lines) + "\n");
    return path;
  }

  private List<String> historyLines() throws Exception {
    return Files.readAllLines(dir.resolve("history.jsonl"));
  }

  private List<Long> idsToSend(Map<String, Object> spec) throws Exception {
    try (History history = new History(dir.resolve("history.jsonl").toString(), "p#2", null)) {
      return ProducerResume.idsToSend(spec, history, false);
    }
  }

  @Test
  void withoutAPolicyEveryIdIsSentAndNothingIsSaid() throws Exception {
    assertEquals(List.of(0L, 1L, 2L, 3L, 4L), idsToSend(spec(null, null)));
    assertEquals(List.of(), historyLines());
  }

  @Test
  void neverResendSkipsEveryIdMarkedSent() throws Exception {
    Path box =
        outbox(
            "{\"id\":0,\"state\":\"sent\"}",
            "{\"id\":1,\"state\":\"sent\"}",
            "{\"id\":0,\"state\":\"acked\"}");
    assertEquals(List.of(2L, 3L, 4L), idsToSend(spec("never-resend", box)));
    JsonNode said = new ObjectMapper().readTree(historyLines().get(0));
    assertEquals("resume", said.get("ev").asText());
    assertEquals("never-resend", said.get("policy").asText());
    assertEquals(2, said.get("skipped").asInt());
    assertFalse(said.has("restart"));
  }

  @Test
  void resendUnackedSkipsOnlyTheAcknowledged() throws Exception {
    Path box = outbox("{\"id\":0,\"state\":\"sent\"}", "{\"id\":1,\"state\":\"acked\"}");
    assertEquals(List.of(0L, 2L, 3L, 4L), idsToSend(spec("resend-unacked", box)));
  }

  @Test
  void aTornLastLineOfAKilledWriterIsSkipped() throws Exception {
    Path box = outbox("{\"id\":3,\"state\":\"acked\"}", "{\"id\":4,\"sta");
    assertEquals(List.of(0L, 1L, 2L, 4L), idsToSend(spec("resend-unacked", box)));
  }

  @Test
  void aMissingOutboxMeansNothingWasMarked() throws Exception {
    Path none = dir.resolve("no-such-outbox.jsonl");
    assertEquals(List.of(0L, 1L, 2L, 3L, 4L), idsToSend(spec("never-resend", none)));
    assertTrue(historyLines().get(0).contains("\"skipped\":0"));
  }
}
