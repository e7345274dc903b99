package lab.producer;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The message values engine/base/values.py's value_maker writes, byte for byte in form: {@code
 * {"id":N,"created_at":T,"run":...,"level":...,"by":...}} in compact JSON, with a "pad" field of
 * x's when a size is asked for. The same readers, checker and sink judge the Java producer's
 * messages only if they look exactly like the Python producer's.
 */
final class ProducerValues {
  private static final String PAD_FIELD = ",\"pad\":\"";
  private final String tail;
  private final int size;

  ProducerValues(String runId, String level, String by, int size) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("run", runId);
    fields.put("level", level);
    fields.put("by", by);
    try {
      this.tail = new ObjectMapper().writeValueAsString(fields).substring(1);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(e);
    }
    this.size = size;
  }

  /** The time to 0.1 ms, as plain decimal text (as the Python role stamps it). */
  static String createdAt() {
    Instant now = Instant.now();
    return now.getEpochSecond() + String.format(Locale.ROOT, ".%04d", now.getNano() / 100_000);
  }

  byte[] value(long id) {
    String head = "{\"id\":" + id + ",\"created_at\":" + createdAt();
    String end = tail;
    if (size > 0) {
      int missing = size - head.length() - 1 - tail.length() - PAD_FIELD.length() - 1;
      if (missing > 0) {
        end = tail.substring(0, tail.length() - 1) + PAD_FIELD + "x".repeat(missing) + "\"}";
      }
    }
    return (head + "," + end).getBytes(StandardCharsets.UTF_8);
  }
}
