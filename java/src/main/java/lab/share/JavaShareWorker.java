package lab.share;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import lab.common.Events;
import lab.common.FailPoint;
import lab.common.History;
import lab.common.Leash;
import lab.common.Sigterm;
import lab.common.Spec;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The share-group worker on the Java client (KafkaShareConsumer), the twin of
 * engine/roles/share_worker.py: the same spec, the same events with the same attributes, so the
 * same test reads both. Explicit acknowledgement; {@code ack} is {@code after-output} (write, then
 * ACCEPT) or {@code before-processing} (ACCEPT and commit, then write); a record in {@code
 * poison_ids} fails its processing and is RELEASEd. Each record's processing takes {@code work_ms};
 * with {@code renew_every_ms} the worker sends RENEW that often meanwhile (KIP-1222), which
 * librdkafka's worker cannot.
 *
 * <p>commitSync answers per partition: an empty Optional when the broker took the acknowledgements,
 * else the exception it was refused with, written as {@code ack_refused}.
 */
public final class JavaShareWorker {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static volatile boolean stopped;

  private final Map<String, Object> spec;
  private final History history;
  private final KafkaShareConsumer<byte[], byte[]> consumer;
  private final KafkaProducer<byte[], byte[]> producer;
  private final Set<Integer> poison = new HashSet<>();

  @SuppressWarnings("unchecked")
  JavaShareWorker(Map<String, Object> spec, History history) {
    this.spec = spec;
    this.history = history;
    Properties consumerProps = new Properties();
    consumerProps.put("bootstrap.servers", spec.get("bootstrap"));
    consumerProps.put("group.id", spec.get("group"));
    consumerProps.put("client.id", spec.get("name"));
    consumerProps.put("share.acknowledgement.mode", "explicit");
    if (((Number) spec.getOrDefault("renew_every_ms", 0)).longValue() > 0) {
      // A worker that renews holds one record at a time (KIP-1206's record_limit: the broker
      // acquires no more than max.poll.records): a renewed record comes back only through a
      // poll, and kafka-clients 4.4.0's poll in explicit mode refuses to run while another
      // record of its batch is unacknowledged.
      consumerProps.put("max.poll.records", "1");
      consumerProps.put("share.acquire.mode", "record_limit");
    }
    Map<String, Object> extra = (Map<String, Object>) spec.getOrDefault("consumer", Map.of());
    extra.forEach((key, value) -> consumerProps.put(key, String.valueOf(value)));
    consumer =
        new KafkaShareConsumer<>(
            consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    Properties producerProps = new Properties();
    producerProps.put("bootstrap.servers", spec.get("bootstrap"));
    producerProps.put("acks", "all");
    producer =
        new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());
    for (Object id : (List<Object>) spec.getOrDefault("poison_ids", List.of())) {
      poison.add(((Number) id).intValue());
    }
  }

  public static void main(String[] args) throws Exception {
    Leash.watchOwner();
    Map<String, Object> spec = Spec.load(args, "ShareWorkerSpec");
    // SIGTERM: finish the current poll, close and write `done`. main never calls System.exit,
    // so the hook may always wait for it.
    Sigterm.finishMainFirst(() -> stopped = true, () -> false);
    try (History history =
        new History(
            (String) spec.get("history"), (String) spec.get("name"), FailPoint.fromSpec(spec))) {
      new JavaShareWorker(spec, history).run();
    }
  }

  void run() throws Exception {
    String ackMode = (String) spec.getOrDefault("ack", "after-output");
    double idleAfterS = ((Number) spec.getOrDefault("idle_after_s", 5)).doubleValue();
    consumer.subscribe(List.of((String) spec.get("input")));
    history.write(
        Events.SUBSCRIBED, History.attrs("topic", spec.get("input"), "group", spec.get("group")));
    long lastRecord = System.nanoTime();
    boolean idleWritten = false;
    try {
      while (!stopped) {
        ConsumerRecords<byte[], byte[]> records;
        try {
          records = consumer.poll(Duration.ofSeconds(1));
        } catch (KafkaException e) {
          history.write(
              Events.ERROR, History.attrs("where", "poll", "code", code(e), "error", e.toString()));
          return;
        }
        if (records.isEmpty()) {
          if (!idleWritten && (System.nanoTime() - lastRecord) / 1e9 > idleAfterS) {
            history.write(Events.IDLE);
            idleWritten = true;
          }
          continue;
        }
        lastRecord = System.nanoTime();
        idleWritten = false;
        for (ConsumerRecord<byte[], byte[]> record : records) {
          handle(record, ackMode);
        }
        commit();
      }
      history.write(Events.DONE);
    } finally {
      producer.close(Duration.ofSeconds(10));
      consumer.close();
    }
  }

  private void handle(ConsumerRecord<byte[], byte[]> record, String ackMode) throws Exception {
    JsonNode value = JSON.readTree(record.value());
    int id = value.get("id").asInt();
    Object[] where = {"id", id, "partition", record.partition(), "offset", record.offset()};
    history.write(
        Events.DELIVERED,
        with(where, "delivery_count", record.deliveryCount().map(Short::intValue).orElse(null)));
    if (poison.contains(id)) {
      history.write(Events.PROCESSING_FAILED, History.attrs(where));
      acknowledge(record, AcknowledgeType.RELEASE, where);
      return;
    }
    if (ackMode.equals("before-processing")) {
      acknowledge(record, AcknowledgeType.ACCEPT, where);
      commit();
    }
    work(record, where);
    boolean written = writeOutput(record, where);
    if (ackMode.equals("after-output")) {
      // An output that failed is given back for another try (the application's choice).
      acknowledge(record, written ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE, where);
    }
  }

  /**
   * The record's processing: work_ms long. With renew_every_ms, the worker asks for more time as it
   * goes (RENEW, KIP-1222, kafka-clients 4.2 and later): each RENEW goes out with the poll in
   * takeBackRenewed, and the broker restarts the record's acquisition lock, so no other member is
   * handed it meanwhile. RENEW ends nothing: the record is still ACCEPTed or RELEASEd after.
   */
  private void work(ConsumerRecord<byte[], byte[]> record, Object[] where) throws Exception {
    long left = ((Number) spec.getOrDefault("work_ms", 0)).longValue();
    long renewEvery = ((Number) spec.getOrDefault("renew_every_ms", 0)).longValue();
    while (left > 0) {
      long slice = renewEvery > 0 ? Math.min(left, renewEvery) : left;
      Thread.sleep(slice);
      left -= slice;
      if (renewEvery > 0 && left > 0) {
        acknowledge(record, AcknowledgeType.RENEW, where);
        takeBackRenewed(record);
      }
    }
  }

  /**
   * A RENEW is sent with the next poll or commitSync, and either way the record is out of the
   * client's hands until a poll returns it again (kafka-clients 4.4.0: ShareFetch
   * .takeRenewedRecords, on the poll's path; acknowledging it meanwhile throws "The record cannot
   * be acknowledged", which the lab's first version, renewing through commitSync, met). A poll with
   * a renewal pending hands over nothing new, and this worker holds one record at a time.
   */
  private void takeBackRenewed(ConsumerRecord<byte[], byte[]> record) {
    long deadline = System.nanoTime() + 30_000_000_000L;
    boolean back = false;
    while (!back && System.nanoTime() < deadline) {
      for (ConsumerRecord<byte[], byte[]> polled : consumer.poll(Duration.ofMillis(200))) {
        if (polled.partition() != record.partition() || polled.offset() != record.offset()) {
          throw new IllegalStateException("a poll handed over another record during a renewal");
        }
        back = true;
      }
    }
    if (!back) {
      throw new IllegalStateException("a renewed record did not come back within 30 s");
    }
  }

  private void acknowledge(
      ConsumerRecord<byte[], byte[]> record, AcknowledgeType type, Object[] where) {
    consumer.acknowledge(record, type);
    history.write(Events.ACKNOWLEDGED, with(where, "type", type.name()));
  }

  private boolean writeOutput(ConsumerRecord<byte[], byte[]> record, Object[] where) {
    try {
      producer
          .send(new ProducerRecord<>((String) spec.get("output"), record.key(), record.value()))
          .get();
      history.write(Events.OUTPUT_ACKED, with(where, "by", spec.get("name")));
      return true;
    } catch (Exception e) {
      history.write(Events.OUTPUT_FAILED, with(where, "error", e.toString()));
      return false;
    }
  }

  /** Send the pending acknowledgements; the broker's answer is recorded per partition. */
  private void commit() {
    Map<TopicIdPartition, Optional<KafkaException>> answers =
        consumer.commitSync(Duration.ofSeconds(30));
    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> answer : answers.entrySet()) {
      int partition = answer.getKey().partition();
      if (answer.getValue().isEmpty()) {
        history.write(Events.ACK_COMMITTED, History.attrs("partition", partition));
      } else {
        KafkaException refusal = answer.getValue().get();
        history.write(
            Events.ACK_REFUSED,
            History.attrs(
                "partition", partition, "code", code(refusal), "error", refusal.toString()));
      }
    }
  }

  private static String code(Exception e) {
    return e.getClass().getSimpleName();
  }

  private static Map<String, Object> with(Object[] where, Object... more) {
    Object[] all = new Object[where.length + more.length];
    System.arraycopy(where, 0, all, 0, where.length);
    System.arraycopy(more, 0, all, where.length, more.length);
    return History.attrs(all);
  }
}
