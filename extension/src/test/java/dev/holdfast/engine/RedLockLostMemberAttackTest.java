package dev.holdfast.engine;

import static dev.holdfast.engine.MultiLockOwedFixture.unlockOutcome;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 12 on {@link RedisLock#oweFailedRelease} (commit 2d37717): a RedLock member whose
 * inner release got no answer while its lease ran out — its deadline checked first (a loss, not
 * a quiet release), and the lost hold's section closed there (before, it lingered and the
 * thread could not take that member again). RedLocks here are {@code <p>-1}, {@code <p>-2} on
 * client {@link #a} (direct) and {@code <p>-3} on a client made per probe ({@link #viaProxy})
 * through a {@link FaultProxy}; {@link #rival} is a third client, direct.
 */
class RedLockLostMemberAttackTest extends ProxiedClientFixture {

  private DistributedLock red(LockClient b, String prefix) {
    return a.getRedLock(a.getLock(prefix + "-1"), a.getLock(prefix + "-2"),
        b.getLock(prefix + "-3"));
  }

  private static long threadId() {
    return Thread.currentThread().getId();
  }

  private void assertLossOf(LossRecorder losses, String name, String what) {
    LockLost lost = losses.awaitFirst(Duration.ofSeconds(20), what).event();
    assertEquals(name, lost.lockName(), "the member's name: " + losses);
    assertEquals(threadId(), lost.threadId(), "the holding thread: " + losses);
  }

  /** The RedLock taken again: every member, r3 included, counts 1 in Redis and for the thread. */
  private void retakeTakesAllThree(DistributedLock red, LockClient b, String prefix) {
    red.lock();
    try {
      assertEquals("1", redisState.hget(prefix + "-1", RedisProbe.fieldOf(a)));
      assertEquals("1", redisState.hget(prefix + "-2", RedisProbe.fieldOf(a)));
      assertEquals("1", redisState.hget(prefix + "-3", RedisProbe.fieldOf(b)),
          "r3 taken by the RedLock's next acquisition (not 2 of 3)");
      assertEquals(1, b.getLock(prefix + "-3").getHoldCount());
    } finally {
      unlockOutcome(red);
    }
    for (int m = 1; m <= 3; m++) {
      assertFalse(redisState.exists(prefix + "-" + m), prefix + "-" + m + " left");
    }
  }

  /**
   * After r3's loss: its late copies land, its field is gone and its hold forgotten, the thread
   * holds none of it, the RedLock's next acquisition takes all three members, and the loss was
   * reported once.
   */
  private void nothingLingers(Scene c) {
    String prefix = c.prefix();
    RedisLock r3 = c.r3();
    long thread = threadId();
    try {
      Await.until(Duration.ofSeconds(30), () -> proxy.pendingRequestBytes() == 0
          && !redisState.exists(prefix + "-3") && r3.holdOf(thread) == null,
          "r3's late copies delivered, its field gone, its hold forgotten");
    } catch (AssertionError e) {
      Hold left = r3.holdOf(thread);
      throw new AssertionError(e.getMessage() + ": " + proxy.pendingRequestBytes()
          + " request bytes held, r3 in Redis " + redisState.exists(prefix + "-3")
          + ", hold " + left + (left == null ? "" : " (cleanup " + left.cleanup() + ", pending "
          + left.pendingRelease() + ")"), e);
    }
    assertEquals(0, r3.getHoldCount());
    assertFalse(r3.isHeldByCurrentThread());
    retakeTakesAllThree(c.red(), c.b(), prefix);
    assertEquals(1, c.losses().count(), "r3's loss reported once: " + c.losses());
  }

  /**
   * (c), {@code from} 2: RedLock held twice (watchdog leases; r3's client: 1.5 s timeout, 3 s
   * watchdog). With B dark, the inner unlock's r3 release gets no answer for three attempts
   * (≥ 4.5 s, no renewal while it is in flight): r3's deadline passes during it and its
   * deadline timer reports the loss. The RedLock released r1, r2 (a majority): r3's failed
   * release's section is closed there, not owed — the hold keeps only the application's outer
   * section; the outer unlock returns normally (r3 says lost), nothing of r3 lingers, and the
   * RedLock's next acquisition takes all three members. On e3f3974 the lost hold kept both
   * sections: after the outer unlock one lingered, and the next acquisition ran on 2 of 3.
   */
  @Test
  void innerReleaseUnanswered_watchdogLapses_sectionClosed_retakeGetsAllThree() {
    Scene c = lostInInnerUnlock("c1", Duration.ZERO);
    Hold hold = c.r3().holdOf(threadId());
    assertNotNull(hold, "the application's outer section is still open");
    assertFalse(hold.active());
    assertEquals(1, hold.count(), "only the application's outer section is left");
    assertEquals(0, hold.giveBacksOwed(), "a lost hold owes no give-back");
    assertNull(unlockOutcome(c.red()), "outer: r1, r2 released, r3 reports its loss");
    nothingLingers(c);
  }

  /**
   * RedLock {@code prefix} held twice (watchdog leases; r3's client: 1.5 s timeout, 3 s
   * watchdog); its inner unlock with B dark ({@code delay} zero) or B's requests held back
   * {@code delay}: r3's release gets no answer for three attempts (≥ 4.5 s, no renewal while
   * it is in flight), so r3's deadline passes during it; a majority is released, and r3's loss
   * is reported under its name and the thread's id.
   */
  private Scene lostInInnerUnlock(String prefix, Duration delay) {
    LockClient b = viaProxy("1500ms", "3s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock red = red(b, prefix);
    RedisLock r3 = (RedisLock) b.getLock(prefix + "-3");
    red.lock();
    red.lock();
    RuntimeException inner;
    if (delay.isZero()) {
      proxy.blackHole(true);
      try {
        inner = unlockOutcome(red);
      } finally {
        proxy.blackHole(false); // r3's release and the loss's abandon now reach Redis, late
      }
    } else {
      inner = unlockDelayed(red, delay);
    }
    assertNull(inner, "inner: a majority released");
    assertLossOf(losses, prefix + "-3", "r3's lease lapsed while its release went unanswered");
    return new Scene(prefix, b, red, r3, losses);
  }

  /**
   * RedLock held {@code times} times with a fixed 8 s lease (r3's client: 1 s timeout); the
   * first unlock with B dark owes r3's give-back (r3 {@code times}, one owed); with B still
   * dark, the second unlock starts when r3's lease has about 1.2 s left: r1, r2 are released
   * (a majority), r3's give-back fails again (≥ 3 s) and its deadline passes meanwhile, so
   * oweFailedRelease settles r3's section of that unlock (from {@code times} - 1) on a hold whose
   * lease ran out. With {@code timerBlocked}, r3's client's timer thread is held (a busy or
   * paused timer: its deadline task cannot fire) until that unlock returns. With a non-zero
   * {@code delay}, B's requests are held back that long (delivered late) instead of B dark.
   * Then B answers again.
   *
   * @return r3, its hold as oweFailedRelease left it
   */
  private RedisLock unlockTwiceWhileLeaseRunsOut(LockClient b, DistributedLock red,
      String prefix, int times, boolean timerBlocked, Duration delay)
      throws InterruptedException {
    RedisLock r3 = (RedisLock) b.getLock(prefix + "-3");
    for (int i = 0; i < times; i++) {
      red.lock(8, TimeUnit.SECONDS);
    }
    if (delay.isZero()) {
      proxy.blackHole(true);
    } else {
      proxy.delay(delay);
    }
    CountDownLatch blocked = new CountDownLatch(1);
    CountDownLatch free = new CountDownLatch(1);
    try {
      assertNull(unlockOutcome(red), "first: a majority released");
      Hold hold = r3.holdOf(threadId());
      assertEquals(times, hold.count(), "r3: nothing ran");
      assertEquals(1, hold.giveBacksOwed(), "r3's section of the first unlock owed");
      if (timerBlocked) {
        assertTrue(Clients.engine(b).schedule(() -> {
          blocked.countDown();
          try {
            free.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }, 0));
        assertTrue(blocked.await(30, TimeUnit.SECONDS), "timer thread held");
      }
      Await.until(Duration.ofSeconds(30),
          () -> hold.confirmedUntil() - System.nanoTime() < TimeUnit.MILLISECONDS.toNanos(1_200),
          "r3's lease about to run out");
      assertTrue(hold.believedAt(System.nanoTime()), "still believed as the second unlock "
          + "starts (too slow a machine?)");
      assertNull(unlockOutcome(red), "second: r1, r2 released, a majority");
      assertFalse(hold.believedAt(System.nanoTime()), "r3's lease ran out during its release");
    } finally {
      free.countDown();
      proxy.blackHole(false);
      proxy.delay(Duration.ZERO);
    }
    return r3;
  }

  /** What a probe set up: r3's client, the RedLock, r3, r3's client's losses. */
  private record Scene(String prefix, LockClient b, DistributedLock red, RedisLock r3,
      LossRecorder losses) {
  }

  /**
   * {@link #unlockTwiceWhileLeaseRunsOut} on a fresh RedLock {@code prefix} (r3's client: 1 s
   * timeout), then r3's loss awaited: reported under r3's name and the thread's id.
   */
  private Scene lostInSecondUnlock(String prefix, int times, boolean timerBlocked,
      Duration delay) throws InterruptedException {
    LockClient b = viaProxy("1s", "30s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock red = red(b, prefix);
    RedisLock r3 = unlockTwiceWhileLeaseRunsOut(b, red, prefix, times, timerBlocked, delay);
    assertLossOf(losses, prefix + "-3", "r3's lease ran out during its release");
    return new Scene(prefix, b, red, r3, losses);
  }

  /**
   * (b): {@link #unlockTwiceWhileLeaseRunsOut} (held twice: the second unlock is the final
   * one) with r3's timer held, so that nobody declared r3 lost before oweFailedRelease: its
   * deadline, checked first, reports the loss (once, under r3's name and thread — the deadline
   * task, once free, finds it reported), the hold is forgotten, and the RedLock's next
   * acquisition takes all three. On e3f3974 r3 was ended as a final release in doubt: no
   * LockLost at all.
   */
  @Test
  void finalUnlock_giveBackFailsAgain_deadlinePassedUnnoticed_lossReportedOnce()
      throws Exception {
    Scene c = lostInSecondUnlock("c2", 2, true, Duration.ZERO);
    assertTrue(c.losses().reports().get(0).event().reason().contains("ran out"),
        "" + c.losses());
    nothingLingers(c);
  }

  /**
   * (c), {@code from} 1: {@link #unlockTwiceWhileLeaseRunsOut} (held twice: the second unlock
   * is the final one) with the timer running: r3's deadline task reports the loss during the
   * give-back; oweFailedRelease then closes every section and drops the owed give-back, the
   * hold is forgotten, and the RedLock's next acquisition takes all three. On e3f3974 the lost
   * hold kept its two sections (one owed) for ever: the next acquisition failed on r3 ("lost
   * before this re-entry") and ran on 2 of 3.
   */
  @Test
  void finalUnlock_giveBackFailsAgain_lostDuringIt_holdForgotten_retakeGetsAllThree()
      throws Exception {
    Scene c = lostInSecondUnlock("c3", 2, false, Duration.ZERO);
    nothingLingers(c);
  }

  /**
   * The shared rule ({@code leftCounted}, {@code ==}) with a give-back owed on a lost hold:
   * RedLock held three times; {@link #unlockTwiceWhileLeaseRunsOut} with the timer running: in
   * the second unlock r3's owed give-back fails again while its lease runs out (its deadline task
   * reports the loss): the give-back stays owed, and oweFailedRelease (from 2) closes the
   * unlock's own section on the lost hold — one owed section and the application's outer one
   * left. The outer unlock closes both (the give-back silently, its own reporting the loss):
   * nothing lingers, nothing is closed twice, and the next acquisition takes all three.
   */
  @Test
  void thriceHeld_giveBackOwed_lostDuringSecondUnlock_outerClosesRest_retakeGetsAllThree()
      throws Exception {
    Scene c = lostInSecondUnlock("c7", 3, false, Duration.ZERO);
    Hold hold = c.r3().holdOf(threadId());
    assertNotNull(hold, "sections open");
    assertFalse(hold.active());
    assertEquals(2, hold.count(), "the owed give-back and the application's outer section");
    assertEquals(1, hold.giveBacksOwed(), "the give-back that failed again");
    RuntimeException outer = unlockOutcome(c.red());
    assertTrue(outer instanceof IllegalMonitorStateException, "every lease over, every member "
        + "lost: " + outer);
    nothingLingers(c);
  }

  /**
   * (Round 12's defect, fixed: a lost hold owes its release left pending as its abandon, under
   * that request, before it leaves the registry — LockEngine#nothingOwed.) The {@code from} 1
   * shape of the defect below: {@link #unlockTwiceWhileLeaseRunsOut} (held
   * twice) with B's requests delayed 30 s (not dark): the inner unlock's r3 release P (expected
   * 2, TTL the outer section's ~8 s) and the outer unlock's sealed re-send of it get no answer,
   * r3's lease runs out during the re-send, and oweFailedRelease closes every section and
   * forgets the hold at once — P never settled nor sealed (the branch for a hold NOT lost
   * settles under P's request; this one does not). The thread takes r3 alone twice with a 60 s
   * fixed lease: P's late copy applies to the new hold.
   */
  @Test
  void finalUnlock_lostWithGiveBackPending_lateCopyRefusedByTheNextHold() throws Exception {
    Scene c = lostInSecondUnlock("c6", 2, false, Duration.ofSeconds(30));
    Await.until(Duration.ofSeconds(15), () -> c.r3().holdOf(threadId()) == null,
        "r3's lost hold forgotten (anything it owes settled)");
    assertNewHoldUntouchedByLateCopies(c.b(), c.r3(), "c6-3");
  }

  /**
   * The lost hold is forgotten with its release still pending. RedLock held twice (r3's
   * client: 1.5 s timeout, 3 s watchdog); with B's requests delayed 20 s, the inner unlock's r3
   * release P (expected 2, TTL 3 s) gets no answer and r3's lease lapses meanwhile: lost,
   * section closed (oweFailedRelease), the outer unlock closes the last, the loss's abandon is
   * settled once B answers, and the hold is forgotten — P itself never settled nor sealed. The
   * thread takes r3 alone twice with a 60 s fixed lease; P's late copy arrives and applies to
   * the NEW hold (count 2, as P expected): count 1 and expiry 3 s, the key expires ~57 s before
   * the lease the thread was granted, and a rival takes r3 while the thread still holds it. On
   * e3f3974 the lingering hold refused the re-take, so no new hold could be hit.
   */
  @Test
  void lostMemberForgotten_pendingReleaseLateCopy_refusedByTheNextHold() throws Exception {
    Scene c = lostInInnerUnlock("c4", Duration.ofSeconds(20));
    assertNull(unlockOutcome(c.red()), "outer: r1, r2 released, r3 reports its loss");
    Await.until(Duration.ofSeconds(15), () -> c.r3().holdOf(threadId()) == null,
        "r3's abandon settled, its hold forgotten");
    assertNewHoldUntouchedByLateCopies(c.b(), c.r3(), "c4-3");
  }

  /** {@return the outcome of unlocking {@code lock} with B's requests held back {@code delay}} */
  private RuntimeException unlockDelayed(DistributedLock lock, Duration delay) {
    proxy.delay(delay);
    try {
      return unlockOutcome(lock);
    } finally {
      proxy.delay(Duration.ZERO); // what was held back is delivered late
    }
  }

  /**
   * The thread takes {@code lock} (key {@code key}, client {@code b}) alone twice with a 60 s
   * fixed lease while late copies of its lost hold's release are still on their way; once they
   * have landed, the new hold must keep its count and expiry, and no rival may get in.
   */
  private void assertNewHoldUntouchedByLateCopies(LockClient b, DistributedLock lock, String key)
      throws InterruptedException {
    lock.lock(60, TimeUnit.SECONDS);
    lock.lock(60, TimeUnit.SECONDS);
    assertEquals("2", redisState.hget(key, RedisProbe.fieldOf(b)), "the new hold");
    assertTrue(proxy.pendingRequestBytes() > 0, "late copies still on their way (slow machine?)");
    // The new hold as soon as a late copy changed it, or as every copy has landed.
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0
        || !"2".equals(redisState.hget(key, RedisProbe.fieldOf(b))), "late copies landed");
    String count = redisState.hget(key, RedisProbe.fieldOf(b));
    long pttl = redisState.pttl(key);
    boolean believed = lock.isHeldByCurrentThread();
    boolean rivalTook;
    try {
      rivalTook = rival.getLock(key).tryLock(20, TimeUnit.SECONDS);
    } finally {
      while (lock.getHoldCount() > 0) {
        unlockOutcome(lock);
      }
    }
    System.out.println(key + " after late copies: count=" + count + " pttl=" + pttl
        + " believed=" + believed + " rival took=" + rivalTook);
    assertEquals("2", count, "a late copy of the lost hold's release changed the new hold");
    assertTrue(pttl > 30_000, "the new hold's expiry was cut to " + pttl + " ms");
    assertFalse(rivalTook, "two holders of " + key);
  }

  /**
   * The same without a RedLock (whether the RedLock path alone forgets a pending release): a
   * plain lock held twice (1.5 s timeout, 3 s watchdog); with B's requests delayed 20 s, the
   * inner unlock's release P gets no answer (LockException) and the lease lapses meanwhile; the
   * application calls unlock() again (IllegalMonitorStateException: lost) and once more for
   * its outer section; the loss's abandon is settled, the hold forgotten with P unsealed. The
   * thread takes the lock again twice: P's late copy applies to the new hold.
   */
  @Test
  void plainLock_lostWithReleasePending_lateCopyRefusedByTheNextHold() throws Exception {
    LockClient b = viaProxy("1500ms", "3s");
    LossRecorder losses = LossRecorder.on(b);
    RedisLock lock = (RedisLock) b.getLock("c5");
    lock.lock();
    lock.lock();
    RuntimeException inner = unlockDelayed(lock, Duration.ofSeconds(20));
    assertTrue(inner instanceof LockException, "no answer: " + inner);
    assertLossOf(losses, "c5", "the lease lapsed while the release went unanswered");
    RuntimeException retried = unlockOutcome(lock);
    assertTrue(retried instanceof IllegalMonitorStateException, "lost: " + retried);
    RuntimeException outer = unlockOutcome(lock);
    assertTrue(outer instanceof IllegalMonitorStateException, "lost: " + outer);
    Await.until(Duration.ofSeconds(15), () -> lock.holdOf(threadId()) == null,
        "the abandon settled, the hold forgotten");
    assertNewHoldUntouchedByLateCopies(b, lock, "c5");
  }
}
