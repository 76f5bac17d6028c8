package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import java.io.IOException;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Probe of the cluster soak's loss-report violation (seed -6501269311255863504): a RedLock
 * re-entry whose vote on a member the thread already holds is refused (there a {@code TRYAGAIN}
 * of a slot migration; here an {@code -OOM} answer, equally "not run") still wins a majority
 * with the other members, so that member's count stays one short of the RedLock's. The next
 * inner unlock() releases every member once: it is that member's final release, its hold ends
 * (forgotten, no LockLost), and the RedLock the thread still believes (one section open) is
 * held on fewer than a majority — a rival takes it; the thread's final unlock() then throws
 * IllegalMonitorStateException "not held", without "lost". Members: {@code q0} on client
 * {@link #b} (through a {@link EndingSkipAttackTest.CommandProxy}), {@code q1}, {@code q2} on
 * {@link #a}; {@link #rival} is a third client.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RedLockReentryVoteTest extends ProxiedClientFixture {

  private static final String OOM =
      "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

  private EndingSkipAttackTest.CommandProxy commands;
  private LockClient b;

  @BeforeEach
  void startCommandProxy() throws IOException {
    commands = new EndingSkipAttackTest.CommandProxy(redis.server().port());
    b = clients.create(Map.of(LockClientConfig.ADDRESS, commands.uri(),
        LockClientConfig.TIMEOUT, "2s", LockClientConfig.WATCHDOG_TIMEOUT, "30s"));
    DistributedLock warm = b.getLock("warm"); // scripts loaded
    warm.lock();
    warm.lock();
    warm.unlock();
    warm.unlock();
  }

  @AfterEach
  void stopCommandProxy() {
    commands.releaseAll();
    commands.close();
  }

  /**
   * The soak's episode: the outer section holds q0 + q2 (q1 was a rival's); a re-entry's vote on
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
    DistributedLock red = a.getRedLock(b.getLock("q0"), a.getLock("q1"), a.getLock("q2"));
    DistributedLock rivalQ1 = rival.getLock("q1");
    DistributedLock rivalRed = rival.getRedLock(rival.getLock("q0"), rival.getLock("q1"),
        rival.getLock("q2"));

    // Outer: q0 + q2 (q1 is the rival's), as the soak's episode began.
    rivalQ1.lock();
    assertTrue(red.tryLock(), "outer: q0 + q2, a majority");
    rivalQ1.unlock();
    assertEquals("1", count("q0", b));
    assertEquals("1", count("q2", a));

    // Re-entry with a fixed lease: q0's vote refused (not run), q1 (fresh) + q2 vote yes.
    commands.arm(args -> args.get(0).toUpperCase(Locale.ROOT).startsWith("EVAL")).answer(OOM);
    boolean reentered;
    try {
      reentered = red.tryLock(0, 2297, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    assertTrue(reentered, "re-entry: q1 + q2, a majority");
    assertEquals("1", count("q0", b), "q0's re-entry did not run: q0 counts 1, the RedLock 2");
    assertEquals("1", count("q1", a));
    assertEquals("2", count("q2", a));

    // Inner unlock: q0 left alone (its section is the outer one), q1 1 -> 0, q2 2 -> 1.
    assertNull(MultiLockOwedFixture.unlockOutcome(red), "inner unlock: a majority released");
    assertEquals("1", count("q0", b), "q0 still holds the outer section");
    assertNull(count("q1", a));
    assertEquals("1", count("q2", a));

    // The thread has one section open and no loss was reported: nobody else may hold it.
    boolean rivalTook = rivalRed.tryLock();
    RuntimeException outer;
    try {
      outer = MultiLockOwedFixture.unlockOutcome(red); // the outer section
    } finally {
      if (rivalTook) {
        rivalRed.unlock();
      }
    }
    String seen = "LockLost on a " + lossesA.count() + ", on b " + lossesB.count()
        + "; outer unlock: " + outer;
    assertFalse(rivalTook, "a rival took the RedLock the thread still holds (" + seen + ")");
    assertNull(outer, "the outer unlock releases (" + seen + ")");
    assertNull(count("q0", b));
    assertNull(count("q2", a));
  }
}
