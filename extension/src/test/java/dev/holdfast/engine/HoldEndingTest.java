package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The handshake between a force-unlock's check of this client's holds and a hold's final call
 * (attack round 30, found by reading): a check that finds the field gone while the final call is
 * in flight leaves the hold to that call; if the call is then refused, it must learn that the
 * check was skipped, whatever the order of the two threads. (Before, the refused call compared
 * the force-unlock's record time with its own send time: a final call sent after the record but
 * before the check was checked by neither.)
 */
class HoldEndingTest {

  private static Hold hold() {
    return new Hold(LockNames.of("", "ending"), 1, "client:1", "ending");
  }

  @Test
  void checkSkippingAnEndingHold_isReportedToTheRefusedCall() {
    Hold h = hold();
    h.ending(true);
    assertTrue(h.skipWhileEnding(), "the check leaves an ending hold to its call");
    assertTrue(h.endRefused(), "the refused call learns the check was skipped");
    assertFalse(h.ending(), "the hold goes on");
    assertFalse(h.endRefused(), "reported once");
  }

  @Test
  void refusedCallWithNoSkippedCheck_checksNothing_andALaterCheckSeesTheHold() {
    Hold h = hold();
    h.ending(true);
    assertFalse(h.endRefused(), "no check was skipped");
    assertFalse(h.skipWhileEnding(), "a later check sees a hold that is not ending: it decides");
  }

  @Test
  void aNewFinalCallStartsWithNothingSkipped() {
    Hold h = hold();
    h.ending(true);
    h.skipWhileEnding();
    h.ending(true); // e.g. a handoff after a refused release
    assertFalse(h.endRefused());
  }

  /**
   * Both threads race many times: either the check saw the hold not ending (it decides itself)
   * or the refused call is told — never neither.
   */
  @Test
  void racingCheckAndRefusal_neverBothMiss() throws Exception {
    for (int round = 0; round < 20_000; round++) {
      Hold h = hold();
      h.ending(true);
      CyclicBarrier start = new CyclicBarrier(2);
      AtomicBoolean skipped = new AtomicBoolean();
      CountDownLatch checked = new CountDownLatch(1);
      Thread check = new Thread(() -> {
        try {
          start.await(10, TimeUnit.SECONDS);
          skipped.set(h.skipWhileEnding());
        } catch (Exception e) {
          throw new IllegalStateException(e);
        } finally {
          checked.countDown();
        }
      });
      check.start();
      start.await(10, TimeUnit.SECONDS);
      boolean told = h.endRefused();
      assertTrue(checked.await(10, TimeUnit.SECONDS));
      check.join();
      // skipped and not told: nobody checks the hold (the gap); not skipped: the check decided.
      assertFalse(skipped.get() && !told, "round " + round + ": the check skipped the hold "
          + "and the refused call was not told");
    }
  }
}
