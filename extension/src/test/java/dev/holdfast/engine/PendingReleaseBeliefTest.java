package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * An inner unlock whose replies are lost may have run, and a release that runs sets the key's
 * expiry to what the sections left need — shorter than the hold was believed for when the
 * inner section had the longer lease. Until the release is settled, the hold is believed no
 * longer than that expiry and is not renewed for the section the release may have ended.
 */
class PendingReleaseBeliefTest extends ProxiedClientFixture {

  /**
   * Held for 3 s, then for 60 s inside: the key's TTL is 60 s. The inner unlock runs (the key's
   * TTL cut to what the outer section has left) but its replies are lost. A rival takes the lock
   * once that expiry passes; by then the holder no longer believes it holds it (before, it did,
   * for the inner section's 60 s: two holders).
   */
  @Test
  void innerReleaseUnanswered_cutTheExpiry_holdBelievedNoLonger() throws Exception {
    LockClient b = viaProxy("300ms", "30s");
    LossRecorder losses = LossRecorder.on(b);
    DistributedLock lock = b.getLock("cut");
    lock.lock(3, TimeUnit.SECONDS);
    lock.lock(60, TimeUnit.SECONDS);
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
    assertEquals("1", redisState.hget("cut", RedisProbe.fieldOf(b)), "it ran");
    assertTrue(redisState.pttl("cut") <= 3_000, "the expiry cut: " + redisState.pttl("cut"));
    DistributedLock rivals = rival.getLock("cut");
    assertTrue(rivals.tryLock(20, TimeUnit.SECONDS), "the rival takes it once it expires");
    try {
      Hold hold = ((RedisLock) lock).holdOf(Thread.currentThread().getId());
      assertFalse(hold.believedAt(System.nanoTime()), "still believed by the first holder");
      assertEquals("cut", losses.awaitFirst(Duration.ofSeconds(10),
          "the first holder's loss reported").event().lockName());
    } finally {
      rivals.unlock();
    }
  }

  /**
   * Held for 5 s, then by the watchdog inside (3 s watchdog: renewed every second). The inner
   * unlock runs (the key's TTL cut to what the outer section has left) but its replies are lost:
   * the watchdog no longer renews the hold for that section, so the lock expires with the outer
   * lease and a rival takes it (before, renewals kept it held as long as the thread lived).
   */
  @Test
  void innerWatchdogReleaseUnanswered_notRenewedPastTheOuterLease() throws Exception {
    LockClient b = viaProxy("300ms", "3s");
    DistributedLock lock = b.getLock("renewed");
    lock.lock(5, TimeUnit.SECONDS);
    lock.lock();
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
    assertEquals("1", redisState.hget("renewed", RedisProbe.fieldOf(b)), "it ran");
    DistributedLock rivals = rival.getLock("renewed");
    assertTrue(rivals.tryLock(20, TimeUnit.SECONDS), "the rival takes it once it expires");
    try {
      assertFalse(lock.isHeldByCurrentThread(), "still believed held by the first holder");
    } finally {
      rivals.unlock();
    }
  }
}
