package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import dev.holdfast.LockClient;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attacks on the sections of commit e553c8e: per composite identity and thread, a stack of
 * {@code CompositeLock.Section(won, finishedAFailedUnlock)} (multi-locks now keep one too, in
 * {@code UNOWNED_SECTIONS} when another implementation's lock is inside), which
 * {@link CompositeLock#giveBackSection()} peeks to leave a failed unlock() settled. Members live
 * on client {@link #b}, behind a {@link CommandProxy}: a chosen script call can be refused
 * ({@code -OOM}: not run). A "foreign" lock is one of {@link #b}'s locks behind a
 * {@link Proxy} whose unlock() can be made to fail (without running).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class CompositeSectionAttackTest extends ProxiedRedLockFixture {

  /** A lock of "another implementation": delegates, except that armed unlock() calls fail. */
  private static final class Foreign {
    final DistributedLock lock;
    /** unlock() calls to come that fail without running, counted from 1 (0: none). */
    final AtomicInteger failAt = new AtomicInteger();
    final AtomicInteger unlocks = new AtomicInteger();

    Foreign(DistributedLock target) {
      lock = (DistributedLock) Proxy.newProxyInstance(DistributedLock.class.getClassLoader(),
          new Class<?>[] {DistributedLock.class}, (proxy, method, args) -> {
            if (method.getName().equals("equals") && args != null && args.length == 1) {
              return proxy == args[0];
            }
            if (method.getName().equals("hashCode") && args == null) {
              return System.identityHashCode(proxy);
            }
            if (method.getName().equals("unlock") && args == null) {
              int n = unlocks.incrementAndGet();
              if (n == failAt.get()) {
                throw new LockException("foreign unlock refused (not run)");
              }
            }
            try {
              return method.invoke(target, args);
            } catch (InvocationTargetException e) {
              throw e.getCause();
            }
          });
    }

    /** The next unlock() fails. */
    void failNext() {
      failAt.set(unlocks.get() + 1);
    }
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

  /** The rival holds y for a short lease: busy for the first rounds, then free. */
  private void rivalHoldsYBriefly() {
    rival.getLock("y").lock(1500, TimeUnit.MILLISECONDS);
  }

  /**
   * The thread holds the RedLock twice; its inner unlock fails (q1, q2 refused). A multi-lock
   * {RedLock, y} waits for y over several rounds (each re-enters the RedLock and gives it back:
   * the first finishes the failed unlock, the next ones take the settled record) until y's
   * lease ends and a round wins. That acquisition finished the failed unlock: the multi-lock's
   * unlock closes its own section, and the RedLock's outer section stays open until its unlock.
   */
  @Test
  void redLockFailedInnerUnlock_multiWaitsUntilYFreed_balances() throws Exception {
    assertTrue(red.tryLock(), "outer: every vote");
    assertTrue(red.tryLock(0, 20_000, TimeUnit.MILLISECONDS), "inner: every vote");
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red),
        "the inner unlock: only q0 released");
    rivalHoldsYBriefly();
    DistributedLock multi = b.getMultiLock(red, b.getLock("y"));
    assertTrue(multi.tryLock(20, TimeUnit.SECONDS), "y frees with its lease");
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    String s = state("q0", "q1", "q2", "y");
    assertEquals(1, red.getHoldCount(), s);
    assertTrue(red.isHeldByCurrentThread(), s);
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * The same with a multi-lock {m0, m1} held twice, its inner unlock failing on m1: the outer
   * multi-lock {{m0, m1}, y} waits several rounds for y, then wins. Its unlock closes its
   * section of {m0, m1}; {m0, m1} stays the thread's (count 1 each) until its outer unlock.
   */
  @Test
  void multiFailedInnerUnlock_outerMultiWaitsUntilYFreed_balances() throws Exception {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: only m0 released");
    rivalHoldsYBriefly();
    DistributedLock multi = b.getMultiLock(inner, b.getLock("y"));
    assertTrue(multi.tryLock(20, TimeUnit.SECONDS), "y frees with its lease");
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    String s = state("m0", "m1", "y");
    assertEquals("1", count("m0", b), s);
    assertEquals("1", count("m1", b), s);
    assertFalse(rivalTakes("m0"), "a rival took m0 during the outer section: " + s);
    assertFalse(rivalTakes("m1"), "a rival took m1 during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(inner), "the outer unlock; " + s);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("m0", "m1", "y");
  }

  /**
   * Multi-lock {m0, m1} held twice, inner unlock fails on m1; {{m0, m1}, y} finds y busy
   * (no wait) and gives {m0, m1} back: the retry of the inner unlock closes nothing, the outer
   * section stays open, and its unlock frees both.
   */
  @Test
  void multiFailedInnerUnlock_givenBackOnce_retryLeavesOuterOpen() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: only m0 released");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("m0", "m1") + " (multi: " + outcome + "; retry: " + retry + ")";
    assertNull(retry, "the retry; " + s);
    assertEquals("1", count("m0", b), s);
    assertEquals("1", count("m1", b), s);
    assertFalse(rivalTakes("m1"), "a rival took m1 during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(inner), "the outer unlock; " + s);
    assertInstanceOf(IllegalMonitorStateException.class,
        MultiLockOwedFixture.unlockOutcome(inner), "no section left");
    awaitFree("m0", "m1", "y");
  }

  /**
   * Foreign inside: {F(f), m1} held twice, inner unlock fails on F (not run). {{F, m1}, y}
   * finds y busy: its acquisition of {F, m1} retries F first, then takes both and gives them
   * back. The application's retry of the inner unlock closes nothing; f and m1 stay the
   * thread's (count 1) until the outer unlock, which frees both.
   */
  @Test
  void foreignFailedInnerUnlock_givenBack_retryLeavesOuterOpen() {
    Foreign f = new Foreign(b.getLock("f"));
    DistributedLock inner = b.getMultiLock(f.lock, b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    f.failNext();
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: F failed");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("f", "m1") + " (multi: " + outcome + "; retry: " + retry + ")";
    assertNull(retry, "the retry; " + s);
    assertEquals("1", count("f", b), s);
    assertEquals("1", count("m1", b), s);
    assertFalse(rivalTakes("f"), "a rival took f during the outer section: " + s);
    assertFalse(rivalTakes("m1"), "a rival took m1 during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(inner), "the outer unlock; " + s);
    assertInstanceOf(IllegalMonitorStateException.class,
        MultiLockOwedFixture.unlockOutcome(inner), "no section left");
    awaitFree("f", "m1", "y");
  }

  /**
   * As above, but F's unlock in the give-back fails too: the give-back keeps F's unlock in the
   * record (a foreign lock cannot owe on a hold) and, the section having finished a failed
   * unlock, also keeps "settled". Whatever the records, two unlocks of the application (its
   * retry and the outer one) must leave f and m1 free, and the outer section open between them.
   */
  @Test
  void foreignFailedInnerUnlock_giveBackFailsOnForeignToo_balances() {
    Foreign f = new Foreign(b.getLock("f"));
    DistributedLock inner = b.getMultiLock(f.lock, b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    f.failNext();
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: F failed");
    // the retry before the acquisition goes through; the give-back's unlock of F fails
    f.failAt.set(f.unlocks.get() + 2);
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("f", "m1") + " (multi: " + outcome + "; retry: " + retry + ")";
    boolean rivalTookM1 = rivalTakes("m1");
    RuntimeException outer = MultiLockOwedFixture.unlockOutcome(inner);
    String after = state("f", "m1") + " (outer: " + outer + ")";
    assertFalse(rivalTookM1, "a rival took m1 during the outer section: " + s);
    assertNull(outer, "the outer unlock; " + s + " / " + after);
    awaitFree("f", "m1", "y");
  }

  /**
   * Foreign inside, a failed inner unlock on m1 (this library's lock), and a multi-lock round
   * that waits for y until its lease ends: sections live in UNOWNED_SECTIONS, records in the
   * engine's store. The outer multi-lock's unlock closes only its own section.
   */
  @Test
  void foreignInside_failedInnerUnlockOnM1_outerWaitsUntilYFreed_balances() throws Exception {
    Foreign f = new Foreign(b.getLock("f"));
    DistributedLock inner = b.getMultiLock(f.lock, b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: m1 refused");
    rivalHoldsYBriefly();
    DistributedLock multi = b.getMultiLock(inner, b.getLock("y"));
    assertTrue(multi.tryLock(20, TimeUnit.SECONDS), "y frees with its lease");
    assertNull(MultiLockOwedFixture.unlockOutcome(multi), "the multi-lock's unlock");
    String s = state("f", "m1", "y");
    assertEquals("1", count("f", b), s);
    assertEquals("1", count("m1", b), s);
    assertFalse(rivalTakes("m1"), "a rival took m1 during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(inner), "the outer unlock; " + s);
    awaitFree("f", "m1", "y");
  }

  /**
   * Stack in step with the application's calls: an unlock of a never-acquired multi-lock fails
   * "not held" and pops nothing; the thread then holds it twice, a round of {{m0, m1}, y} gives
   * a third section back (y busy); two unlocks free it, a third says "not held".
   */
  @Test
  void neverAcquiredUnlock_thenHeldTwiceAndGivenBack_stackInStep() {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertInstanceOf(IllegalMonitorStateException.class,
        MultiLockOwedFixture.unlockOutcome(inner), "never acquired");
    assertTrue(inner.tryLock());
    assertTrue(inner.tryLock());
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    assertEquals("2", count("m0", b), state("m0", "m1"));
    assertNull(MultiLockOwedFixture.unlockOutcome(inner));
    assertFalse(rivalTakes("m0"), "still held once");
    assertNull(MultiLockOwedFixture.unlockOutcome(inner));
    assertInstanceOf(IllegalMonitorStateException.class,
        MultiLockOwedFixture.unlockOutcome(inner), "no section left");
    awaitFree("m0", "m1", "y");
  }

  /** The application's unlock(): called again while it throws LockException, as its contract asks. */
  private static RuntimeException unlockAsContracted(DistributedLock lock) {
    RuntimeException last = null;
    for (int i = 0; i < 5; i++) {
      last = MultiLockOwedFixture.unlockOutcome(lock);
      if (!(last instanceof LockException)) {
        return last;
      }
    }
    return last;
  }

  /**
   * Client closed in between: {m0 (b), n0 (c)} held twice; c is closed (its holds end, its
   * stores drop the sections). The application's unlocks, each retried while it throws
   * LockException, must keep m0 held once after the first and free it after the second.
   */
  @Test
  void multiAcrossClients_oneClosed_unlocksStayInStep() {
    LockClient c = direct();
    DistributedLock multi = b.getMultiLock(b.getLock("m0"), c.getLock("n0"));
    assertTrue(multi.tryLock(), "outer");
    assertTrue(multi.tryLock(), "inner");
    c.close();
    RuntimeException first = unlockAsContracted(multi);
    String s = state("m0") + " (first: " + first + ")";
    assertEquals("1", count("m0", b), s);
    assertFalse(rivalTakes("m0"), "a rival took m0 during the outer section: " + s);
    RuntimeException second = unlockAsContracted(multi);
    assertFalse(second instanceof LockException, "the outer unlock; " + second);
    awaitFree("m0");
  }

  /**
   * RedLock held twice, inner unlock fails; {RedLock, y} gives it back (settled). The
   * application then takes the RedLock again (taking the settled record: its section is
   * flagged), and another {RedLock, y} round gives a newer section back. Two unlocks (the new
   * section, the outer one) must balance: the outer section stays open after the first.
   */
  @Test
  void settledTakenByAppAcquisition_thenAnotherRoundGivesBack_balances() {
    assertTrue(red.tryLock(), "outer: every vote");
    assertTrue(red.tryLock(), "inner: every vote");
    commands.arm(nthScriptOn("q1", 1)).answer(OOM);
    commands.arm(nthScriptOn("q2", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(red),
        "the inner unlock: only q0 released");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    Object first = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    assertTrue(red.tryLock(), "the application's new section");
    Object second = tryOutcome(b.getMultiLock(red, b.getLock("y")));
    rivalY.unlock();
    String s = state("q0", "q1", "q2") + " (rounds: " + first + ", " + second + ")";
    assertFalse(Boolean.TRUE.equals(first), s);
    assertFalse(Boolean.TRUE.equals(second), s);
    assertEquals(2, red.getHoldCount(), s);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the new section's unlock; " + s);
    String mid = state("q0", "q1", "q2");
    assertEquals(1, red.getHoldCount(), mid);
    assertFalse(rivalTakesRed(), "a rival took the RedLock during the outer section: " + mid);
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "the outer unlock; " + mid);
    assertEquals(0, losses.count(), "no loss");
    awaitFree("q0", "q1", "q2", "y");
  }

  /**
   * {F(f), m1} held once; {{F, m1}, y} takes it afresh (its section finished nothing), finds
   * y busy and gives it back, but F's unlock fails: a foreign lock cannot owe on a hold, so its
   * unlock stays in {F, m1}'s record — and the application's next unlock() of {F, m1}, meant
   * for its own section, is taken as the retry of that give-back: it returns normally, and f
   * and m1 stay the thread's (renewed) with nothing left to release them.
   */
  @Test
  // A LIMITATION of round 39, fixed.
  void foreignGiveBackFails_appUnlockTakenAsItsRetry_sectionLeftOpen() {
    Foreign f = new Foreign(b.getLock("f"));
    DistributedLock inner = b.getMultiLock(f.lock, b.getLock("m1"));
    assertTrue(inner.tryLock(), "the application's section");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    f.failNext();
    Object outcome = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertFalse(Boolean.TRUE.equals(outcome), "y is busy");
    RuntimeException own = unlockAsContracted(inner);
    String s = state("f", "m1") + " (multi: " + outcome + "; unlock: " + own + ")";
    assertNull(own, s);
    assertFalse(inner.isHeldByCurrentThread(), "still held after the application's unlock: " + s);
    awaitFree("f", "m1", "y");
  }

  /**
   * Client closed between a failed unlock and its retry: {m0 (b), n0 (c)} held twice, the
   * inner unlock fails on m0 (refused); c is closed; a round of {{m0, n0}, y} cannot take n0
   * (its client is closed). The retry releases m0's inner section only (m0 held once, no
   * rival), and the outer unlock — retried as the contract asks — frees m0.
   */
  @Test
  void failedInnerUnlock_clientClosed_roundFails_retryAndOuterInStep() {
    LockClient c = direct();
    DistributedLock multi = b.getMultiLock(b.getLock("m0"), c.getLock("n0"));
    assertTrue(multi.tryLock(), "outer");
    assertTrue(multi.tryLock(), "inner");
    commands.arm(nthScriptOn("m0", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(multi),
        "the inner unlock: m0 refused");
    c.close();
    Object outcome = tryOutcome(b.getMultiLock(multi, b.getLock("y")));
    RuntimeException retry = unlockAsContracted(multi);
    String s = state("m0") + " (multi: " + outcome + "; retry: " + retry + ")";
    assertEquals("1", count("m0", b), s);
    assertFalse(rivalTakes("m0"), "a rival took m0 during the outer section: " + s);
    RuntimeException outer = unlockAsContracted(multi);
    assertFalse(outer instanceof LockException, "the outer unlock; " + s + "; " + outer);
    awaitFree("m0", "y");
  }

  /**
   * Rotated rounds, a lock shared by two members: {m0, m1} held twice, inner unlock fails
   * (m1 refused). G = {O, w} with O = {{m0, m1}, N}, N = {{m0, m1}, z}; w busy all along, z
   * until its lease ends. O's rounds re-enter {m0, m1} directly and through N (after a busy
   * N, a round starts with N: the acquisition order differs from O's member order, which its
   * give-back follows); G gives O back. The retry of the inner unlock must close nothing and
   * the outer unlock free m0 and m1.
   */
  @Test
  void sharedInnerInRotatedRounds_givenBack_retryLeavesOuterOpen() throws Exception {
    DistributedLock inner = b.getMultiLock(b.getLock("m0"), b.getLock("m1"));
    assertTrue(inner.tryLock(), "outer");
    assertTrue(inner.tryLock(), "inner");
    commands.arm(nthScriptOn("m1", 1)).answer(OOM);
    assertInstanceOf(LockException.class, MultiLockOwedFixture.unlockOutcome(inner),
        "the inner unlock: only m0 released");
    DistributedLock n = b.getMultiLock(inner, b.getLock("z"));
    DistributedLock o = b.getMultiLock(inner, n);
    DistributedLock g = b.getMultiLock(o, b.getLock("w"));
    DistributedLock rivalW = rival.getLock("w");
    rivalW.lock();
    rival.getLock("z").lock(1500, TimeUnit.MILLISECONDS);
    Object outcome;
    try {
      outcome = g.tryLock(4, TimeUnit.SECONDS);
    } catch (RuntimeException e) {
      outcome = e;
    } finally {
      rivalW.unlock();
    }
    assertFalse(Boolean.TRUE.equals(outcome), "w is busy");
    RuntimeException retry = MultiLockOwedFixture.unlockOutcome(inner);
    String s = state("m0", "m1", "z") + " (g: " + outcome + "; retry: " + retry + ")";
    assertNull(retry, "the retry; " + s);
    assertEquals("1", count("m0", b), s);
    assertEquals("1", count("m1", b), s);
    assertFalse(rivalTakes("m1"), "a rival took m1 during the outer section: " + s);
    assertNull(MultiLockOwedFixture.unlockOutcome(inner), "the outer unlock; " + s);
    assertInstanceOf(IllegalMonitorStateException.class,
        MultiLockOwedFixture.unlockOutcome(inner), "no section left");
    assertEquals(0, losses.count(), "no loss");
    awaitFree("m0", "m1", "z", "w");
  }

  /**
   * {F(f), m1} held once by the application. A round of {{F, m1}, y} (y busy) takes it afresh
   * and gives it back, but F's unlock fails: F's unlock stays in {F, m1}'s record (a foreign
   * lock cannot owe on a hold) and the round throws. The thread's next call on {F, m1} is
   * another such round: its acquisition retries F first (the give-back is done now), but since
   * it took a record, its section says it "finished a failed unlock" of the application's,
   * and giving it back leaves SETTLED. The application never had a failed unlock: its own
   * unlock() of {F, m1} then returns at once, closing nothing; f and m1 stay the thread's,
   * renewed for as long as the client lives.
   */
  @Test
  // A DEFECT of round 39, fixed.
  void foreignGiveBackLeftover_finishedByNextRound_appUnlockSwallowedBySettled() {
    Foreign f = new Foreign(b.getLock("f"));
    DistributedLock inner = b.getMultiLock(f.lock, b.getLock("m1"));
    assertTrue(inner.tryLock(), "the application's section");
    DistributedLock rivalY = rival.getLock("y");
    rivalY.lock();
    f.failNext();
    Object first = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    Object second = tryOutcome(b.getMultiLock(inner, b.getLock("y")));
    rivalY.unlock();
    assertInstanceOf(LockException.class, first, "F's give-back failed");
    assertFalse(Boolean.TRUE.equals(second), "y is busy");
    String s = state("f", "m1") + " (rounds: " + first + "; " + second + ")";
    assertEquals("1", count("f", b), "the give-back was finished by the second round: " + s);
    assertEquals("1", count("m1", b), s);
    RuntimeException own = unlockAsContracted(inner);
    String after = state("f", "m1") + " (unlock: " + own + ")";
    assertNull(own, after);
    assertFalse(inner.isHeldByCurrentThread(), "still held after the application's unlock: "
        + s + " -> " + after);
    awaitFree("f", "m1", "y");
  }
}
