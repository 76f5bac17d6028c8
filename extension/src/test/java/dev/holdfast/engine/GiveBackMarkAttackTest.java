package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attacks on the marks of commit 3c486f0: an acquisition that finished a failed unlock() leaves
 * {@code FINISHED_BY_NEWEST} (RedLock, MultiLock); {@link CompositeLock#giveBackSection()} turns
 * it into "settled" so that the application's retry of that unlock returns at once; and on
 * {@code RedisLock.giveBack()/returnTaken}, whose refused release now ends a last section as a
 * final release in doubt ({@code oweFailedRelease}). Members live on client {@link #b}, behind a
 * {@link CommandProxy}: a chosen script call can be refused ({@code -OOM}: not run).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class GiveBackMarkAttackTest extends ProxiedRedLockFixture {

  private DistributedLock rivalY;

  @BeforeEach
  void rivalOfY() {
    rivalY = rival.getLock("y");
  }

  private static Object tryOutcome(DistributedLock lock) {
    try {
      return lock.tryLock();
    } catch (RuntimeException e) {
      return e;
    }
  }

  private String state(String... keys) {
    StringBuilder s = new StringBuilder();
    for (String k : keys) {
      s.append(k).append('=').append(count(k, b)).append(' ');
    }
    return s.toString().trim();
  }

  private boolean rivalTakesRed() {
    boolean took = rivalRed.tryLock();
    if (took) {
      rivalRed.unlock();
    }
    return took;
  }

  /** The thread holds the RedLock twice; its inner unlock fails (q1, q2 refused). */
  private void outerAndFailedInnerRedUnlock() throws Exception {
    assertTrue(red.tryLock(), "outer: every vote");
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "inner: every vote");
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red),
        "the inner unlock: only q0 released");
  }

  /**
   * Several rounds: the thread holds the RedLock twice, its inner unlock fails. Before the
   * retry, a multi-lock {RedLock, y} waits for y (busy all along): each round re-enters the
   * RedLock and gives it back. The first round finishes the failed unlock and, giving it back,
   * leaves it settled; the next rounds take the settled record and must leave it settled again.
   * The application's retry then closes nothing, and the outer section stays open.
   */
  @Test
  void failedInnerUnlock_thenMultiLockWaitsSeveralRounds_retryLeavesOuterOpen()
      throws Exception {
    outerAndFailedInnerRedUnlock();
    rivalY.lock();
    Object outcome;
    try {
      outcome = b.getMultiLock(red, b.getLock("y")).tryLock(600, TimeUnit.MILLISECONDS);
    } finally {
      rivalY.unlock();
    }
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(red);
    String s = state("q0", "q1", "q2", "y") + " (retry: " + retry + ")";
    boolean rivalTook = rivalTakesRed();
    int count = red.getHoldCount();
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertFalse(rivalTook, "a rival took the RedLock during the outer section: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertEquals(1, count, s);
    assertNull(outer, "the outer unlock; " + s);
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * Nested two deep: the thread holds the RedLock twice, its inner unlock fails. Before the
   * retry, a multi-lock {{RedLock, x}, y} takes {RedLock, x} (the RedLock's acquisition
   * finishes the failed unlock and leaves its mark), finds y busy and gives {RedLock, x} back:
   * that give-back is {RedLock, x}.unlock(), which calls the RedLock's plain unlock() (it drops
   * the mark, no "settled"). The application's retry of the inner unlock must then close
   * nothing: the outer section stays open (no rival) until the outer unlock.
   */
  @Test
  // A DEFECT of round 38, fixed.
  void failedInnerUnlock_thenTwoDeepMultiGivenBack_retryLeavesOuterOpen() throws Exception {
    outerAndFailedInnerRedUnlock();
    rivalY.lock();
    DistributedLock mid = b.getMultiLock(red, b.getLock("x"));
    Object outcome = tryOutcome(b.getMultiLock(mid, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(red);
    String s = state("q0", "q1", "q2", "x") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean held = red.isHeldByCurrentThread();
    boolean rivalTook = rivalTakesRed();
    int count = red.getHoldCount();
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertFalse(rivalTook, "a rival took the RedLock during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertEquals(1, count, s);
    assertNull(outer, "the outer unlock; " + s);
    awaitFree("q0", "q1", "q2", "x", "y");
  }

  /**
   * The same with nested multi-locks only: the thread holds {m0, m1} twice, its inner unlock
   * fails (m1 refused); {{{m0, m1}, z}, y} takes {{m0, m1}, z} and gives it back (y busy). The
   * retry of the inner unlock must leave the outer section open.
   */
  @Test
  // A DEFECT of round 38, fixed.
  void nestedFailedInnerUnlock_thenTwoDeepMultiGivenBack_retryLeavesOuterOpen() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: m1 refused");
    rivalY.lock();
    DistributedLock mid = b.getMultiLock(inner, b.getLock("z"));
    Object outcome = tryOutcome(b.getMultiLock(mid, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("m0", "m1", "z") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean held = inner.isHeldByCurrentThread();
    boolean rivalTook = rivalTakes("m0");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(inner);
    assertFalse(rivalTook, "a rival took m0 during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertNull(outer, "the outer unlock; " + s);
    awaitFree("m0", "m1", "z", "y");
  }

  /**
   * The application's own re-acquisition finishes the failed inner unlock (mark left); then a
   * multi-lock {RedLock, y} re-enters the RedLock (its acquisition drops the mark) and gives it
   * back (y busy). The application's two unlocks close its two open sections: nothing left.
   */
  @Test
  void appReacquisitionMark_thenMultiGivesBack_twoUnlocksBalance() throws Exception {
    outerAndFailedInnerRedUnlock();
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "again: finishes the failed one");
    assertEquals(2, red.getHoldCount(), state("q0", "q1", "q2"));
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    String s = state("q0", "q1", "q2") + " (multi: " + outcome + ")";
    assertEquals(2, red.getHoldCount(), s);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the newest unlock; " + s);
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the outer section: " + s);
    assertEquals(1, red.getHoldCount(), state("q0", "q1", "q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * The mark left by the application's re-acquisition; then the application takes and unlocks
   * a multi-lock {RedLock, x} (its unlock calls the RedLock's). The application's two RedLock
   * unlocks then close its two open sections.
   */
  @Test
  void appReacquisitionMark_thenMultiTakenAndUnlocked_balances() throws Exception {
    outerAndFailedInnerRedUnlock();
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "again: finishes the failed one");
    DistributedLock multi = b.getMultiLock(red, b.getLock("x"));
    assertTrue(multi.tryLock(), "RedLock + x");
    assertEquals(3, red.getHoldCount(), state("q0", "q1", "q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the newest unlock");
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the outer section");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, red.getHoldCount());
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "x");
  }

  /**
   * Failed inner unlock; then a failed RedLock acquisition (rival holds q0, q1's and q2's votes
   * refused): the record stays; then a multi-lock {RedLock, y} takes the RedLock (finishing the
   * failed unlock) and gives it back (y busy): settled. The retry returns at once, the outer
   * section stays open until the outer unlock.
   */
  @Test
  void failedUnlock_failedAcquisition_thenMultiGivesBack_retryLeavesOuterOpen()
      throws Exception {
    outerAndFailedInnerRedUnlock();
    commands.arm(nthScriptOn("q0", 1)).answer(OOM);
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    Object failed = tryOutcome(red);
    assertFalse(Boolean.TRUE.equals(failed), "every vote refused");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(red);
    String s = state("q0", "q1", "q2") + " (failed: " + failed + "; multi: " + outcome
        + "; retry: " + retry + ")";
    boolean held = red.isHeldByCurrentThread();
    boolean rivalTook = rivalTakesRed();
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertFalse(rivalTook, "a rival took the RedLock during the outer section: " + s);
    assertNull(outer, "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * Failed inner unlock; a multi-lock {RedLock, y} takes the RedLock (finishing the failed
   * unlock: mark) and gives it back (y busy), but that give-back's releases of q1 and q2 are
   * refused, and so are their retries as give-backs (owed on q1's and q2's holds); the mark
   * becomes "settled". The retry returns at once; the outer section stays open; the outer unlock
   * finishes the owed give-backs and closes it: nothing left, no loss.
   */
  @Test
  void failedInnerUnlock_thenMultiGiveBackRefused_retryAndOuterBalance() throws Exception {
    outerAndFailedInnerRedUnlock();
    rivalY.lock();
    // q1's script calls from here: round's vote, give-back of the failed section, the round's
    // give-back release (refused), its retry as a give-back (refused).
    commands.arm(nthScriptOn("q1", 3)).answer(OOM);
    commands.arm(nthScriptOn("q1", 3)).answer(OOM);
    commands.arm(nthScriptOn("q2", 3)).answer(OOM);
    commands.arm(nthScriptOn("q2", 3)).answer(OOM);
    Object outcome = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    String afterRound = state("q0", "q1", "q2") + " (multi: " + outcome + ")";
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(red);
    String s = afterRound + " then " + state("q0", "q1", "q2") + " (retry: " + retry + ")";
    boolean held = red.isHeldByCurrentThread();
    boolean rivalTook = rivalTakesRed();
    int count = red.getHoldCount();
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertFalse(rivalTook, "a rival took the RedLock during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertEquals(1, count, s);
    assertNull(outer, "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * The RedLock held three times; the innermost unlock fails; a multi-lock {RedLock, y} finishes
   * it and gives it back (settled); the retry returns at once; the two remaining unlocks close
   * the two remaining sections, the RedLock staying the thread's until the last.
   */
  @Test
  void thriceHeld_failedUnlock_multiGivesBack_balances() throws Exception {
    assertTrue(red.tryLock(), "first");
    outerAndFailedInnerRedUnlock();
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the retry; " + state("q0", "q1", "q2"));
    assertEquals(2, red.getHoldCount(), state("q0", "q1", "q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the second unlock");
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the first section");
    assertEquals(1, red.getHoldCount(), state("q0", "q1", "q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the first unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * The same RedLock twice in one multi-lock, once inside a nested one {RedLock', z} (another
   * handle, members reordered: same identity): the failed inner unlock's record is finished by the first handle's acquisition
   * (mark), which the second's acquisition drops; y busy, both are given back. The application's
   * retry of its failed unlock must close nothing: the outer section stays open.
   */
  @Test
  // A DEFECT of round 38, fixed.
  void failedInnerUnlock_thenMultiWithRedLockTwiceNested_retryLeavesOuterOpen() throws Exception {
    outerAndFailedInnerRedUnlock();
    DistributedLock reordered = b.getRedLock(b.getLock("q2"), b.getLock("q1"), b.getLock("q0"));
    rivalY.lock();
    Object outcome;
    try {
      outcome = tryOutcome(
          b.getMultiLock(red, b.getMultiLock(reordered, b.getLock("z")), b.getLock("y")));
    } finally {
      rivalY.unlock();
    }
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy (or refused: " + outcome + ")");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(red);
    String s = state("q0", "q1", "q2") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean held = red.isHeldByCurrentThread();
    boolean rivalTook = rivalTakesRed();
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertFalse(rivalTook, "a rival took the RedLock during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertNull(outer, "the outer unlock; " + s);
    awaitFree("q0", "q1", "q2", "y", "z");
  }

  /**
   * The thread holds {RedLock, x} twice; its inner unlock fails (the RedLock's q1 and q2
   * releases refused). Before the retry, {{RedLock, x}, y} takes it (finishing the failed
   * unlock) and gives it back (y busy). The retry returns at once; the outer section stays open
   * until the outer unlock.
   */
  @Test
  void multiWithRedLockHeldTwice_failedInnerUnlock_thenGivenBack_retryLeavesOuterOpen() {
    DistributedLock mid = b.getMultiLock(red, b.getLock("x"));
    assertTrue(mid.tryLock(), "outer");
    assertTrue(mid.tryLock(), "inner");
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(mid),
        "the inner unlock: the RedLock's majority refused");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(mid, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(mid);
    String s = state("q0", "q1", "q2", "x") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean held = mid.isHeldByCurrentThread();
    boolean rivalTook = rivalTakesRed() || rivalTakes("x");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(mid);
    assertFalse(rivalTook, "a rival took the RedLock or x during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertNull(outer, "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "x", "y");
  }

  /** The thread held the RedLock once; its unlock fails (q1's and q2's releases refused). */
  private void failedOnlyRedUnlock() {
    assertTrue(red.tryLock(), "every vote");
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red),
        "the unlock: only q0 released");
  }

  /**
   * The RedLock's only unlock fails (q1, q2 refused); the application takes it again with q1's
   * vote refused (q0 + q2): that acquisition gives back the failed unlock's sections, and q1's
   * (the hold's only one: from 1) is refused again, so q1's hold ends as a final release in
   * doubt. q1 must end (free in Redis), the RedLock stay the thread's on q0 + q2 until its
   * unlock, which succeeds; no loss.
   */
  @Test
  void reacquiredWithoutQ1_q1GiveBackOfOnlySectionRefused_endsAndBalances() throws Exception {
    failedOnlyRedUnlock();
    commands.arm(nthScriptOn("q1", 1)).answer(OOM); // the new round's vote
    commands.arm(nthScriptOn("q1", 1)).answer(OOM); // the give-back of the failed section
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "q0 + q2");
    String s = state("q0", "q1", "q2");
    assertEquals(1, red.getHoldCount(), s);
    assertFalse(rivalTakesRed(), "a rival took the RedLock while the thread holds it: " + s);
    awaitFree("q1");
    assertEquals("1", count("q0", b), s);
    assertEquals("1", count("q2", b), s);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The same, q1's give-back of the failed section held back (no answer: it may run) and
   * delivered late: q1 must end, the RedLock's unlock succeed, no loss, never a rival while it
   * is held.
   */
  @Test
  void reacquiredWithoutQ1_q1GiveBackUnanswered_deliveredLate_balances() throws Exception {
    failedOnlyRedUnlock();
    commands.arm(nthScriptOn("q1", 1)).answer(OOM); // the new round's vote
    CommandProxy.Rule late = commands.arm(nthScriptOn("q1", 1));
    Object outcome;
    try {
      outcome = red.tryLock(0, 20_000, TimeUnit.MILLISECONDS);
    } finally {
      late.forward();
    }
    String s = state("q0", "q1", "q2") + " (" + outcome + ")";
    assertEquals(Boolean.TRUE, outcome, s);
    assertTrue(late.taken(), "q1's give-back was held back: " + s);
    assertFalse(rivalTakesRed(), "a rival took the RedLock while the thread holds it: " + s);
    assertEquals(1, red.getHoldCount(), s);
    awaitFree("q1");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Failed inner unlock; the application then takes a multi-lock {RedLock, x} (its acquisition
   * holds: it finishes the failed unlock, mark) and unlocks it (the RedLock's plain unlock()
   * drops the mark). As the contract says, the unlocks after a successful acquisition are the
   * same whatever the failed call did: the application's one remaining RedLock unlock closes
   * the outer section, which stays the thread's until then.
   */
  @Test
  void failedInnerUnlock_thenMultiTakenAndUnlocked_outerUnlockBalances() throws Exception {
    outerAndFailedInnerRedUnlock();
    DistributedLock multi = b.getMultiLock(red, b.getLock("x"));
    assertTrue(multi.tryLock(), "RedLock + x");
    assertEquals(2, red.getHoldCount(), state("q0", "q1", "q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    String s = state("q0", "q1", "q2", "x");
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the outer section: " + s);
    assertEquals(1, red.getHoldCount(), s);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "x");
  }

  /**
   * Nested multi-lock: the thread holds {m0, m1} twice, its inner unlock fails (m1 refused);
   * its next acquisition of {m0, m1} fails (m0's re-entry refused) after finishing m1's owed
   * release (a settled record); then {{m0, m1}, y} takes it and gives it back (y busy). The
   * retry of the inner unlock returns at once; the outer section stays open until its unlock.
   */
  @Test
  void nestedFailedUnlock_failedAcquisition_thenGivenBack_retryLeavesOuterOpen() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: m1 refused");
    commands.arm(nthScriptOn("m0", 1)).answer(OOM);
    Object failed = tryOutcome(inner);
    assertFalse(Boolean.TRUE.equals(failed), "m0's re-entry refused");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("m0", "m1") + " (failed: " + failed + "; multi: " + outcome
        + "; retry: " + retry + ")";
    boolean held = inner.isHeldByCurrentThread();
    boolean rivalTook = rivalTakes("m0") || rivalTakes("m1");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(inner);
    assertFalse(rivalTook, "a rival took m0 or m1 during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertNull(outer, "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("m0", "m1", "y");
  }

  /**
   * Two threads on one client, each holding its own RedLock of other members twice: thread A's
   * inner unlock fails and a round {RedLock_A, y} finishes and gives it back (settled); thread
   * B meanwhile does the same steps on its RedLock of r0, r1, r2 without a failure. Each
   * thread's records are its own: A's retry returns at once, B's unlocks close its sections,
   * and both outer sections stay open until their unlocks.
   */
  @Test
  void twoThreads_marksAreThreadLocal() throws Exception {
    DistributedLock redB = b.getRedLock(b.getLock("r0"), b.getLock("r1"), b.getLock("r2"));
    outerAndFailedInnerRedUnlock();
    java.util.concurrent.atomic.AtomicReference<Throwable> other =
        new java.util.concurrent.atomic.AtomicReference<>();
    java.util.concurrent.CountDownLatch bHolds = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch aDone = new java.util.concurrent.CountDownLatch(1);
    Thread t = new Thread(() -> {
      try {
        assertTrue(redB.tryLock(), "B outer");
        assertTrue(redB.tryLock(), "B inner");
        bHolds.countDown();
        assertTrue(aDone.await(30, TimeUnit.SECONDS));
        redB.unlock();
        assertEquals(1, redB.getHoldCount());
        redB.unlock();
      } catch (Throwable e) {
        other.set(e);
        bHolds.countDown();
      }
    });
    t.start();
    assertTrue(bHolds.await(30, TimeUnit.SECONDS));
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "A's retry");
    assertFalse(rivalTakesRed(), "a rival took A's RedLock during its outer section");
    aDone.countDown();
    t.join(30_000);
    assertNull(other.get(), "thread B: " + other.get());
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "A's outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "r0", "r1", "r2", "y");
  }

  /**
   * A RedLock round loses (a rival holds q1 and q2) and gives back its fresh vote q0; that
   * release is refused, so q0's hold ends as a final release in doubt (abandoned in the
   * background). The rival lets go and the same tryLock's next round takes q0 again: that new
   * hold must not be ended by the old hold's abandon (q0 stays in Redis while the thread holds
   * the RedLock), and the unlock balances, no loss.
   */
  @Test
  void lostRoundVoteRefused_thenNextRoundRetakesQ0_newHoldKept() throws Exception {
    java.util.concurrent.CountDownLatch rivalHolds = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.atomic.AtomicReference<Throwable> other =
        new java.util.concurrent.atomic.AtomicReference<>();
    CommandProxy.Rule refused = commands.arm(nthScriptOn("q0", 2));
    refused.answer(OOM); // the first round's give-back of q0
    Thread t = new Thread(() -> {
      DistributedLock rq1 = rival.getLock("q1");
      DistributedLock rq2 = rival.getLock("q2");
      try {
        rq1.lock();
        rq2.lock();
        rivalHolds.countDown();
        Thread.sleep(700); // the first round(s) lose meanwhile
        rq1.unlock();
        rq2.unlock();
      } catch (Throwable e) {
        other.set(e);
        rivalHolds.countDown();
      }
    });
    t.start();
    assertTrue(rivalHolds.await(30, TimeUnit.SECONDS));
    Object outcome;
    try {
      outcome = red.tryLock(20_000, 20_000, TimeUnit.MILLISECONDS);
    } catch (RuntimeException e) {
      outcome = e;
    }
    t.join(30_000);
    assertNull(other.get(), "rival thread: " + other.get());
    assertEquals(Boolean.TRUE, outcome, state("q0", "q1", "q2"));
    assertTrue(refused.taken(), "the first round's give-back of q0 was refused");
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
    while (System.nanoTime() < end) {
      assertEquals("1", count("q0", b), "q0 while the thread holds the RedLock: "
          + state("q0", "q1", "q2"));
      Thread.sleep(50);
    }
    assertFalse(rivalTakesRed(), "a rival took the RedLock while the thread holds it");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The multi-lock analogue of the RedLock taken twice in one round: the thread holds {m0, m1}
   * twice, its inner unlock fails (m1 refused); {{m0, m1}, {{m0, m1}', z}, y} (y busy) takes
   * {m0, m1} twice, the second acquisition dropping the first one's mark, and gives both back.
   * The retry of the inner unlock must leave the outer section open.
   */
  @Test
  // A DEFECT of round 38, fixed.
  void nestedFailedInnerUnlock_thenMultiTakesItTwice_retryLeavesOuterOpen() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: m1 refused");
    DistributedLock again = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    rivalY.lock();
    Object outcome;
    try {
      outcome = tryOutcome(
          b.getMultiLock(inner, b.getMultiLock(again, b.getLock("z")), b.getLock("y")));
    } finally {
      rivalY.unlock();
    }
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy (or refused: " + outcome + ")");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("m0", "m1", "z") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean held = inner.isHeldByCurrentThread();
    boolean rivalTook = rivalTakes("m0");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(inner);
    assertFalse(rivalTook, "a rival took m0 during the outer section: " + s);
    assertTrue(held, "the outer section is still open: " + s);
    assertNull(retry, "the retry of the inner unlock; " + s);
    assertNull(outer, "the outer unlock; " + s);
    awaitFree("m0", "m1", "z", "y");
  }
}
