package lab.streams;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Future;
import lab.common.Events;
import lab.common.History;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidPidMappingException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;

/**
 * The clients Kafka Streams runs on, the real ones, each watched where the lab's events happen: the
 * producer's delivery report of an output record ({@code output_acked}), the commit of the input
 * offsets (at_least_once: the main consumer's commitSync; exactly_once_v2: sendOffsetsToTransaction
 * then commitTransaction), and a fence. Kafka Streams offers no commit callback of its own, so the
 * commit is seen where Streams makes it.
 */
final class WatchedClients implements KafkaClientSupplier {
  private final StreamsHistory history;
  private final String input;
  private final String output;

  WatchedClients(StreamsHistory history, String input, String output) {
    this.history = history;
    this.input = input;
    this.output = output;
  }

  @Override
  public Admin getAdmin(Map<String, Object> config) {
    return Admin.create(config);
  }

  @Override
  public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
    return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  @Override
  public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
    return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  @Override
  public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
    return new WatchedProducer(config);
  }

  @Override
  public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
    return new WatchedConsumer(config);
  }

  /** The input topic's offsets of a commit, as {"partition": next offset}. */
  Map<String, Object> inputOffsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
    Map<String, Object> ours = new TreeMap<>();
    offsets.forEach(
        (tp, at) -> {
          if (tp.topic().equals(input)) {
            ours.put(Integer.toString(tp.partition()), at.offset());
          }
        });
    return ours;
  }

  void fenced(RuntimeException error, String by) {
    history.write(
        Events.FENCED,
        History.attrs(
            "error", error.getClass().getSimpleName(), "reason", error.getMessage(), "by", by));
  }

  static boolean producerFence(Throwable error) {
    return error instanceof ProducerFencedException
        || error instanceof InvalidProducerEpochException
        || error instanceof InvalidPidMappingException;
  }

  private final class WatchedProducer extends KafkaProducer<byte[], byte[]> {
    private Map<TopicPartition, OffsetAndMetadata> pendingOffsets = Map.of();
    private boolean fenceReported;

    WatchedProducer(Map<String, Object> config) {
      super(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, Callback callback) {
      if (!record.topic().equals(output)) {
        return super.send(record, callback); // the changelog's records
      }
      long id = Long.parseLong(new String(record.key()));
      // Runs on the producer's sender thread, before Streams' own callback and before a
      // flush (which every commit makes first) returns: a fault point here is before the commit.
      Callback watched =
          (metadata, error) -> {
            if (error == null) {
              history.write(
                  Events.OUTPUT_ACKED,
                  History.attrs(
                      "id", id, "partition", metadata.partition(), "offset", metadata.offset()));
            } else {
              if (producerFence(error)) {
                reportFence(new IllegalStateException(error), "transaction coordinator");
              }
              history.write(
                  Events.OUTPUT_FAILED,
                  History.attrs("id", id, "error", error.getClass().getSimpleName()));
            }
            if (callback != null) {
              callback.onCompletion(metadata, error);
            }
          };
      return super.send(record, watched);
    }

    @Override
    public void sendOffsetsToTransaction(
        Map<TopicPartition, OffsetAndMetadata> offsets, ConsumerGroupMetadata group) {
      try {
        super.sendOffsetsToTransaction(offsets, group);
      } catch (RuntimeException e) {
        watchFence(e);
        throw e;
      }
      pendingOffsets = offsets;
    }

    @Override
    public void commitTransaction() {
      try {
        super.commitTransaction();
      } catch (RuntimeException e) {
        watchFence(e);
        throw e;
      }
      history.write(
          Events.COMMITTED,
          History.attrs("offsets", inputOffsets(pendingOffsets), "how", "commitTransaction"));
      pendingOffsets = Map.of();
    }

    @Override
    public void abortTransaction() {
      super.abortTransaction();
      history.write(Events.TXN_ABORT, History.attrs("by", "Kafka Streams"));
    }

    private void watchFence(RuntimeException e) {
      if (producerFence(e)) {
        reportFence(e, "transaction coordinator");
      } else if (e instanceof CommitFailedException) {
        reportFence(e, "group coordinator");
      }
    }

    private synchronized void reportFence(RuntimeException e, String by) {
      if (!fenceReported) {
        fenceReported = true;
        fenced(e, by);
      }
    }
  }

  private final class WatchedConsumer extends KafkaConsumer<byte[], byte[]> {
    WatchedConsumer(Map<String, Object> config) {
      super(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
      try {
        super.commitSync(offsets);
      } catch (CommitFailedException | FencedInstanceIdException e) {
        fenced(e, "group coordinator");
        throw e;
      } catch (RuntimeException e) {
        history.write(
            Events.COMMIT_REJECTED,
            History.attrs(
                "offsets", inputOffsets(offsets),
                "error", e.getClass().getSimpleName(),
                "reason", String.valueOf(e.getMessage())));
        throw e;
      }
      history.write(
          Events.COMMITTED, History.attrs("offsets", inputOffsets(offsets), "how", "commitSync"));
    }
  }
}
