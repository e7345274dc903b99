package lab.streams;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import java.util.TreeMap;
import lab.common.Events;
import lab.common.History;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * One payment in, one result out: the payment's account gets one more payment and its amount in the
 * state store ("count,sum" per account), and the result carries the input's fields plus the
 * account's count and sum as the store now holds them. Every put goes to the store's changelog
 * topic (no cache in front), so a crash leaves in the changelog exactly what was counted; which of
 * it a replacement restores is what processing.guarantee decides.
 */
final class AccountCounter implements Processor<String, String, String, String> {
  static final String STORE = "account-totals";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final StreamsHistory history;
  private final String name;
  private final int accounts;
  private final long processingMillis;
  private ProcessorContext<String, String> context;
  private KeyValueStore<String, String> store;

  AccountCounter(StreamsHistory history, String name, int accounts, long processingMillis) {
    this.history = history;
    this.name = name;
    this.accounts = accounts;
    this.processingMillis = processingMillis;
  }

  @Override
  public void init(ProcessorContext<String, String> context) {
    this.context = context;
    this.store = context.getStateStore(STORE);
    // Called once the store is restored from its changelog: what the instance starts from.
    history.write(
        Events.STORE_OPENED,
        History.attrs("store", STORE, "task", context.taskId().toString(), "accounts", contents()));
  }

  private Map<String, Object> contents() {
    Map<String, Object> accountsNow = new TreeMap<>();
    try (KeyValueIterator<String, String> all = store.all()) {
      while (all.hasNext()) {
        KeyValue<String, String> entry = all.next();
        long[] totals = parse(entry.value);
        accountsNow.put(entry.key, History.attrs("count", totals[0], "sum", totals[1]));
      }
    }
    return accountsNow;
  }

  @Override
  public void process(Record<String, String> record) {
    ObjectNode value;
    try {
      value = (ObjectNode) JSON.readTree(record.value());
    } catch (Exception e) {
      return; // not one of the lab's payments
    }
    if (value == null || !value.has("id")) {
      return;
    }
    long id = value.get("id").asLong();
    RecordMetadata where = context.recordMetadata().orElseThrow();
    history.write(
        Events.CONSUMED,
        History.attrs("id", id, "partition", where.partition(), "offset", where.offset()));
    if (processingMillis > 0) {
      try {
        Thread.sleep(processingMillis); // the work itself; gives a fault somewhere to land
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    long account = Payments.accountOf(id, accounts);
    long amount = Payments.amountOf(id);
    long[] totals = parse(store.get(Long.toString(account)));
    long count = totals[0] + 1;
    long sum = totals[1] + amount;
    store.put(Long.toString(account), count + "," + sum);
    value.put("processed_by", name);
    value.put("processed_at", System.currentTimeMillis() / 1000.0);
    value.put("account", account);
    value.put("amount", amount);
    value.put("account_count", count);
    value.put("account_sum", sum);
    context.forward(record.withKey(Long.toString(id)).withValue(value.toString()));
  }

  static long[] parse(String stored) {
    if (stored == null) {
      return new long[] {0, 0};
    }
    String[] parts = stored.split(",");
    return new long[] {Long.parseLong(parts[0]), Long.parseLong(parts[1])};
  }
}
