package lab.streams;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import lab.common.Events;
import lab.common.FailPoint;
import lab.common.History;
import lab.common.Leash;
import lab.common.Spec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The lab's Kafka Streams processor: reads the payments topic, counts each account's payments and
 * sums their amounts in a state store backed by a changelog topic, and writes one result per
 * payment. The same application runs at every level; only {@code processing.guarantee} (and {@code
 * commit.interval.ms}, if the spec sets it) differs.
 *
 * <p>Spec (engine/scenarios/streams.py builds it): bootstrap, application_id, instance_id,
 * client_id, input, output, processing_guarantee, commit_interval_ms (null: Streams' default),
 * accounts, processing_ms, state_dir, name, history, failpoint.
 *
 * <p>Events: start, consumed, output_acked, output_failed, committed, commit_rejected, txn_abort,
 * fenced, restore_started, restored, store_opened, store_checked (StoreLogTap), idle, error, done.
 */
public final class StreamsProcessor {
  /** Caught up: nothing consumed for this long while running. */
  static final long IDLE_AFTER_MS = 1000;

  private StreamsProcessor() {}

  public static void main(String[] args) throws Exception {
    Leash.watchOwner();
    Map<String, Object> spec = Spec.load(args, "StreamsSpec");
    FailPoint point = FailPoint.fromSpec(spec);
    History raw = new History((String) spec.get("history"), (String) spec.get("name"), point);
    StreamsHistory history = new StreamsHistory(raw);
    StoreLogTap.install(history); // before Kafka Streams logs its first line
    String input = (String) spec.get("input");
    String output = (String) spec.get("output");

    Properties props = config(spec);
    StreamsConfig effective = new StreamsConfig(props);
    history.write(
        Events.START,
        History.attrs(
            "processing_guarantee", effective.getString(StreamsConfig.PROCESSING_GUARANTEE_CONFIG),
            "commit_interval_ms", effective.getLong(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG),
            "config", new TreeMap<>(props),
            "producer_config", printable(effective.getProducerConfigs("lab")),
            "failpoint", point == null ? null : point.name(),
            "kafka_streams_version", streamsVersion()));

    KafkaStreams streams =
        new KafkaStreams(
            topology(spec, history, input, output),
            props,
            new WatchedClients(history, input, output));
    streams.setGlobalStateRestoreListener(new RestoreWatch(history));
    CountDownLatch ended = new CountDownLatch(1);
    int[] exitCode = {0};
    streams.setUncaughtExceptionHandler(
        error -> {
          Throwable cause = error.getCause() != null ? error.getCause() : error;
          String fencedBy = fencedBy(error);
          Map<String, Object> attrs =
              History.attrs(
                  "error",
                  cause.getClass().getSimpleName(),
                  "reason",
                  String.valueOf(cause.getMessage()));
          if (fencedBy != null) {
            attrs.put("by", fencedBy);
          }
          history.write(fencedBy != null ? Events.FENCED : Events.ERROR, attrs);
          exitCode[0] = 3;
          return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.setStateListener(
        (now, before) -> {
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
            ended.countDown();
          }
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  // SIGTERM: the run is over; close commits what is processed, as Streams does.
                  streams.close(Duration.ofSeconds(10));
                  history.write(Events.DONE, Map.of());
                },
                "lab-shutdown"));
    startIdleWatch(streams, history);
    streams.start();
    ended.await();
    streams.close(Duration.ofSeconds(10));
    System.exit(exitCode[0]);
  }

  static Properties config(Map<String, Object> spec) {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, spec.get("application_id"));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap"));
    props.put(StreamsConfig.CLIENT_ID_CONFIG, spec.get("client_id"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, spec.get("processing_guarantee"));
    if (spec.get("commit_interval_ms") != null) {
      props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, spec.get("commit_interval_ms").toString());
    }
    props.put(StreamsConfig.STATE_DIR_CONFIG, spec.get("state_dir"));
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    // Static membership (KIP-345), as the lab's Python processor: a replacement is the same
    // member restarted, handed the partitions at once, and a woken zombie is fenced.
    props.put(
        StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG),
        spec.get("instance_id"));
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "6000");
    return props;
  }

  static Topology topology(
      Map<String, Object> spec, StreamsHistory history, String input, String output) {
    String name = (String) spec.get("name");
    int accounts = ((Number) spec.getOrDefault("accounts", 10)).intValue();
    long processingMs = ((Number) spec.getOrDefault("processing_ms", 0)).longValue();
    // RocksDB, logged, not cached: every put is in the changelog at once. A persistent store
    // also keeps the instance's process id in its state folder, so a restart on the same
    // folder has the same transactional.id at exactly_once_v2 (and fences its predecessor).
    StoreBuilder<KeyValueStore<String, String>> store =
        Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(AccountCounter.STORE),
                Serdes.String(),
                Serdes.String())
            .withCachingDisabled()
            .withLoggingEnabled(Map.of());
    Topology topology = new Topology();
    topology.addSource(
        "payments", Serdes.String().deserializer(), Serdes.String().deserializer(), input);
    topology.addProcessor(
        "count", () -> new AccountCounter(history, name, accounts, processingMs), "payments");
    topology.addStateStore(store, "count");
    topology.addSink(
        "results", output, Serdes.String().serializer(), Serdes.String().serializer(), "count");
    return topology;
  }

  /** Writes {@code idle} once the instance is running and has consumed nothing for a while. */
  static void startIdleWatch(KafkaStreams streams, StreamsHistory history) {
    Thread watch =
        new Thread(
            () -> {
              while (true) {
                if (streams.state() == KafkaStreams.State.RUNNING
                    && history.quietMillis() >= IDLE_AFTER_MS
                    && !history.lastEvent().equals(Events.IDLE)) {
                  history.write(Events.IDLE, Map.of());
                }
                try {
                  Thread.sleep(100);
                } catch (InterruptedException e) {
                  return;
                }
              }
            },
            "lab-idle-watch");
    watch.setDaemon(true);
    watch.start();
  }

  /**
   * Who fenced this instance, from the exception that ended its stream thread: its group (a newer
   * static member with the same group.instance.id) or its transaction coordinator (a newer producer
   * epoch); null for any other error.
   */
  static String fencedBy(Throwable error) {
    for (Throwable e = error; e != null; e = e.getCause()) {
      if (e instanceof FencedInstanceIdException) {
        return "group coordinator";
      }
      if (WatchedClients.producerFence(e)) {
        return "transaction coordinator";
      }
    }
    return null;
  }

  /**
   * The version of the Kafka Streams jar this role runs, from the properties file the jar carries
   * (its public ClientMetrics reads the same file); "unknown" if the jar has none.
   */
  static String streamsVersion() {
    try (InputStream in =
        KafkaStreams.class.getResourceAsStream("/kafka/kafka-streams-version.properties")) {
      Properties props = new Properties();
      if (in != null) {
        props.load(in);
      }
      return props.getProperty("version", "unknown");
    } catch (IOException e) {
      return "unknown";
    }
  }

  static Map<String, Object> printable(Map<String, Object> config) {
    Map<String, Object> shown = new TreeMap<>();
    config.forEach(
        (k, v) -> shown.put(k, v instanceof Class<?> c ? c.getName() : String.valueOf(v)));
    return shown;
  }

  /** The changelog's restore, as evidence: where it started and ended, how much it read. */
  static final class RestoreWatch implements StateRestoreListener {
    private final StreamsHistory history;

    RestoreWatch(StreamsHistory history) {
      this.history = history;
    }

    /** Which store a restore event is about, and from which changelog partition. */
    private static Map<String, Object> where(String store, TopicPartition changelog) {
      return History.attrs(
          "store", store, "changelog", changelog.topic(), "partition", changelog.partition());
    }

    @Override
    public void onRestoreStart(TopicPartition changelog, String store, long start, long end) {
      Map<String, Object> attrs = where(store, changelog);
      attrs.put("from", start);
      attrs.put("to", end);
      history.write(Events.RESTORE_STARTED, attrs);
    }

    @Override
    public void onBatchRestored(TopicPartition changelog, String store, long end, long count) {}

    @Override
    public void onRestoreEnd(TopicPartition changelog, String store, long restored) {
      Map<String, Object> attrs = where(store, changelog);
      attrs.put("records", restored);
      history.write(Events.RESTORED, attrs);
    }
  }
}
