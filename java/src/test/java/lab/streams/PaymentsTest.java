package lab.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** A payment's account and amount from its id, as engine/scenarios/streams.py derives the truth. */
class PaymentsTest {
  @Test
  void accountsTakeTheIdsInTurn() {
    long[] expected = {0, 1, 2, 0, 1, 2, 0};
    for (int id = 0; id < expected.length; id++) {
      assertEquals(expected[id], Payments.accountOf(id, 3));
    }
  }

  @Test
  void amountsRunFromTenToFiftyAndAgain() {
    long[] expected = {10, 20, 30, 40, 50, 10, 20};
    for (int id = 0; id < expected.length; id++) {
      assertEquals(expected[id], Payments.amountOf(id));
    }
  }
}
