package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attacks on the RedLock "section without a member" of round 34: a re-entry that won its majority
 * without a member the thread holds must leave that member alone at the matching unlock(). Since
 * stop 31 each acquisition records the members it won ({@link RedLock#newestSection}), and
 * unlock() releases those only. Members {@code q0, q1, q2}
 * live on client {@link #b}, which talks through a {@link CommandProxy} so
 * that a chosen member's script can be refused ({@code -OOM}: not run); {@link #rival} holds a
 * RedLock of the same members whenever it can.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RedLockSectionAttackTest extends ProxiedRedLockFixture {

  /** The outer section on q0 + q2 (q1 held by a rival meanwhile). */
  private void outerOnQ0AndQ2() {
    DistributedLock rivalQ1 = rival.getLock("q1");
    rivalQ1.lock();
    try {
      assertTrue(red.tryLock(), "outer: q0 + q2, a majority");
    } finally {
      rivalQ1.unlock();
    }
    assertEquals("1", count("q0", b));
    assertNull(count("q1", b));
    assertEquals("1", count("q2", b));
  }

  /** A re-entry (fixed lease) whose vote on {@code refused} is answered -OOM (not run). */
  private void reenterWithout(String refused) {
    commands.arm(scriptOn(refused)).answer(OOM);
    try {
      assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "re-entry without " + refused);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /**
   * While the thread has a section of the RedLock open and no loss was reported, the rival's
   * RedLock of the same members never wins.
   */
  private void assertRivalCannotTake(String when) {
    boolean believed = red.isHeldByCurrentThread();
    boolean took = rivalRed.tryLock();
    if (took) {
      rivalRed.unlock();
    }
    assertFalse(took, "a rival took the RedLock while the thread has a section open " + when
        + " (q0=" + count("q0", b) + " q1=" + count("q1", b) + " q2=" + count("q2", b)
        + ", isHeldByCurrentThread " + believed + ", LockLost reports " + losses.count() + ")");
    assertTrue(believed, "the thread's open section is believed " + when);
  }

  /**
   * Found by a cluster soak's loss-report violation (seed -6501269311255863504), with the
   * RedLock's members on two clients: {@code q0} on {@link #b} (through the proxy), {@code q1}
   * and {@code q2} on {@link #a}. A re-entry whose vote on a member the thread already holds is
   * refused (there a {@code TRYAGAIN} of a slot migration; here an {@code -OOM} answer, equally
   * "not run") still wins a majority with the other members. An unlock() that released every
   * member made it that member's final release: its hold ended unreported, and the section the
   * thread still believed stood on a minority while a rival took the RedLock.
   *
   * <p>The episode: the outer section holds q0 + q2 (q1 was a rival's); a re-entry's vote on
   * q0 is refused without running (the soak's TRYAGAIN of a slot migration; here OOM) while q1
   * (fresh) and q2 vote yes: a majority, so the re-entry holds. Its section is not q0's: the
   * inner unlock, which released every member once, was q0's final release (a DEFECT, fixed): it
   * ended q0's hold unreported and left the outer section on q2 alone — a rival took the RedLock
   * the thread still believed. The inner unlock now leaves q0 alone.
   */
  @Test
  void redLockReentry_memberVoteRefused_innerUnlockMustNotEndThatMembersHold() {
    LossRecorder lossesA = LossRecorder.on(a);
    LossRecorder lossesB = LossRecorder.on(b);
    DistributedLock twoClients = a.getRedLock(b.getLock("q0"), a.getLock("q1"), a.getLock("q2"));
    DistributedLock rivalQ1 = rival.getLock("q1");
    DistributedLock rivalOfTwo = rival.getRedLock(rival.getLock("q0"), rival.getLock("q1"),
        rival.getLock("q2"));

    // Outer: q0 + q2 (q1 is the rival's), as the soak's episode began.
    rivalQ1.lock();
    assertTrue(twoClients.tryLock(), "outer: q0 + q2, a majority");
    rivalQ1.unlock();
    assertEquals("1", count("q0", b));
    assertEquals("1", count("q2", a));

    // Re-entry with a fixed lease: q0's vote refused (not run), q1 (fresh) + q2 vote yes.
    commands.arm(args -> args.get(0).toUpperCase(Locale.ROOT).startsWith("EVAL")).answer(OOM);
    boolean reentered;
    try {
      reentered = twoClients.tryLock(0, 2297, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    assertTrue(reentered, "re-entry: q1 + q2, a majority");
    assertEquals("1", count("q0", b), "q0's re-entry did not run: q0 counts 1, the RedLock 2");
    assertEquals("1", count("q1", a));
    assertEquals("2", count("q2", a));

    // Inner unlock: q0 left alone (its section is the outer one), q1 1 -> 0, q2 2 -> 1.
    assertNull(MultiLockOwedFixture.unlockOutcome(twoClients), "inner unlock: a majority released");
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertNull(count("q1", a));
    assertEquals("1", count("q2", a));

    // The thread has one section open and no loss was reported: nobody else may hold it.
    boolean rivalTook = rivalOfTwo.tryLock();
    RuntimeException outer;
    try {
      outer = MultiLockOwedFixture.unlockOutcome(twoClients); // the outer section
    } finally {
      if (rivalTook) {
        rivalOfTwo.unlock();
      }
    }
    String seen = "LockLost on a " + lossesA.count() + ", on b " + lossesB.count()
        + "; outer unlock: " + outer;
    assertFalse(rivalTook, "a rival took the RedLock the thread still holds (" + seen + ")");
    assertNull(outer, "the outer unlock releases (" + seen + ")");
    assertNull(count("q0", b));
    assertNull(count("q2", a));
  }

  /**
   * Outer section q0 + q2; re-entry without q0 (q1 fresh + q2); the inner unlock leaves q0 alone
   * but q1's and q2's releases are refused (OOM): one of three "released", a LockException and an
   * Unfinished record. Its retry must finish q1 and q2 only: q0's count never dropped because
   * the section was not q0's, yet {@code MultiLock.Due.left} calls it FAILED (count did not
   * drop) and the retry releases it — its hold ends while the outer section counts on it, and
   * the outer section stands on q2 alone.
   */
  @Test
  // A DEFECT of round 35, fixed.
  void failedInnerUnlock_retry_mustNotReleaseTheSkippedMember() {
    outerOnQ0AndQ2();
    reenterWithout("q0");
    assertEquals("1", count("q0", b));
    assertEquals("1", count("q1", b));
    assertEquals("2", count("q2", b));

    commands.arm(scriptOn("q1")).answer(OOM);
    commands.arm(scriptOn("q2")).answer(OOM);
    RuntimeException inner = MultiLockOwedFixture.unlockOutcome(red);
    assertInstanceOf(LockException.class, inner, "inner unlock: fewer than a majority released");

    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the retry finishes the inner unlock");
    assertRivalCannotTake("after the retry of its inner unlock");
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertEquals("1", count("q2", b));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Same failed inner unlock; instead of retrying, the thread acquires the RedLock again (all
   * three vote yes), which gives back what the failed unlock left owed. The give-back must not
   * take q0's section: q0 then counts outer + new, the others what they owe.
   */
  @Test
  // A DEFECT of round 35, fixed.
  void failedInnerUnlock_reacquire_giveBackMustNotTakeTheSkippedMembersSection() {
    outerOnQ0AndQ2();
    reenterWithout("q0");
    commands.arm(scriptOn("q1")).answer(OOM);
    commands.arm(scriptOn("q2")).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red));

    assertTrue(red.tryLock(), "acquired again: every member votes yes");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the new section's unlock");
    assertRivalCannotTake("after the new section's unlock");
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * All three held; re-entry without q0, then re-entry without q1: the unlocks consume the
   * sections in another order than they were opened. At every step a majority stays held and
   * the last unlock leaves nothing in Redis.
   */
  @Test
  void twoReentriesWithoutDifferentMembers_unlocksKeepAMajorityAndLeaveNothing() {
    assertTrue(red.tryLock());
    reenterWithout("q0"); // q0 1, q1 2, q2 2
    reenterWithout("q1"); // q0 2, q1 2, q2 3
    for (int open = 2; open >= 1; open--) {
      assertNull(MultiLockOwedFixture.unlockOutcome(red));
      assertRivalCannotTake("with " + open + " sections open");
    }
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    assertFalse(red.isHeldByCurrentThread());
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Outer q0 + q2, re-entry without q0; the thread then takes q0 alone and releases it between
   * the RedLock's unlocks: q0's own section does not consume the RedLock's, nothing is left.
   */
  @Test
  void skippedMemberTakenAlone_unlockedBetween_keepsTheOuterSection() {
    outerOnQ0AndQ2();
    reenterWithout("q0");
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    assertEquals("2", count("q0", b));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "inner unlock: q0 left alone");
    q0.unlock();
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertRivalCannotTake("after its own section of q0 closed");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Outer q0 + q2, re-entry without q0: the thread has two sections open (q0 1, q1 1, q2 2), yet
   * getHoldCount() answers the quorum-th largest member count, 1. A caller that unlocks
   * getHoldCount() times (to leave a section cleanly) closes one, and the RedLock stays held on
   * q0 + q2, renewed by the watchdog with nothing left to release it.
   */
  @Test
  // A DEFECT of round 35, fixed.
  void reentryWithoutAMember_getHoldCountCountsBothSections() {
    outerOnQ0AndQ2();
    reenterWithout("q0");
    assertEquals(2, red.getHoldCount(), "two sections open (q0=" + count("q0", b) + " q1="
        + count("q1", b) + " q2=" + count("q2", b) + ")");
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    assertEquals(1, red.getHoldCount());
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Outer q0 + q2, re-entry without q0; then q0 is force-unlocked by another client (its hold
   * lost). The thread still holds q1 + q2 for the
   * inner section; both unlocks succeed on a majority, and nothing is left in Redis.
   */
  @Test
  void skippedMemberLostLater_unlocksStillBalance() {
    assertTrue(red.tryLock());
    reenterWithout("q0"); // q0 1, q1 2, q2 2
    assertTrue(rival.getLock("q0").forceUnlock(), "q0 ended behind the thread's back");
    assertRivalCannotTake("with q0 gone, q1 + q2 held");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "inner unlock: q1 + q2");
    assertRivalCannotTake("with q0 gone, q1 + q2 held once");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    assertNull(outer, "outer unlock: q1 + q2, a majority");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread holds q0 alone; it then takes the RedLock, q0's vote refused (q1 + q2 win): the
   * RedLock's section is without q0, recorded on q0's hold. The thread releases q0 (its hold
   * ends, with the record) and takes q0 alone again (a new hold): the RedLock's unlock must not
   * end that new, own section of q0.
   */
  @Test
  // A DEFECT of round 35 (the record lived on q0's hold and ended with it), fixed in stop 31.
  void sectionWithoutOnAnEndedHold_doesNotReleaseTheThreadsNewOwnHold() {
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(), "q1 + q2, q0's vote refused");
    q0.unlock();
    q0.lock();
    assertEquals("1", count("q0", b));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the RedLock's unlock: q1 + q2");
    DistributedLock rivalQ0 = rival.getLock("q0");
    boolean took = rivalQ0.tryLock();
    if (took) {
      rivalQ0.unlock();
    }
    assertFalse(took, "a rival took q0 while the thread holds it alone (q0=" + count("q0", b)
        + ", isHeldByCurrentThread " + q0.isHeldByCurrentThread() + ")");
    assertEquals("1", count("q0", b));
    q0.unlock();
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread does not hold q0; it takes the RedLock, q0's vote refused (q1 + q2 win), then takes
   * q0 alone. The RedLock's unlock (through another handle of the same members) must release
   * q1 + q2 only: q0's hold is the thread's own, and a rival must not get it.
   */
  @Test
  void memberNotWon_takenAloneAfterwards_isNotReleasedByTheRedLocksUnlock() {
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(), "q1 + q2, q0's vote refused");
    assertNull(count("q0", b));
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    assertEquals(1, red.getHoldCount(), "one section of the RedLock");
    DistributedLock sameMembers =
        b.getRedLock(b.getLock("q0"), b.getLock("q1"), b.getLock("q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(sameMembers), "the RedLock's unlock: q1 + q2");
    assertEquals("1", count("q0", b), "q0 is the thread's own hold");
    assertNull(count("q1", b));
    assertNull(count("q2", b));
    DistributedLock rivalQ0 = rival.getLock("q0");
    boolean took = rivalQ0.tryLock();
    if (took) {
      rivalQ0.unlock();
    }
    assertFalse(took, "a rival took q0 while the thread holds it alone");
    assertTrue(q0.isHeldByCurrentThread());
    q0.unlock();
    assertEquals(0, losses.count(), "no loss");
    assertEquals(0, red.getHoldCount());
    awaitFree("q0", "q1", "q2");
  }

  /**
   * An unlock() of a RedLock the thread has no acquisition of open (one unlock too many) throws
   * IllegalMonitorStateException and touches no member: q0, which the thread holds alone, stays
   * its own.
   */
  @Test
  void unlockWithNoSectionOpen_leavesTheThreadsOwnMemberHold() {
    assertTrue(red.tryLock());
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    RuntimeException extra = MultiLockOwedFixture.unlockOutcome(red);
    assertInstanceOf(IllegalMonitorStateException.class, extra, "one unlock too many");
    assertTrue(extra.getMessage().contains("is not held by"), extra.getMessage());
    assertEquals("1", count("q0", b), "q0 is the thread's own hold");
    assertTrue(q0.isHeldByCurrentThread());
    q0.unlock();
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread takes the RedLock without q0 and then a multi-lock {RedLock, x} that re-enters it
   * with every vote; the thread's unlocks close the multi-lock's section first (all three
   * members and x), then the RedLock's (q1 + q2): no count is left and no release is refused.
   */
  @Test
  void multiLockSectionOverASectionWithoutAMember_closesInOrder() {
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(), "q1 + q2, q0's vote refused");
    DistributedLock multi = b.getMultiLock(red, b.getLock("x"));
    assertTrue(multi.tryLock(), "the RedLock again, every vote won, and x");
    assertEquals("1", count("q0", b));
    assertEquals("2", count("q1", b));
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    assertNull(count("q0", b), "q0 was only in the multi-lock's section");
    assertEquals("1", count("q1", b));
    assertRivalCannotTake("with the first section open");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the first section's unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "x");
  }

  /**
   * The thread holds RedLock {q0, q3, q4}; it then takes {q0, q1, q2}, q0's vote refused (the
   * section is without q0). It releases the first RedLock before the second (not nested): the
   * record on q0's hold is fungible, so the first unlock leaves q0 and the second releases it.
   * Neither RedLock may be taken by a rival while the thread holds it; nothing is left.
   */
  @Test
  void twoRedLocksSharingTheSkippedMember_unnestedUnlocks_leaveNothing() {
    DistributedLock other = b.getRedLock(b.getLock("q0"), b.getLock("q3"), b.getLock("q4"));
    assertTrue(other.tryLock());
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(), "q1 + q2, q0's vote refused");
    assertNull(MultiLockOwedFixture.unlockOutcome(other));
    assertRivalCannotTake("after the other RedLock's unlock");
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    assertFalse(red.isHeldByCurrentThread());
    assertFalse(other.isHeldByCurrentThread());
    awaitFree("q0", "q1", "q2", "q3", "q4");
  }

  /**
   * The outer section q0 + q2; a multi-lock {RedLock, x} re-enters the RedLock without q0 (its
   * vote refused); the multi-lock's unlock fails on the RedLock (q1's and q2's releases refused)
   * and is called again, as its contract asks: the retry must not end q0's hold, which the outer
   * section counts on.
   */
  @Test
  // A DEFECT of round 35, fixed.
  void multiLockAroundTheRedLock_failedUnlockRetry_mustNotReleaseTheSkippedMember() {
    outerOnQ0AndQ2();
    DistributedLock multi = b.getMultiLock(red, b.getLock("x"));
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(multi.tryLock(), "the multi-lock: the RedLock re-entered without q0, and x");
    assertEquals("1", count("q0", b));
    commands.arm(scriptOn("q1")).answer(OOM);
    commands.arm(scriptOn("q2")).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(multi));
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(multi);
    assertNull(retry, "the retry finishes the multi-lock's unlock");
    assertRivalCannotTake("after the multi-lock's retried unlock");
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    awaitFree("q0", "q1", "q2", "x");
  }

  /**
   * A RedLock has no {@code LockHold} (acquire() is refused): the refusal opens no section and
   * takes no vote, so the outer section q0 + q2 is untouched and its unlock leaves nothing.
   */
  @Test
  void lockHoldOnARedLock_refusedWithoutOpeningASection() {
    outerOnQ0AndQ2();
    assertThrows(UnsupportedOperationException.class,
        () -> red.acquire(Duration.ZERO, Duration.ofSeconds(20)));
    assertEquals("1", count("q0", b));
    assertNull(count("q1", b));
    assertEquals("1", count("q2", b));
    assertEquals(1, red.getHoldCount());
    assertRivalCannotTake("after the refused LockHold");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The re-entry's vote on q0 is held by the proxy past the client's timeout (unanswered, not
   * refused), then delivered late. Whatever the client made of q0's vote, while a section is
   * open a rival never wins, and after the thread's last unlock no member stays held.
   */
  @Test
  void reentryVoteUnanswered_deliveredLate_sectionsBalance() throws Exception {
    outerOnQ0AndQ2();
    CommandProxy.Rule vote = commands.arm(scriptOn("q0"));
    boolean reentered;
    try {
      reentered = red.tryLock(0, 20_000, TimeUnit.MILLISECONDS);
    } finally {
      vote.forward(); // the late copy
    }
    assertTrue(reentered, "re-entry: q1 + q2 at least");
    assertRivalCannotTake("with two sections open, q0's vote delivered late");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "inner unlock");
    assertRivalCannotTake("with the outer section open");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "outer unlock");
    assertFalse(red.isHeldByCurrentThread());
    awaitFree("q0", "q1", "q2");
  }
}
