package lab.producer;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import lab.common.Events;
import lab.common.FailPoint;
import lab.common.History;
import lab.common.Leash;
import lab.common.Sigterm;
import lab.common.Spec;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The workload's producer on the Java client (kafka-clients), the twin of engine/roles/producer.py:
 * the same spec, the same keys and values, the same history events ({@code start, ready, send, ack,
 * fail, resume, txn_*, fenced, restart, done, error}) with the same attributes, so the same
 * checker, nemesis, explanations and sink judge it.
 *
 * <p>The spec's {@code config} already holds the Java client's property names (the lab translates a
 * level's librdkafka settings in engine/model/java_client.py); nothing else is set but the names an
 * application must give, so the client's own defaults apply to the rest.
 *
 * <p>Non-batch workloads flush after every message: each message is its own Produce request, and
 * "the third request" in a scenario means the third message, as with librdkafka.
 */
public final class JavaProducer {
  static final int MAX_RESTARTS = 3; // engine/roles/common.py's guard against a loop
  // The effective settings recorded in `start`: what the client really runs with.
  static final List<String> REPORTED =
      List.of(
          "acks",
          "enable.idempotence",
          "retries",
          "max.in.flight.requests.per.connection",
          "delivery.timeout.ms",
          "request.timeout.ms",
          "linger.ms",
          "transaction.timeout.ms");

  private final Map<String, Object> spec;
  private final History history;
  private final ProducerResume.Outbox outbox;
  private final ProducerValues values;
  private final String topic;
  private final Properties props = new Properties();
  private final AtomicInteger unacknowledged = new AtomicInteger();
  private static volatile boolean stopped;
  private static volatile boolean finished;
  private KafkaProducer<String, byte[]> producer;

  JavaProducer(Map<String, Object> spec, History history) throws java.io.IOException {
    this.spec = spec;
    this.history = history;
    String outboxPath = (String) spec.get("outbox");
    this.outbox = outboxPath == null ? null : new ProducerResume.Outbox(outboxPath);
    Object bytes = spec.get("value_bytes");
    this.values =
        new ProducerValues(
            (String) spec.get("run_id"),
            (String) spec.get("level"),
            (String) spec.get("name"),
            bytes == null ? 0 : ((Number) bytes).intValue());
    this.topic = (String) spec.get("topic");
  }

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("--resolve")) {
      resolve(args);
      return;
    }
    Leash.watchOwner();
    Map<String, Object> spec = Spec.load(args, "ProducerSpec");
    // SIGTERM: finish the current step, flush and write `done`, as the Python role does.
    Sigterm.finishMainFirst(() -> stopped = true, () -> finished);
    int code;
    try (History history =
        new History(
            (String) spec.get("history"), (String) spec.get("name"), FailPoint.fromSpec(spec))) {
      code = new JavaProducer(spec, history).run();
    }
    finished = true;
    if (!stopped) {
      System.exit(code);
    }
    // Stopped by SIGTERM: the JVM is shutting down already, and System.exit would block
    // until the hook's wait ran out; returning lets it end at once.
  }

  @SuppressWarnings("unchecked")
  int run() throws Exception {
    boolean batch = Boolean.TRUE.equals(spec.get("batch"));
    props.put("bootstrap.servers", spec.get("bootstrap"));
    props.put("client.id", spec.get("client_id"));
    // Batch mode: hold messages until the final flush, as the Python role does.
    props.put("linger.ms", batch ? "5000" : "0");
    Map<String, Object> config = (Map<String, Object>) spec.get("config");
    for (Map.Entry<String, Object> setting : config.entrySet()) {
      props.put(setting.getKey(), String.valueOf(setting.getValue()));
    }
    Map<String, Object> txn = (Map<String, Object>) spec.get("transactional");
    if (txn != null) {
      props.put("transactional.id", txn.get("id"));
    }
    Map<String, Object> given = new LinkedHashMap<>();
    props.forEach((k, v) -> given.put((String) k, v));
    props.put("key.serializer", StringSerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    producer = new KafkaProducer<>(props);
    history.write(
        Events.START, History.attrs("config", given, "client", "java", "effective", effective()));
    String gate = (String) spec.get("start_gate");
    if (gate != null) {
      // Learn the topic's leader while waiting, as a producer already running would know it.
      try {
        producer.partitionsFor(topic);
      } catch (KafkaException e) {
        // the first send learns it instead
      }
      history.write(Events.READY);
      waitForGate(Path.of(gate));
    }
    try {
      if (txn != null) {
        runTransactional(txn, batch);
      } else {
        runPlain(ProducerResume.idsToSend(spec, history, false), batch);
      }
      producer.flush();
      history.write(Events.DONE, History.attrs("unflushed", unacknowledged.get()));
      producer.close();
      return 0;
    } catch (KafkaException e) {
      history.write(epochLost(e) ? Events.FENCED : Events.ERROR, describe(e));
      producer.close(java.time.Duration.ZERO);
      return 3;
    }
  }

  /**
   * {@code --resolve NAME=VALUE ...}: print, as one JSON line, the settings this kafka-clients
   * resolves for them (or its ConfigException), with no broker: how the lab checks what each
   * client's defaults really are (tests/integration/test_java_producer.py).
   */
  static void resolve(String[] args) throws Exception {
    Properties given = new Properties();
    given.put("bootstrap.servers", "localhost:1");
    for (int i = 1; i < args.length; i++) {
      String[] pair = args[i].split("=", 2);
      given.put(pair[0], pair[1]);
    }
    given.put("key.serializer", StringSerializer.class.getName());
    given.put("value.serializer", ByteArraySerializer.class.getName());
    Map<String, Object> out = new LinkedHashMap<>();
    try {
      out.put("effective", resolved(given));
    } catch (org.apache.kafka.common.config.ConfigException e) {
      out.put("error", e.getMessage());
    }
    System.out.println(new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(out));
  }

  static Map<String, Object> resolved(Properties given) {
    Map<String, ?> values = new ProducerConfig(given).values();
    Map<String, Object> shown = new LinkedHashMap<>();
    for (String key : REPORTED) {
      Object value = values.get(key);
      shown.put(
          key, value instanceof Number || value instanceof Boolean ? value : String.valueOf(value));
    }
    return shown;
  }

  /** The settings the client resolved (its defaults, and idempotence as it decided it). */
  Map<String, Object> effective() {
    return resolved(props);
  }

  void runPlain(List<Long> ids, boolean batch) throws InterruptedException {
    double rate = spec.get("rate") == null ? 0 : ((Number) spec.get("rate")).doubleValue();
    long intervalNanos = rate > 0 ? (long) (1e9 / rate) : 0;
    for (int i = 0; i < ids.size() && !stopped; i++) {
      long began = System.nanoTime();
      send(ids.get(i));
      if (!batch) {
        producer.flush();
      }
      if (intervalNanos > 0 && i + 1 < ids.size()) {
        long left = began + intervalNanos - System.nanoTime();
        if (left > 0) {
          Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
        }
      }
    }
  }

  void send(long id) {
    if (outbox != null) {
      outbox.mark(id, "sent");
    }
    history.write(Events.SEND, History.attrs("id", id));
    unacknowledged.incrementAndGet();
    producer.send(new ProducerRecord<>(topic, Long.toString(id), values.value(id)), report(id));
  }

  /** The delivery report: `ack` with where the broker put it, or `fail` with why not. */
  Callback report(long id) {
    return (metadata, exception) -> {
      unacknowledged.decrementAndGet();
      if (exception == null) {
        // null when the broker did not say where the write is (no offset in the answer)
        Object offset = metadata.hasOffset() ? metadata.offset() : null;
        history.write(
            Events.ACK,
            History.attrs("id", id, "partition", metadata.partition(), "offset", offset));
        if (outbox != null) {
          outbox.mark(id, "acked");
        }
      } else {
        Map<String, Object> attrs = History.attrs("id", id);
        attrs.putAll(describe(exception));
        history.write(Events.FAIL, attrs);
      }
    };
  }

  /**
   * error: the Kafka protocol's name for it (as librdkafka's err.name() gives for broker errors),
   * reason: its message, exception: the Java class the application's callback got.
   */
  /** How kafka-clients' Sender words a batch it expired (Sender.sendProducerData). */
  static final String EXPIRED = "has passed since batch creation";

  static Map<String, Object> describe(Exception e) {
    Throwable cause =
        e instanceof KafkaException && e.getCause() instanceof KafkaException ? e.getCause() : e;
    String name = Errors.forException(cause).name();
    if (cause instanceof TimeoutException && String.valueOf(cause.getMessage()).contains(EXPIRED)) {
      // The client's own give-up (Sender fails a batch older than delivery.timeout.ms with
      // a TimeoutException it makes), not the broker's REQUEST_TIMED_OUT, which the same
      // class also carries: named as librdkafka names its twin, so the card says the same.
      name = "_MSG_TIMED_OUT";
    } else if (name.equals("UNKNOWN_SERVER_ERROR") && cause instanceof TimeoutException) {
      name = "REQUEST_TIMED_OUT";
    }
    return History.attrs(
        "error",
        name,
        "reason",
        String.valueOf(cause.getMessage()),
        "exception",
        cause.getClass().getSimpleName());
  }

  static boolean isFenced(Throwable e) {
    return e instanceof ProducerFencedException
        || e instanceof InvalidProducerEpochException
        || (e.getCause() != null && e.getCause() != e && isFenced(e.getCause()));
  }

  /**
   * Whether this producer can do nothing more because its epoch is no longer its own: fenced, or
   * (measured on 4.1.2, docs/java-client.md) the commit of a transaction the coordinator aborted
   * for outliving transaction.timeout.ms, which the Java client reports as InvalidTxnStateException
   * and treats as fatal where librdkafka reports a fenced producer.
   */
  static boolean epochLost(Throwable e) {
    return isFenced(e)
        || e instanceof InvalidTxnStateException
        || (e.getCause() != null && e.getCause() != e && epochLost(e.getCause()));
  }

  void runTransactional(Map<String, Object> txn, boolean batch) throws Exception {
    claimOwnership(txn);
    producer.initTransactions();
    history.write(Events.TXN_INIT, History.attrs("transactional_id", txn.get("id")));
    List<Long> ids = ProducerResume.idsToSend(spec, history, false);
    int[] number = {0}; // transaction numbers go on across restarts
    for (int restart = 0; ; restart++) {
      try {
        runTransactions(ids, txn, batch, number);
        return;
      } catch (KafkaException e) {
        if (!epochLost(e) || restart >= MAX_RESTARTS || !stillOwner(txn)) {
          throw e;
        }
        history.write(Events.FENCED, describe(e));
        // The application's choice, as in the Python role: no newer instance owns the
        // transactional.id, so start a new producer with it; its initTransactions fences the
        // old epoch and finishes any transaction still open; then send what the topic lacks.
        producer.close(java.time.Duration.ZERO);
        producer = new KafkaProducer<>(props);
        history.write(
            Events.RESTART,
            History.attrs("by", "the application", "transactional_id", txn.get("id")));
        producer.initTransactions();
        history.write(Events.TXN_INIT, History.attrs("transactional_id", txn.get("id")));
        ids = ProducerResume.idsToSend(spec, history, true);
      }
    }
  }

  @SuppressWarnings("unchecked")
  void runTransactions(List<Long> ids, Map<String, Object> txn, boolean batch, int[] number)
      throws InterruptedException {
    int size = txn.get("size") == null ? 5 : ((Number) txn.get("size")).intValue();
    Set<Integer> aborts = new HashSet<>();
    for (Object a : (List<Object>) txn.getOrDefault("abort", List.of())) {
      aborts.add(((Number) a).intValue());
    }
    Map<String, Object> hold = (Map<String, Object>) txn.get("hold_open");
    for (int start = 0; start < ids.size() && !stopped; start += size) {
      int index = number[0]++;
      List<Long> chunk = new ArrayList<>(ids.subList(start, Math.min(ids.size(), start + size)));
      producer.beginTransaction();
      history.write(Events.TXN_BEGIN, History.attrs("txn", index, "ids", chunk));
      for (long id : chunk) {
        send(id);
        if (!batch) {
          producer.flush(); // one Produce request per message, as outside transactions
        }
      }
      producer.flush();
      history.write(Events.TXN_FLUSHED, History.attrs("txn", index, "ids", chunk));
      if (hold != null && ((Number) hold.get("txn")).intValue() == index) {
        double seconds = ((Number) hold.get("seconds")).doubleValue();
        history.write(Events.TXN_OPEN, History.attrs("txn", index, "seconds", hold.get("seconds")));
        Thread.sleep((long) (seconds * 1000));
      }
      if (aborts.contains(index)) {
        producer.abortTransaction();
        history.write(Events.TXN_ABORT, History.attrs("txn", index, "ids", chunk));
      } else {
        commit(index, chunk);
        history.write(Events.TXN_COMMIT, History.attrs("txn", index, "ids", chunk));
      }
    }
  }

  /**
   * commitTransaction, saying in the history when the transaction was aborted instead: a fenced
   * producer's transaction is aborted by the coordinator; an abortable error (the Java client's
   * KafkaException that is neither fatal nor a timeout) is aborted here. A timeout leaves the
   * outcome unknown (the Java client may retry the same commit).
   */
  void commit(int index, List<Long> chunk) {
    try {
      producer.commitTransaction();
    } catch (TimeoutException e) {
      Object error = describe(e).get("error");
      history.write(
          Events.TXN_COMMIT_UNKNOWN, History.attrs("txn", index, "ids", chunk, "error", error));
      throw e;
    } catch (KafkaException e) {
      Map<String, Object> attrs = History.attrs("txn", index, "ids", chunk);
      attrs.putAll(describe(e));
      attrs.remove("exception");
      attrs.put("by", "the commit failed: the transaction was aborted");
      history.write(Events.TXN_ABORT, attrs);
      if (!epochLost(e)) {
        producer.abortTransaction(); // an abortable error: the application aborts
      }
      throw e;
    }
  }

  void claimOwnership(Map<String, Object> txn) throws java.io.IOException {
    Object owner = txn.get("owner_file");
    if (owner != null) {
      Files.writeString(Path.of((String) owner), (String) spec.get("name"));
    }
  }

  boolean stillOwner(Map<String, Object> txn) {
    Object owner = txn.get("owner_file");
    if (owner == null || !Boolean.TRUE.equals(txn.get("restart_when_fenced"))) {
      return false;
    }
    try {
      return Files.readString(Path.of((String) owner)).equals(spec.get("name"));
    } catch (java.io.IOException e) {
      return false;
    }
  }

  static void waitForGate(Path gate) throws InterruptedException {
    long deadline = System.currentTimeMillis() + 120_000;
    while (!Files.exists(gate) && !stopped && System.currentTimeMillis() < deadline) {
      Thread.sleep(5);
    }
  }
}
