package lab.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A spec is read only when it is what the Python model (engine/roles/specs.py) says: the schema
 * written from that model names what is missing, unknown or of the wrong type.
 */
class SpecTest {
  @TempDir Path dir;

  private static final Map<String, Object> WORKER =
      Map.of(
          "bootstrap", "127.0.0.1:9092",
          "name", "worker-a",
          "history", "/tmp/worker-a.jsonl",
          "group", "workers",
          "input", "queue",
          "output", "queue-out");

  private String[] file(Map<String, Object> spec) throws Exception {
    Path path = dir.resolve("spec.json");
    Files.writeString(path, new ObjectMapper().writeValueAsString(spec));
    return new String[] {path.toString()};
  }

  private static Map<String, Object> with(String key, Object value) {
    Map<String, Object> spec = new java.util.HashMap<>(WORKER);
    spec.put(key, value);
    return spec;
  }

  @Test
  void aSpecAsTheModelSaysIsRead() throws Exception {
    assertEquals("queue", Spec.load(file(WORKER), "ShareWorkerSpec").get("input"));
  }

  @Test
  void aMissingFieldIsNamed() throws Exception {
    Map<String, Object> spec = new java.util.HashMap<>(WORKER);
    spec.remove("group");
    String said = refusal(spec);
    assertTrue(said.contains("group"), said);
  }

  @Test
  void anUnknownFieldIsNamed() throws Exception {
    String said = refusal(with("poison_id", 5));
    assertTrue(said.contains("poison_id"), said);
  }

  @Test
  void aFieldOfTheWrongTypeOrValueIsNamed() throws Exception {
    assertTrue(refusal(with("work_ms", "slow")).contains("work_ms"));
    assertTrue(refusal(with("ack", "whenever")).contains("ack"));
  }

  @Test
  void eachJavaRolesSchemaIsInTheJar() throws Exception {
    for (String schema :
        new String[] {
          "ProducerSpec", "StreamsSpec", "ShareWorkerSpec", "SinkSpec", "ProcessorSpec"
        }) {
      String said =
          assertThrows(IllegalArgumentException.class, () -> Spec.load(file(Map.of()), schema))
              .getMessage();
      assertTrue(said.contains("bootstrap"), said);
    }
  }

  private String refusal(Map<String, Object> spec) {
    return assertThrows(
            IllegalArgumentException.class, () -> Spec.load(file(spec), "ShareWorkerSpec"))
        .getMessage();
  }
}
