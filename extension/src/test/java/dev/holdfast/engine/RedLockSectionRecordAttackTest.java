package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attacks on the per-RedLock, per-thread record of open sections (commit 55fe065): each
 * acquisition records which members it won ({@link RedLock#newestSection}), keyed by the RedLock's
 * identity — its members as a set, in any order — and unlock() releases those only. Members
 * {@code q0, q1, q2} live on client {@link #b}, which talks through a
 * {@link CommandProxy} so that a chosen member's script can be refused
 * ({@code -OOM}: not run).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RedLockSectionRecordAttackTest extends ProxiedRedLockFixture {

  /** The thread takes {@link #red} with q0's vote refused (OOM): its section is q1 + q2. */
  private void takeRedWithoutQ0() {
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(), "q1 + q2, q0's vote refused");
    assertNull(count("q0", b));
    assertEquals("1", count("q1", b));
    assertEquals("1", count("q2", b));
  }

  /**
   * The section is taken through {@code red(q0, q1, q2)} (q0's vote refused: won q1 + q2) and
   * closed through {@code red(q2, q1, q0)} — the same RedLock by identity, so the same record.
   * The unlock must release exactly the members the section won: q1 and q2. The record is a
   * boolean[] indexed by the acquiring handle's member order and read with the unlocking handle's
   * order, so it names q2 "not won" (left held, counted released) and q0 "won" (not held).
   */
  @Test
  // A DEFECT of round 36, fixed.
  void reorderedHandle_unlock_releasesTheMembersTheSectionWon() {
    takeRedWithoutQ0();
    DistributedLock reordered =
        b.getRedLock(b.getLock("q2"), b.getLock("q1"), b.getLock("q0"));
    assertNull(MultiLockOwedFixture.unlockOutcome(reordered), "the section's unlock");
    assertNull(count("q1", b), "q1 was in the section: released");
    assertNull(count("q2", b), "q2 was in the section: released (not left held, renewed by "
        + "the watchdog with nothing left to release it)");
    assertFalse(red.isHeldByCurrentThread());
    assertEquals(0, red.getHoldCount());
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Same section (q1 + q2, q0's vote refused); the thread then takes q0 alone, and closes the
   * RedLock's section through a handle listing the members in another order. q0 is the thread's
   * own hold: the RedLock's unlock must leave it, and a rival must not get q0.
   */
  @Test
  // A DEFECT of round 36, fixed.
  void reorderedHandle_memberTakenAlone_isNotReleased() {
    takeRedWithoutQ0();
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    DistributedLock reordered =
        b.getRedLock(b.getLock("q2"), b.getLock("q0"), b.getLock("q1"));
    MultiLockOwedFixture.unlockOutcome(reordered);
    assertEquals("1", count("q0", b), "q0 is the thread's own hold");
    assertFalse(rivalTakes("q0"), "a rival took q0 while the thread holds it alone "
        + "(isHeldByCurrentThread " + q0.isHeldByCurrentThread() + ")");
    assertTrue(q0.isHeldByCurrentThread());
    q0.unlock();
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Control for the two probes above: closed through a handle with the SAME member order, the
   * section releases q1 + q2 and leaves q0 (the thread's own) alone.
   */
  @Test
  void sameOrderOtherHandle_memberTakenAlone_isNotReleased() {
    takeRedWithoutQ0();
    DistributedLock q0 = b.getLock("q0");
    q0.lock();
    DistributedLock same = b.getRedLock(b.getLock("q0"), b.getLock("q1"), b.getLock("q2"));
    assertNull(MultiLockOwedFixture.unlockOutcome(same), "the section's unlock");
    assertEquals("1", count("q0", b));
    assertNull(count("q1", b));
    assertNull(count("q2", b));
    assertFalse(rivalTakes("q0"), "a rival took q0 while the thread holds it alone");
    q0.unlock();
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Members on two clients: q0 on {@code c} (direct), q1 + q2 on {@link #b}. The section wins
   * q0 + q2 (q1's vote refused); the thread then takes q1 alone; {@code c} is closed (its store
   * dropped, q0's hold ended). The section must still be found in b's store: the RedLock's
   * unlock leaves q1 (the thread's own) alone and releases q2.
   */
  @Test
  void oneMembersClientClosed_sectionSurvivesInTheOthers_ownMemberKept() {
    LockClient c = direct();
    DistributedLock mixed = b.getRedLock(c.getLock("q0"), b.getLock("q1"), b.getLock("q2"));
    commands.arm(scriptOn("q1")).answer(OOM);
    assertTrue(mixed.tryLock(), "q0 + q2, q1's vote refused");
    DistributedLock q1 = b.getLock("q1");
    q1.lock();
    assertEquals("1", count("q1", b));
    c.close();
    RuntimeException outcome = MultiLockOwedFixture.unlockOutcome(mixed);
    assertEquals("1", count("q1", b), "q1 is the thread's own hold (unlock: " + outcome + ")");
    assertNull(count("q2", b), "q2 was in the section: released");
    assertFalse(rivalTakes("q1"), "a rival took q1 while the thread holds it alone");
    assertTrue(q1.isHeldByCurrentThread());
    q1.unlock();
    awaitFree("q1", "q2");
  }

  /**
   * Two sections open (outer: all three; inner: q1 + q2, q0's vote refused); the inner unlock
   * fails (q1's and q2's releases refused) and is retried: the retry must not close the outer
   * section, the outer unlock releases everything, and a rival never takes the RedLock between.
   */
  @Test
  void failedInnerUnlockRetried_thenOuterUnlock_balances() {
    assertTrue(red.tryLock(), "outer: every vote");
    commands.arm(scriptOn("q0")).answer(OOM);
    try {
      assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "inner: q1 + q2");
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    assertEquals("1", count("q0", b));
    assertEquals("2", count("q1", b));
    assertEquals(2, red.getHoldCount());
    commands.arm(scriptOn("q1")).answer(OOM);
    commands.arm(scriptOn("q2")).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red));
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the retry");
    assertEquals("1", count("q0", b));
    assertEquals("1", count("q1", b));
    assertEquals("1", count("q2", b));
    assertEquals(1, red.getHoldCount());
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * A thread takes the RedLock (q0's vote refused) and ends without unlocking; another thread
   * then takes and releases the same RedLock (it waits for the ended thread's holds to be
   * released by the client's cleanup or their lease): its section is its own, and its unlock
   * leaves nothing.
   */
  @Test
  void threadEndsWithASectionOpen_anotherThreadsSectionIsItsOwn() throws Exception {
    boolean[] took = new boolean[1];
    Thread t = new Thread(() -> {
      commands.arm(scriptOn("q0")).answer(OOM);
      try {
        took[0] = red.tryLock(0, 3_000, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    t.start();
    t.join(30_000);
    assertFalse(t.isAlive());
    assertTrue(took[0], "the ended thread took q1 + q2");
    assertEquals("1", redisState.hget("q1", b.getClientId() + ":" + t.getId()));
    assertTrue(red.tryLock(40, TimeUnit.SECONDS), "after the ended thread's lease");
    assertEquals(1, red.getHoldCount());
    assertNull(MultiLockOwedFixture.unlockOutcome(red));
    assertEquals(0, red.getHoldCount());
    awaitFree("q0", "q1", "q2");
  }

  /**
   * A fresh acquisition whose vote on q0 (not held by the thread) gets no answer: the first send
   * and the next two q0 scripts (a re-send, the settling) are held by the proxy past the client's
   * timeout, then delivered late. Whatever the section records about q0, after the RedLock's
   * unlock nothing of the thread stays in Redis (the watchdog lease is 30 s; the wait is 20 s),
   * and while the section is open a rival never takes the RedLock.
   */
  @Test
  void freshVoteUnanswered_deliveredLate_nothingLeftAfterUnlock() throws Exception {
    List<CommandProxy.Rule> held = List.of(commands.arm(scriptOn("q0")),
        commands.arm(scriptOn("q0")), commands.arm(scriptOn("q0")));
    boolean took;
    try {
      took = red.tryLock(0, TimeUnit.MILLISECONDS);
    } finally {
      held.forEach(CommandProxy.Rule::forward);
    }
    assertTrue(took, "q1 + q2 at least");
    DistributedLock rivalRed =
        rival.getRedLock(rival.getLock("q0"), rival.getLock("q1"), rival.getLock("q2"));
    boolean rivalTook = rivalRed.tryLock();
    if (rivalTook) {
      rivalRed.unlock();
    }
    assertFalse(rivalTook, "a rival took the RedLock while the thread's section is open");
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the section's unlock");
    assertFalse(red.isHeldByCurrentThread());
    awaitFree("q0", "q1", "q2");
  }

  /**
   * Outer section (all three), inner section without q0 (its vote refused); the inner unlock
   * fails on q1 and q2 (refused): q1 and q2 owe a release. The thread acquires again, this time
   * with q1's vote refused (q0 + q2 win): the give-back finishes what q1 and q2 owe, and the new
   * section is without q1. Its unlock leaves q1 alone; the outer unlock then leaves nothing, and a
   * rival never takes the RedLock between.
   */
  @Test
  void reacquiredWithoutTheMemberThatOwes_giveBackAndSectionsBalance() throws Exception {
    DistributedLock rivalRed =
        rival.getRedLock(rival.getLock("q0"), rival.getLock("q1"), rival.getLock("q2"));
    assertTrue(red.tryLock(), "outer: every vote");
    commands.arm(scriptOn("q0")).answer(OOM);
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "inner: q1 + q2");
    commands.arm(scriptOn("q1")).answer(OOM);
    commands.arm(scriptOn("q2")).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red));
    commands.arm(scriptOn("q1")).answer(OOM);
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "again: q0 + q2, q1 refused");
    assertEquals("2", count("q0", b), "outer + new");
    assertEquals("1", count("q1", b), "outer only (the owed release given back)");
    assertEquals("2", count("q2", b), "outer + new (the owed release given back)");
    assertEquals(2, red.getHoldCount());
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the new section's unlock");
    boolean rivalTook = rivalRed.tryLock();
    if (rivalTook) {
      rivalRed.unlock();
    }
    assertFalse(rivalTook, "a rival took the RedLock while the outer section is open");
    assertEquals(1, red.getHoldCount());
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread holds q0 and q1 alone (its own locks) and never took the RedLock of q0, q1, q2.
   * Its unlock() of that RedLock closes no section (none is recorded) and must answer "not held"
   * without touching the members: q0 and q1 are the thread's own holds. Instead it falls back to
   * releasing every member, ends both own holds (a majority "released") and returns normally.
   */
  @Test
  // A DEFECT of round 36, fixed.
  void unlockWithNoSectionRecorded_leavesMembersHeldAlone() {
    DistributedLock q0 = b.getLock("q0");
    DistributedLock q1 = b.getLock("q1");
    q0.lock();
    q1.lock();
    RuntimeException outcome = MultiLockOwedFixture.unlockOutcome(red);
    assertEquals("1", count("q0", b), "q0 is the thread's own hold (unlock: " + outcome + ")");
    assertEquals("1", count("q1", b), "q1 is the thread's own hold");
    assertFalse(rivalTakes("q0"), "a rival took q0 while the thread holds it alone");
    assertInstanceOf(IllegalMonitorStateException.class, outcome,
        "the RedLock is not held by this thread: no section open");
    q1.unlock();
    q0.unlock();
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread holds q0 and q1 alone, then takes the RedLock once (every vote: q0 2, q1 2, q2 1).
   * getHoldCount() must answer the RedLock's open sections, 1 (the record knows it); it answers the
   * quorum-th largest member count, 2. A caller that unlocks getHoldCount() times closes the one
   * section and then releases q0 and q1 — the thread's own holds — and a rival takes q0.
   */
  @Test
  // A DEFECT of round 36, fixed.
  void membersAlsoHeldAlone_getHoldCountIsTheSectionsOpen() {
    DistributedLock q0 = b.getLock("q0");
    DistributedLock q1 = b.getLock("q1");
    q0.lock();
    q1.lock();
    assertTrue(red.tryLock(), "every vote");
    int count = red.getHoldCount();
    for (int i = 0; i < count; i++) {
      MultiLockOwedFixture.unlockOutcome(red); // leaves the RedLock as its hold count says
    }
    boolean rivalTook = rivalTakes("q0");
    String state = "q0=" + count("q0", b) + " q1=" + count("q1", b) + " q2=" + count("q2", b);
    if (q0.isHeldByCurrentThread()) {
      q0.unlock();
    }
    if (q1.isHeldByCurrentThread()) {
      q1.unlock();
    }
    assertEquals(1, count, "one section of the RedLock open (" + state + ")");
    assertFalse(rivalTook, "a rival took q0 while the thread holds it alone (" + state + ")");
    awaitFree("q0", "q1", "q2");
  }

  /**
   * The thread holds the RedLock (outer section, every vote). A multi-lock {RedLock, x} re-enters
   * the RedLock, finds x busy (a rival holds it) and gives the RedLock back through its unlock(),
   * whose releases of q1 and q2 are refused: the multi-lock's acquisition fails, and the RedLock
   * keeps a failed-unlock record. That give-back is not the application's unlock: the thread's
   * next unlock() of the RedLock must close its outer section (nothing left in Redis, hold count
   * 0), not merely finish the give-back's releases and leave the outer section open for the
   * watchdog to renew for ever.
   */
  @Test
  // A DEFECT of round 36, fixed.
  void multiLockGiveBackFailed_thenOuterUnlock_closesTheOuterSection() throws Exception {
    assertTrue(red.tryLock(), "outer: every vote");
    DistributedLock rivalX = rival.getLock("x");
    rivalX.lock();
    DistributedLock multi = b.getMultiLock(red, b.getLock("x"));
    // The re-entry's votes are the 1st script on each key; the give-back's releases the 2nd.
    commands.arm(nthScriptOn("q1", 2)).answer(OOM);
    commands.arm(nthScriptOn("q2", 2)).answer(OOM);
    RuntimeException acquisition = null;
    boolean took = false;
    try {
      took = multi.tryLock();
    } catch (RuntimeException e) {
      acquisition = e;
    }
    rivalX.unlock();
    assertFalse(took, "x is busy");
    String afterGiveBack = "q0=" + count("q0", b) + " q1=" + count("q1", b) + " q2="
        + count("q2", b) + " (acquisition: " + acquisition + ")";
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(red);
    String afterUnlock = "q0=" + count("q0", b) + " q1=" + count("q1", b) + " q2="
        + count("q2", b);
    int left = red.getHoldCount();
    if (left > 0) { // clean up whatever the probe finds open
      MultiLockOwedFixture.unlockOutcome(red);
    }
    assertNull(outer, "the outer unlock");
    assertEquals(0, left, "the outer section is closed (after the give-back " + afterGiveBack
        + "; after the outer unlock " + afterUnlock + ")");
    awaitFree("q0", "q1", "q2", "x");
  }

  /**
   * The same give-back with a multi-lock in place of the RedLock: the thread holds multi-lock
   * {m0, m1}; a multi-lock {{m0, m1}, y} re-enters it, finds y busy and gives it back through its
   * unlock(), whose release of m1 is refused. The thread's next unlock() of {m0, m1} must close
   * its outer section, not only finish the give-back.
   */
  @Test
  // A DEFECT of round 36, fixed.
  void nestedMultiLockGiveBackFailed_thenOuterUnlock_closesTheOuterSection() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer: m0 + m1");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    DistributedLock multi = b.getMultiLock(inner, b.getLock("y"));
    commands.arm(nthScriptOn("m1", 2)).answer(OOM); // the re-entry's, then the give-back's
    RuntimeException acquisition = null;
    boolean took = false;
    try {
      took = multi.tryLock();
    } catch (RuntimeException e) {
      acquisition = e;
    }
    rivalY.unlock();
    assertFalse(took, "y is busy");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(inner);
    String afterUnlock = "m0=" + count("m0", b) + " m1=" + count("m1", b) + " (acquisition: "
        + acquisition + ")";
    boolean stillHeld = inner.isHeldByCurrentThread();
    if (stillHeld) {
      MultiLockOwedFixture.unlockOutcome(inner);
    }
    assertNull(outer, "the outer unlock");
    assertFalse(stillHeld, "the outer section is closed (" + afterUnlock + ")");
    awaitFree("m0", "m1", "y");
  }
}
