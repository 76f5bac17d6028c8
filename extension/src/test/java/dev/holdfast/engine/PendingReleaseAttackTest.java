package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 15 on ff86c27 (a pending inner release caps the hold's belief; the watchdog
 * renews such a hold only for a watchdog section other than the newest).
 */
class PendingReleaseAttackTest extends ProxiedClientFixture {

  /**
   * Outer watchdog section, inner 1 s section (3 s watchdog). The inner unlock runs but its
   * replies are lost: pending, belief capped at sent + 3 s; the outer watchdog section keeps the
   * lock renewed (in Redis and in the holder's belief) well past that. The thread then retries
   * the inner unlock: the re-send, answered from the marker, confirms the hold until the
   * ORIGINAL send + 3 s — already past — so the hold is declared lost (LEASE_UNCONFIRMED)
   * although Redis still holds it, renewed, for this thread.
   */
  @Test
  void resentInnerRelease_afterRenewals_doesNotReportAFalseLoss() throws Exception {
    LockClient b = viaProxy("300ms", "3s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("resend");
    innerReleaseRanUnansweredThenRenewed(b, lock);
    lock.unlock(); // the retry: the pending release re-sent, answered from its marker
    assertEquals("1", redisState.hget("resend", RedisProbe.fieldOf(b)), "still held in Redis");
    assertTrue(redisState.pttl("resend") > 0, "still held in Redis");
    assertTrue(lock.isHeldByCurrentThread(), "the holder believes it holds it; losses: "
        + losses);
    assertEquals(0, losses.count(), "no loss reported: " + losses);
    lock.unlock();
    assertEquals(0, losses.count(), "no loss reported: " + losses);
  }

  /**
   * As above, but the thread re-enters instead of retrying the unlock: the re-entry settles the
   * pending release (it ran) and confirms the hold until the first send + 3 s, already past,
   * although the outer watchdog section kept it renewed. The re-entry must succeed and the hold
   * must not be reported lost while Redis holds it.
   */
  @Test
  void reentryAfterRenewals_settlesTheRanRelease_noFalseLoss() throws Exception {
    LockClient b = viaProxy("300ms", "3s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("reenter");
    innerReleaseRanUnansweredThenRenewed(b, lock);
    lock.lock(); // re-entry: settles the pending release
    assertEquals("2", redisState.hget("reenter", RedisProbe.fieldOf(b)), "re-entered in Redis");
    assertTrue(lock.isHeldByCurrentThread(), "believed held; losses: " + losses);
    lock.unlock();
    assertTrue(lock.isHeldByCurrentThread(), "believed held; losses: " + losses);
    lock.unlock();
    assertEquals(0, losses.count(), "no loss reported: " + losses);
  }

  /**
   * Outer watchdog section, inner watchdog section; the inner release's request is lost on the
   * way (it never ran) but may have: pending, belief capped at sent + 3 s. The outer watchdog
   * section keeps it renewed; the re-entry settles the release as never run; the hold must go
   * on, renewed, with no loss reported while Redis holds it.
   */
  @Test
  void pendingNeverRan_outerWatchdog_settledByReentry_neverReportedLost() throws Exception {
    LockClient b = viaProxy("300ms", "3s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("notrun");
    lock.lock();
    lock.lock();
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
      proxy.resetAll(); // the held request dies with its connection
    } finally {
      proxy.blackHole(false);
    }
    assertEquals("2", redisState.hget("notrun", RedisProbe.fieldOf(b)), "it never ran");
    Hold hold = ((RedisLock) lock).holdOf(Thread.currentThread().getId());
    long since = System.nanoTime();
    Await.until(Duration.ofSeconds(30),
        () -> System.nanoTime() - since > TimeUnit.SECONDS.toNanos(5),
        "5 s");
    assertTrue(hold.believedAt(System.nanoTime()), "renewed meanwhile; losses: " + losses);
    lock.lock(); // settles: never ran, the section still open
    assertEquals("3", redisState.hget("notrun", RedisProbe.fieldOf(b)), "re-entered");
    long after = System.nanoTime();
    Await.until(Duration.ofSeconds(30),
        () -> System.nanoTime() - after > TimeUnit.SECONDS.toNanos(5),
        "5 s more");
    assertTrue(lock.isHeldByCurrentThread(), "believed held; losses: " + losses);
    assertEquals(0, losses.count(), "no loss reported: " + losses);
    lock.unlock();
    lock.unlock();
    lock.unlock();
    assertEquals(0, losses.count(), "no loss reported: " + losses);
    assertEquals(0, redisState.pttl("notrun") > 0 ? 1 : 0, "released");
  }

  /**
   * Late copy: held 4 s, then 60 s inside; the inner release is held back by the proxy (black
   * hole) past its timeout, then delivered late, cutting the TTL to what the outer section has
   * left. A rival takes the lock once it expires; by then the holder must no longer believe it
   * holds it and its loss must be reported.
   */
  @Test
  void lateCopyOfInnerRelease_rivalOnlyAfterTheHolderStopsBelieving() throws Exception {
    LockClient b = viaProxy("300ms", "30s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("late");
    lock.lock(4, TimeUnit.SECONDS);
    lock.lock(60, TimeUnit.SECONDS);
    Hold hold = ((RedisLock) lock).holdOf(Thread.currentThread().getId());
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20),
        () -> "1".equals(redisState.hget("late", RedisProbe.fieldOf(b))),
        "the late copy ran");
    assertTrue(redisState.pttl("late") <= 4_000, "the expiry cut: " + redisState.pttl("late"));
    DistributedLock rivals = rival.getLock("late");
    assertTrue(rivals.tryLock(20, TimeUnit.SECONDS), "the rival takes it once it expires");
    try {
      assertTrue(!hold.believedAt(System.nanoTime()), "still believed by the first holder");
      assertEquals("late", losses.awaitFirst(java.time.Duration.ofSeconds(10),
          "the first holder's loss reported").event().lockName());
    } finally {
      rivals.unlock();
    }
  }

  /**
   * Outer 2 s section, inner watchdog section (30 s watchdog). The inner release never runs (its
   * request dies with its connection) but may have: pending, not renewed any more, lost at the
   * outer deadline (LEASE_EXPIRED). Redis still has the field, its TTL set by the last renewal
   * to the 30 s watchdog lease: nobody holds the lock, yet a rival waits for that expiry (before
   * the change, expire() declared LEASE_UNCONFIRMED and owed an abandon that freed it).
   */
  @Test
  void pendingWatchdogSectionNeverRan_lostAtOuterDeadline_lockFreedSoon() throws Exception {
    LockClient b = viaProxy("300ms", "30s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("stuck");
    lock.lock(2, TimeUnit.SECONDS);
    lock.lock();
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
      proxy.resetAll(); // the held request dies with its connection
    } finally {
      proxy.blackHole(false);
    }
    assertEquals("2", redisState.hget("stuck", RedisProbe.fieldOf(b)), "it never ran");
    var lost = losses.awaitFirst(java.time.Duration.ofSeconds(15), "lost at the outer deadline");
    assertTrue(lost.event().reason().contains("ran out"), lost.toString());
    long lostAt = System.nanoTime();
    DistributedLock rivals = rival.getLock("stuck");
    assertTrue(rivals.tryLock(8, TimeUnit.SECONDS), "the rival gets the lock nobody holds; "
        + "pttl " + redisState.pttl("stuck") + " after "
        + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lostAt) + "ms");
    rivals.unlock();
  }

  /**
   * The read side: held for 3 s, then for 60 s inside (per-section timeout keys); the inner read
   * unlock's replies are lost, so whether it ran is unknown. Had it run, the reader's hold would
   * end with its outer section's 3 s; the reader cannot tell, so it is believed no longer than
   * that and reported lost then (attack round 15 first asked for no loss while Redis keeps the
   * 60 s section: that belief would be unsafe whenever the release did run). What it must not do
   * is leave the read section in Redis with nobody believing it: the loss owes an abandon, and a
   * writer takes the lock soon after (not after a minute).
   */
  @Test
  void readHold_innerReleaseUnanswered_lostAtTheOuterLease_writerNotKeptOut() throws Exception {
    LockClient b = viaProxy("300ms", "30s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getReadWriteLock("rw").readLock();
    lock.lock(3, TimeUnit.SECONDS);
    lock.lock(60, TimeUnit.SECONDS);
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
    var lost = losses.awaitFirst(java.time.Duration.ofSeconds(15), "lost at the outer lease");
    assertTrue(lost.event().reason().contains("inner unlock() got no answer"), lost.toString());
    DistributedLock writer = rival.getReadWriteLock("rw").writeLock();
    assertTrue(writer.tryLock(10, TimeUnit.SECONDS), "a writer takes it soon; pttl "
        + redisState.pttl("rw"));
    writer.unlock();
  }

  /**
   * Outer watchdog section, inner 1 s section (3 s watchdog); the inner unlock runs, its replies
   * lost; returns once the outer section's renewals kept the hold believed past send + 3 s.
   */
  private void innerReleaseRanUnansweredThenRenewed(LockClient b, DistributedLock lock)
      throws InterruptedException {
    lock.lock();
    lock.lock(1, TimeUnit.SECONDS);
    Hold hold = ((RedisLock) lock).holdOf(Thread.currentThread().getId());
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    long sentAt = System.nanoTime();
    assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
    assertEquals("1", redisState.hget(lock.getName(), RedisProbe.fieldOf(b)), "it ran");
    Await.until(Duration.ofSeconds(30),
        () -> System.nanoTime() - sentAt > TimeUnit.SECONDS.toNanos(5)
        && hold.believedAt(System.nanoTime()),
        "renewed by the outer watchdog section past the first send + 3 s");
  }
}
