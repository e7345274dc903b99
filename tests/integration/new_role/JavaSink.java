package lab.demo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import lab.common.Events;
import lab.common.FailPoint;
import lab.common.History;
import lab.common.Leash;
import lab.common.Sigterm;
import lab.common.Spec;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A made-up role for tests/integration/test_new_java_role.py: the sink, on the Java consumer. It
 * reads the judged topic in a group of its own from the start, at the level's isolation, and writes
 * what engine/roles/sink.py writes, so the level is judged from its history alike.
 */
public final class JavaSink {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static volatile boolean stopped;

  private JavaSink() {}

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws Exception {
    Leash.watchOwner();
    Map<String, Object> spec = Spec.load(args, "SinkSpec");
    Sigterm.finishMainFirst(() -> stopped = true, () -> false);
    Map<String, Object> config = (Map<String, Object>) spec.get("config");
    Properties props = new Properties();
    props.put("bootstrap.servers", spec.get("bootstrap"));
    props.put("client.id", spec.get("client_id"));
    props.put("group.id", spec.get("group"));
    props.put("enable.auto.commit", "false");
    props.put("auto.offset.reset", "earliest");
    props.put("isolation.level", String.valueOf(config.get("isolation.level")));
    try (History history =
            new History(
                (String) spec.get("history"), (String) spec.get("name"), FailPoint.fromSpec(spec));
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.subscribe(
          List.of((String) spec.get("topic")),
          new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(java.util.Collection<TopicPartition> parts) {
              history.write(
                  Events.ASSIGNED,
                  History.attrs(
                      "partitions", parts.stream().map(TopicPartition::partition).toList()));
            }

            @Override
            public void onPartitionsRevoked(java.util.Collection<TopicPartition> parts) {}
          });
      history.write(
          Events.START,
          History.attrs(
              "isolation",
              props.get("isolation.level"),
              "client",
              "kafka-clients",
              "config",
              props));
      while (!stopped) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(50))) {
          JsonNode value = JSON.readTree(record.value());
          history.write(
              Events.CONSUMED,
              History.attrs(
                  "id", value.get("id").asInt(),
                  "created_at", value.get("created_at").asDouble(),
                  "partition", record.partition(),
                  "offset", record.offset()));
        }
      }
      history.write(Events.DONE);
    }
  }
}
