package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attacks on the multi-lock's owed record (commit 36ead1d: each {@code Due} keeps the member's
 * {@code Hold}; a retry releases the member only while the thread's hold is that same object).
 * Client A talks to Redis directly, client B through a {@link BlackHoleProxy}, so that B's
 * member release fails while A's succeeds. Seven of these probes showed defects of that change
 * and of the record before it, fixed since: a member's pending release that a re-entry found had
 * run was released again by the retry (also for read and fair members, and after a multi-lock
 * tryLock that gave up); the retry reported the loss of a newer hold of a member the failed call
 * had released; and the record was pruned before an acquisition that never reached the member.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttackTest extends MultiLockOwedFixture {

  // ---- question 1: a release that did not run, the member re-entered alone ----

  /**
   * The thread holds B alone, then the multi-lock (B count 2). The multi-lock's unlock gets no
   * answer for B and its request never reached Redis (black hole): B keeps count 2, its release
   * pending. The thread re-enters B alone (the acquisition settles the pending release: it did
   * not run; count 3, same Hold). The retry must release exactly one section of B.
   */
  @Test
  void releaseNotRun_memberReenteredAlone_retryReleasesExactlyOne() {
    DistributedLock bAlone = b.getLock("b1");
    DistributedLock multi = a.getMultiLock(a.getLock("a1"), b.getLock("b1"));
    bAlone.lock();
    multi.lock();
    failUnlockOnB(multi);
    assertEquals("2", redisState.hget("b1", RedisProbe.fieldOf(b)), "the release never ran");
    bAlone.lock(); // settles the pending release (not run), then re-enters: 3
    assertNull(unlockOutcome(multi), "the retry finishes B's release");
    assertEquals(2, bAlone.getHoldCount(), "the thread's two single sections of B remain");
    assertEquals("2", redisState.hget("b1", RedisProbe.fieldOf(b)), "Redis agrees");
    assertFalse(redisState.exists("a1"), "A was released by the failed call");
    bAlone.unlock();
    bAlone.unlock();
    assertFalse(redisState.exists("b1"), "B's own unlocks release it");
  }

  /**
   * As above, but B's release RAN in Redis and only its reply was lost (count 1 there, the client
   * still counts 2 with the release pending). The thread re-enters B alone: that acquisition
   * settles the pending release — it ran, so the multi-lock's release of B is DONE (count 1,
   * then 2, the same Hold object). The retry still finds "the same hold with open sections" and
   * releases B a second time: the thread's own single holds of B (two lock() calls, no unlock)
   * are down to one, and its second bAlone.unlock() finds B not held — B was free in Redis
   * while the thread believed it held it.
   */
  @Test
  void releaseRanUnanswered_memberReenteredAlone_retryDoesNotReleaseTwice() {
    DistributedLock bAlone = b.getLock("b2");
    DistributedLock multi = a.getMultiLock(a.getLock("a2"), b.getLock("b2"));
    bAlone.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole(); // B's release (newest first) runs, its reply is lost
    assertFailed(multi);
    proxy.blackHole(false);
    assertEquals("1", redisState.hget("b2", RedisProbe.fieldOf(b)), "B's release ran");
    bAlone.lock(); // settles the pending release: it ran (1), then re-enters (2)
    RuntimeException retry = unlockOutcome(multi);
    int count = bAlone.getHoldCount();
    String inRedis = redisState.hget("b2", RedisProbe.fieldOf(b));
    System.out.println("ran, re-entered: retry=" + retry + " count=" + count + " redis="
        + inRedis);
    assertEquals(2, count, "the thread took B alone twice and released neither: the multi-lock's "
        + "release of B was done by the settlement, the retry released B once more");
    assertEquals("2", inRedis, "Redis count of the thread's field");
  }

  /**
   * The same over-release through a whole-multi-lock re-acquisition (question 3): the multi-lock
   * is held twice (inner failed unlock whose release of B ran unanswered), then taken a third
   * time: the record kept B's Due (its hold still has sections) but the acquisition then
   * settles the pending release as ran. The three unlocks that follow must each release one
   * section of every member; the third finds B not held.
   */
  @Test
  void releaseRanUnanswered_multiRelocked_unlockCountsMatch() {
    DistributedLock multi = a.getMultiLock(a.getLock("a3"), b.getLock("b3"));
    DistributedLock aAlone = a.getLock("a3");
    DistributedLock bAlone = b.getLock("b3");
    multi.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi); // the inner unlock: A 2 -> 1, B's release ran unanswered
    proxy.blackHole(false);
    multi.lock(); // A 2; B: pending settled as ran (1), then 2: the failed unlock is done
    RuntimeException first = unlockOutcome(multi);
    int aAfterFirst = aAlone.getHoldCount();
    int bAfterFirst = bAlone.getHoldCount();
    RuntimeException second = unlockOutcome(multi);
    RuntimeException third = unlockOutcome(multi);
    System.out.println("relocked: first=" + first + " (a=" + aAfterFirst + ", b=" + bAfterFirst
        + ") second=" + second + " third=" + third);
    assertNull(first, "the inner unlock of the re-taken multi-lock");
    assertEquals(1, aAfterFirst, "A: one section left");
    assertEquals(1, bAfterFirst, "B: one section left, as A (not released twice)");
    assertNull(second, "the outer unlock releases every member");
    assertFalse(redisState.exists("a3"));
    assertFalse(redisState.exists("b3"));
    assertTrue(third instanceof IllegalMonitorStateException, "a further unlock is of nothing");
  }

  /** Question 3, final release in doubt: the re-acquisition settles it; counts match. */
  @Test
  void finalReleaseInDoubt_multiRelocked_unlockCountsMatch() {
    DistributedLock multi = a.getMultiLock(a.getLock("a4"), b.getLock("b4"));
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi); // A released; B's final release in doubt (it ran)
    proxy.blackHole(false);
    multi.lock();
    multi.lock();
    assertNull(unlockOutcome(multi), "inner unlock of the re-taken multi-lock");
    assertEquals(1, a.getLock("a4").getHoldCount());
    assertEquals(1, b.getLock("b4").getHoldCount());
    assertNull(unlockOutcome(multi), "outer unlock");
    assertFalse(redisState.exists("a4"));
    assertFalse(redisState.exists("b4"));
    assertTrue(unlockOutcome(multi) instanceof IllegalMonitorStateException,
        "a further unlock is of nothing");
  }

  /**
   * Question 3, release not run (count 2): the re-acquisition finishes the owed release, so the
   * unlocks that follow are the same as when the release ran (the thread cannot tell which).
   */
  @Test
  void releaseNotRun_multiRelocked_unlockCountsMatch() {
    DistributedLock multi = a.getMultiLock(a.getLock("a5"), b.getLock("b5"));
    DistributedLock aAlone = a.getLock("a5");
    DistributedLock bAlone = b.getLock("b5");
    takeTwiceThenFailUnlock(multi);
    // A 2, B 3 (pending settled: not run), then the acquisition finishes the owed release: B 2
    multi.lock();
    assertEquals(2, aAlone.getHoldCount());
    assertEquals(2, bAlone.getHoldCount(), "the re-acquisition finished B's owed release");
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("a5"));
    assertFalse(redisState.exists("b5"));
    assertTrue(unlockOutcome(multi) instanceof IllegalMonitorStateException,
        "a further unlock is of nothing: the same count as when the release ran");
  }

  // ---- question 2: in doubt, taken alone, released, taken again ----

  @Test
  void finalReleaseInDoubt_memberTakenReleasedRetaken_newestHoldSurvives() {
    DistributedLock bAlone = b.getLock("b6");
    DistributedLock multi = a.getMultiLock(a.getLock("a6"), b.getLock("b6"));
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi);
    proxy.blackHole(false);
    bAlone.lock();
    bAlone.unlock();
    bAlone.lock();
    RuntimeException retry = unlockOutcome(multi);
    System.out.println("taken, released, retaken: retry=" + retry);
    assertTrue(bAlone.isHeldByCurrentThread(), "the newest single hold survives the retry");
    assertEquals("1", redisState.hget("b6", RedisProbe.fieldOf(b)));
    bAlone.unlock();
    assertFalse(redisState.exists("b6"));
  }

  // ---- question 4: a member lost meanwhile ----

  /**
   * B's inner release (count 2) gets no answer and never ran; B then expires in Redis (its fixed
   * lease runs out while the link is black) and a rival takes it. The retry must report the loss
   * and leave the rival's hold alone.
   */
  @Test
  void pendingMemberLostMeanwhile_retryReportsLoss_rivalKeepsLock() {
    DistributedLock multi = a.getMultiLock(a.getLock("a7"), b.getLock("b7"));
    assertTrue(tryLock(multi, 2_000));
    assertTrue(tryLock(multi, 2_000));
    RuntimeException retry = failThenRetryAfterRivalTakesB(multi, "b7");
    assertNotNull(retry, "the retry reports B's loss");
    assertTrue(retry instanceof IllegalMonitorStateException || retry instanceof LockException,
        "a loss or failure: " + retry);
  }

  /** The same with B's final release in doubt (never ran): settling it spares the rival. */
  @Test
  void inDoubtMemberExpiredMeanwhile_retrySparesRival() {
    DistributedLock multi = a.getMultiLock(a.getLock("a8"), b.getLock("b8"));
    assertTrue(tryLock(multi, 2_000));
    failThenRetryAfterRivalTakesB(multi, "b8");
  }

  /**
   * A failed unlock (B black-holed) until B's lease runs out in Redis and the rival takes it, then
   * the retry, which must leave the rival's hold alone. {@return the retry's exception, or null}
   */
  private RuntimeException failThenRetryAfterRivalTakesB(DistributedLock multi, String bName) {
    proxy.blackHole(true);
    assertFailed(multi);
    Await.until(Duration.ofSeconds(20), () -> !redisState.exists(bName), "B's lease ran out");
    DistributedLock other = rival.getLock(bName);
    assertTrue(other.tryLock(), "the rival takes B");
    proxy.blackHole(false);
    RuntimeException retry = unlockOutcome(multi);
    System.out.println(bName + " lost meanwhile: retry=" + retry);
    assertTrue(other.isHeldByCurrentThread(), "the rival still holds B");
    assertEquals("1", redisState.hget(bName, RedisProbe.fieldOf(rival)));
    other.unlock();
    return retry;
  }

  // ---- question 5: new handles ----

  @Test
  void releaseNotRun_newHandlesSameNames_recordStillApplies() {
    DistributedLock multi = a.getMultiLock(a.getLock("a9"), b.getLock("b9"));
    takeTwiceThenFailUnlock(multi); // A 2 -> 1; B still 2
    DistributedLock again = a.getMultiLock(b.getLock("b9"), a.getLock("a9")); // other order too
    assertNull(unlockOutcome(again), "the retry through new handles finishes B only");
    assertEquals(1, a.getLock("a9").getHoldCount(), "A not released twice");
    assertEquals(1, b.getLock("b9").getHoldCount());
    assertNull(unlockOutcome(a.getMultiLock(a.getLock("a9"), b.getLock("b9"))));
    assertFalse(redisState.exists("a9"));
    assertFalse(redisState.exists("b9"));
  }

  // ---- question 6: the owing client closed, a new client for the same address ----

  @Test
  void owingClientClosed_newClientSameAddress_retryLeavesNewClientsHold() {
    DistributedLock multi = a.getMultiLock(a.getLock("a10"), b.getLock("b10"));
    multi.lock();
    multi.lock();
    proxy.blackHole(true);
    assertFailed(multi); // B's inner release pending (not run)
    b.close();
    proxy.blackHole(false);
    LockClient b2 = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    DistributedLock b2Lock = b2.getLock("b10");
    // B is still held in Redis by the closed client's field (it expires with its lease); the new
    // client's own lock of another name, and a multi-lock of the new handles.
    DistributedLock b2Other = b2.getLock("b10x");
    b2Other.lock();
    RuntimeException retry = unlockOutcome(multi);
    System.out.println("owing client closed: retry=" + retry);
    assertTrue(b2Other.isHeldByCurrentThread(), "the new client's hold is untouched");
    assertEquals("1", redisState.hget("b10x", RedisProbe.fieldOf(b2)));
    assertFalse(b2Lock.isHeldByCurrentThread(), "the new client never took b10");
    assertEquals(1, a.getLock("a10").getHoldCount(), "A's outer section remains");
    b2Other.unlock();
  }

  // ---- question 7: other member kinds, loss reports of members released by the failed call ----

  /** The over-release of question 1 with a read lock as the member. */
  @Test
  void readMember_releaseRanUnanswered_reenteredAlone_retryDoesNotReleaseTwice() {
    warmUp(b.getReadWriteLock("warm-rw").readLock());
    overReleaseAfterReentry(b.getReadWriteLock("rw11").readLock(),
        b.getReadWriteLock("rw11").readLock(), "rw11");
  }

  /** The over-release of question 1 with a fair lock as the member. */
  @Test
  void fairMember_releaseRanUnanswered_reenteredAlone_retryDoesNotReleaseTwice() {
    warmUp(b.getFairLock("warm-fair"));
    overReleaseAfterReentry(b.getFairLock("f12"), b.getFairLock("f12"), "f12");
  }

  /**
   * The same root cause through a multi-lock acquisition that gives up: B (sorted first) is
   * taken — settling its pending release as ran — then A is busy (a rival holds it), so the
   * round gives B back. The retry then releases B once more: the thread's single hold of B,
   * never unlocked, is gone.
   */
  @Test
  void releaseRanUnanswered_failedMultiTryLock_retryDoesNotReleaseOwnHold() throws Exception {
    DistributedLock bAlone = b.getLock("m13-0");
    DistributedLock multi = a.getMultiLock(a.getLock("m13-1"), b.getLock("m13-0"));
    bAlone.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole(); // newest first: A (m13-1) is released first, then B
    RuntimeException first = unlockOutcome(multi);
    proxy.blackHole(false);
    assertTrue(first instanceof LockException, "B's member got no answer: " + first);
    DistributedLock rivalA = rival.getLock("m13-1");
    assertTrue(rivalA.tryLock(), "the rival takes A");
    assertFalse(multi.tryLock(300, MILLISECONDS), "A is busy: the multi-lock gives up");
    rivalA.unlock();
    RuntimeException retry = unlockOutcome(multi);
    int count = bAlone.getHoldCount();
    System.out.println("failed tryLock: retry=" + retry + " count=" + count);
    assertEquals(1, count, "the thread's single hold of B was never unlocked");
    assertEquals("1", redisState.hget("m13-0", RedisProbe.fieldOf(b)));
  }

  /**
   * A was released by the failed call (its hold forgotten). The thread then takes A alone with a
   * short lease, which runs out. The retry of the multi-lock's unlock finishes B's release; A's
   * new hold is the thread's own, not the multi-lock's: its loss is not the multi-lock's to
   * report (lostSinceReleased looks at whatever hold the thread has of A now, not the one the
   * failed call released).
   */
  @Test
  void releasedMemberRetakenAloneAndLost_retryDoesNotReportItsLoss() {
    DistributedLock aAlone = a.getLock("a14");
    DistributedLock multi = a.getMultiLock(a.getLock("a14"), b.getLock("b14"));
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi); // B's final release in doubt (ran); A released
    proxy.blackHole(false);
    assertTrue(tryLock(aAlone, 1_000), "the thread takes A alone");
    Await.until(Duration.ofSeconds(20), () -> !redisState.exists("a14"), "A's lease ran out");
    RuntimeException retry = unlockOutcome(multi);
    System.out.println("released member retaken and lost: retry=" + retry);
    assertNull(retry, "the multi-lock's release completed (B settled); A's newer hold is not "
        + "the multi-lock's: " + retry);
  }

  /**
   * B's final release is in doubt after a failed unlock. The thread then tries the multi-lock and
   * fails at once on A (sorted first, held by a rival), so B's acquisition — which would have
   * settled the doubt — never ran; the record used to be pruned before the acquisition. The
   * next unlock() should finish the failed release (settle B) as documented; without the record it unlocks
   * every member and reports A (released by the failed call) as not held.
   */
  @Test
  void finalReleaseInDoubt_failedMultiTryLockBeforeMember_retryStillFinishes() throws Exception {
    DistributedLock multi = a.getMultiLock(a.getLock("m15-0"), b.getLock("m15-1"));
    multi.lock();
    proxy.runNextScriptThenBlackHole(); // newest first: B (m15-1) is released first
    assertFailed(multi);
    proxy.blackHole(false);
    DistributedLock rivalA = rival.getLock("m15-0");
    assertTrue(rivalA.tryLock(), "the rival takes A");
    assertFalse(multi.tryLock(), "A is busy: nothing is taken");
    rivalA.unlock();
    RuntimeException retry = unlockOutcome(multi);
    System.out.println("in doubt, failed tryLock: retry=" + retry);
    assertNull(retry, "the retry finishes the failed release (B settled): " + retry);
  }

  private void overReleaseAfterReentry(DistributedLock member, DistributedLock alone,
      String key) {
    DistributedLock multi = a.getMultiLock(a.getLock("a-" + key), member);
    alone.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi);
    proxy.blackHole(false);
    System.out.println(key + ": after the failed unlock, Redis count="
        + redisState.hget(key, RedisProbe.fieldOf(b)) + " local=" + alone.getHoldCount());
    alone.lock(); // settles the pending release (ran), re-enters
    RuntimeException retry = unlockOutcome(multi);
    int count = alone.getHoldCount();
    System.out.println(key + ": retry=" + retry + " count=" + count);
    assertEquals(2, count, "the thread took the member alone twice and released neither");
  }

  private static boolean tryLock(DistributedLock lock, long leaseMillis) {
    try {
      return lock.tryLock(5_000, leaseMillis, MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
