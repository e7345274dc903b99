package lab.producer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import lab.common.Events;
import lab.common.History;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * What a replacement producer sends, decided as engine/roles/producer.py's ids_to_send does: from
 * the application's own outbox (its "sent" and "acked" marks) or from what the topic holds at
 * read_committed, never from another process's history. Also the outbox itself.
 */
final class ProducerResume {
  private static final ObjectMapper JSON = new ObjectMapper();

  private ProducerResume() {}

  /** The application's record of sends and acks (JSONL, as an outbox table would be). */
  static final class Outbox {
    private final OutputStream out;

    Outbox(String path) throws IOException {
      this.out = new FileOutputStream(path, true);
    }

    synchronized void mark(long id, String state) {
      try {
        out.write(
            ("{\"id\":" + id + ",\"state\":\"" + state + "\"}\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
      } catch (IOException e) {
        throw new IllegalStateException("cannot write the outbox: " + e.getMessage(), e);
      }
    }
  }

  /** All of the spec's ids, or for a replacement (or a restart) what its policy leaves. */
  @SuppressWarnings("unchecked")
  static List<Long> idsToSend(Map<String, Object> spec, History history, boolean restart)
      throws IOException {
    List<Long> ids = new ArrayList<>();
    for (Object id : (List<Object>) spec.get("ids")) {
      ids.add(((Number) id).longValue());
    }
    Map<String, Object> resume = (Map<String, Object>) spec.get("resume");
    String policy =
        restart ? "read-committed" : resume == null ? null : (String) resume.get("policy");
    if (policy == null) {
      return ids;
    }
    Set<Long> done;
    String source;
    if (policy.equals("never-resend")) {
      done = marked((String) resume.get("outbox"), "sent");
      source = "its outbox's sent marks";
    } else if (policy.equals("resend-unacked")) {
      done = marked((String) resume.get("outbox"), "acked");
      source = "its outbox's acknowledged marks";
    } else { // read-committed, after initTransactions aborted the dead instance's transaction
      done = committedIds(spec);
      source = "the topic read at read_committed";
    }
    List<Long> todo = new ArrayList<>();
    for (Long id : ids) {
      if (!done.contains(id)) {
        todo.add(id);
      }
    }
    Map<String, Object> attrs =
        History.attrs(
            "policy", policy, "source", source, "ids", todo, "skipped", ids.size() - todo.size());
    if (restart) {
      attrs.put("restart", true);
    }
    history.write(Events.RESUME, attrs);
    return todo;
  }

  static Set<Long> marked(String outbox, String state) throws IOException {
    Set<Long> ids = new HashSet<>();
    if (outbox == null || !Files.exists(Path.of(outbox))) {
      return ids;
    }
    for (String line : Files.readAllLines(Path.of(outbox))) {
      try {
        JsonNode mark = JSON.readTree(line);
        if (mark != null && state.equals(mark.path("state").asText())) {
          ids.add(mark.path("id").asLong());
        }
      } catch (IOException torn) {
        // the last line of a killed writer: skipped, as engine/model/history.py's read_jsonl does
      }
    }
    return ids;
  }

  /** The ids the topic holds at read_committed: what a transactional restart skips. */
  static Set<Long> committedIds(Map<String, Object> spec) {
    Properties props = new Properties();
    props.put("bootstrap.servers", spec.get("bootstrap"));
    props.put("isolation.level", "read_committed");
    props.put("enable.auto.commit", "false");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    String topic = (String) spec.get("topic");
    int partitions = ((Number) spec.get("partitions")).intValue();
    List<TopicPartition> assigned = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      assigned.add(new TopicPartition(topic, p));
    }
    Set<Long> ids = new HashSet<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.assign(assigned);
      consumer.seekToBeginning(assigned);
      // At read_committed the end offsets are the last stable offsets.
      Map<TopicPartition, Long> ends = consumer.endOffsets(assigned, Duration.ofSeconds(30));
      long deadline = System.currentTimeMillis() + 30_000;
      while (System.currentTimeMillis() < deadline && !reached(consumer, ends)) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          try {
            JsonNode value = record.value() == null ? null : JSON.readTree(record.value());
            if (value != null && value.has("id")) {
              ids.add(value.get("id").asLong());
            }
          } catch (IOException notOurs) {
            // a value that is not the lab's JSON carries no id
          }
        }
      }
    }
    return ids;
  }

  private static boolean reached(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> ends) {
    for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
      if (consumer.position(end.getKey()) < end.getValue()) {
        return false;
      }
    }
    return true;
  }
}
