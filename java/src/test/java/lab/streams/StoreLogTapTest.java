package lab.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** Kafka Streams' own lines about a store found on disk, as the lab's runs logged them. */
class StoreLogTapTest {
  static final String PREFIX =
      "[app-StreamThread-1] WARN org.apache.kafka.streams.processor.internals"
          + ".ProcessorStateManager - stream-thread [app-StreamThread-1] stream-task [0_0] ";

  @Test
  void aWipeUnderExactlyOnceIsTold() {
    Map<String, Object> event =
        StoreLogTap.eventOf(
            PREFIX
                + "State store account-totals did not find checkpoint offsets while stores are"
                + " not empty, since under EOS it has the risk of getting uncommitted data in"
                + " stores we have to treat it as a task corruption error and wipe out the local"
                + " state of task 0_0 before re-bootstrapping");
    assertEquals("account-totals", event.get("store"));
    assertEquals("wiped", event.get("verdict"));
    assertNull(event.get("offset"));
  }

  @Test
  void aStoreKeptFromItsCheckpointIsToldWithTheOffset() {
    Map<String, Object> event =
        StoreLogTap.eventOf(
            PREFIX
                + "State store account-totals initialized from checkpoint with offset null at"
                + " changelog app-account-totals-changelog-0");
    assertEquals("from_checkpoint", event.get("verdict"));
    assertEquals("null", event.get("offset"));
    assertEquals(
        "42",
        StoreLogTap.eventOf(
                PREFIX + "State store s initialized from checkpoint with offset 42 at changelog c")
            .get("offset"));
  }

  @Test
  void noCheckpointIsTold() {
    Map<String, Object> event =
        StoreLogTap.eventOf(
            PREFIX
                + "State store account-totals did not find checkpoint offset, hence would default"
                + " to the starting offset at changelog app-account-totals-changelog-0");
    assertEquals("no_checkpoint", event.get("verdict"));
  }

  @Test
  void otherLinesAreNotEvents() {
    assertNull(StoreLogTap.eventOf("[main] INFO org.apache.kafka.streams.KafkaStreams - started"));
    assertNull(
        StoreLogTap.eventOf(
            "[main] INFO org.apache.kafka.streams.processor.internals.StateDirectory - State"
                + " store account-totals did not find checkpoint offsets while stores are not"
                + " empty"));
  }
}
