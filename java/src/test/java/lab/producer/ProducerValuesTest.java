package lab.producer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The Java producer's values look exactly like engine/base/values.py's value_maker's. */
class ProducerValuesTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static List<String> fieldNames(JsonNode value) {
    List<String> names = new ArrayList<>();
    value.fieldNames().forEachRemaining(names::add);
    return names;
  }

  @Test
  void aValueHasTheFieldsInThePythonRolesOrder() throws Exception {
    byte[] raw = new ProducerValues("run-1", "at-least-once", "producer", 0).value(7);
    String text = new String(raw, StandardCharsets.UTF_8);
    assertFalse(text.contains(" "), "compact JSON, as json.dumps(separators=(',', ':'))");
    JsonNode value = JSON.readTree(raw);
    assertEquals(List.of("id", "created_at", "run", "level", "by"), fieldNames(value));
    assertEquals(7, value.get("id").asLong());
    assertEquals("at-least-once", value.get("level").asText());
    assertTrue(text.matches(".*\"created_at\":\\d+\\.\\d{4},.*"), text);
  }

  @Test
  void aSizeIsReachedExactlyWithAPadOfXs() throws Exception {
    byte[] raw = new ProducerValues("run-1", "exactly-once", "producer#2", 300).value(12345);
    assertEquals(300, raw.length);
    JsonNode value = JSON.readTree(raw);
    assertEquals("pad", fieldNames(value).get(5));
    assertTrue(value.get("pad").asText().matches("x+"));
  }

  @Test
  void aSizeSmallerThanTheValueAddsNoPad() throws Exception {
    JsonNode value = JSON.readTree(new ProducerValues("r", "l", "b", 10).value(1));
    assertFalse(value.has("pad"));
  }
}
