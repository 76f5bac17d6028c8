package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * A RedLock's {@code unlock()} that throws {@link LockException} (fewer than a majority
 * released: servers did not answer) is called again, as its contract asks: the retry finishes
 * only what the failed call left — a member released then is not released twice, and a member
 * the thread took alone since is its own. RedLock here: {@code <p>-0} on client {@link #a}
 * (direct), {@code <p>-1} and {@code <p>-2} on a client through the proxy (one server: the
 * client-side path, not independent servers).
 */
class RedLockRetryTest extends ProxiedClientFixture {

  private DistributedLock red(LockClient b, String prefix) {
    return a.getRedLock(a.getLock(prefix + "-0"), b.getLock(prefix + "-1"),
        b.getLock(prefix + "-2"));
  }

  /**
   * Held twice; the inner unlock releases {@code -0} only ({@code -1}, {@code -2} unanswered,
   * their releases run late). The retry re-sends those two and leaves {@code -0} alone: every
   * member keeps the outer section (before, the retry released {@code -0} again, ending it).
   */
  @Test
  void innerUnlockFailed_retryReleasesOnlyWhatFailed() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "in");
    red.lock();
    red.lock();
    unlockUnanswered(red);
    red.unlock(); // the retry
    assertEquals("1", redisState.hget("in-0", RedisProbe.fieldOf(a)), "-0 released once");
    assertEquals("1", redisState.hget("in-1", RedisProbe.fieldOf(b)));
    assertEquals("1", redisState.hget("in-2", RedisProbe.fieldOf(b)));
    assertEquals(1, a.getLock("in-0").getHoldCount());
    red.unlock(); // the outer section
    for (int m = 0; m < 3; m++) {
      assertFalse(redisState.exists("in-" + m), "in-" + m + " left");
    }
  }

  /**
   * The final unlock releases {@code -0} only ({@code -1}, {@code -2} end in doubt); the thread
   * takes {@code -1} alone (its release in doubt settled first), then calls the RedLock's
   * unlock() again: that retry finishes {@code -2} and leaves the thread's new hold of
   * {@code -1} alone (before, it released it: the model test's "member-retaken").
   */
  @Test
  void finalUnlockFailed_memberTakenAloneBeforeTheRetry_keepsIt() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "fin");
    red.lock();
    unlockUnanswered(red);
    DistributedLock alone = b.getLock("fin-1");
    assertTrue(alone.tryLock(), "taken alone");
    red.unlock(); // the retry
    assertTrue(alone.isHeldByCurrentThread(), "the thread's own hold of fin-1, kept");
    assertEquals("1", redisState.hget("fin-1", RedisProbe.fieldOf(b)));
    alone.unlock();
    awaitNothingLeft("fin");
  }

  /** The RedLock taken again before the failed unlock is retried: the record is not used. */
  @Test
  void acquiredAgainBeforeTheRetry_nextUnlockIsAnOrdinaryOne() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "again");
    red.lock();
    unlockUnanswered(red);
    red.lock(); // each member settles what its own hold owes first
    red.unlock();
    awaitNothingLeft("again");
  }

  /**
   * Fewer than a majority released because the other members' client is closed (the model
   * soak's shape: the members lost, then the client closed): nothing is left to call again, so
   * unlock() answers as any lock of a closed client, IllegalStateException — before, a
   * LockException asked for a retry that could never finish.
   */
  @Test
  void membersOfAClosedClient_unlockSaysClosed_notRetry() {
    LockClient b = direct();
    DistributedLock red = red(b, "closed");
    red.lock();
    b.close();
    IllegalStateException e = assertThrows(IllegalStateException.class, red::unlock);
    assertTrue(e.getMessage().contains("2 of 3 members is closed"), e.getMessage());
    assertFalse(redisState.exists("closed-0"), "the open client's member released");
  }

  /** Every member's client closed: the same answer, and nothing is recorded for a retry. */
  @Test
  void allMembersClientClosed_unlockSaysClosed() {
    LockClient b = direct();
    DistributedLock red = b.getRedLock(b.getLock("all-0"), b.getLock("all-1"),
        b.getLock("all-2"));
    red.lock();
    b.close();
    assertThrows(IllegalStateException.class, red::unlock);
    assertThrows(IllegalStateException.class, red::unlock, "still closed, no retry record");
  }

  /** A failed unlock's record lives in its members' clients, and goes when they close. */
  @Test
  void recordOfAFailedUnlock_isDroppedWhenTheMembersClientsClose() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "rec");
    red.lock();
    unlockUnanswered(red);
    assertEquals(1, Clients.engine(a).redLockUnfinished().size());
    assertEquals(1, Clients.engine(b).redLockUnfinished().size());
    b.close();
    assertTrue(Clients.engine(b).redLockUnfinished().isEmpty(), "a closed client keeps none");
    a.close();
    assertTrue(Clients.engine(a).redLockUnfinished().isEmpty());
  }

  private void awaitNothingLeft(String prefix) {
    Await.until(Duration.ofSeconds(20), () -> !redisState.exists(prefix + "-0")
        && !redisState.exists(prefix + "-1") && !redisState.exists(prefix + "-2"),
        "nothing left held of " + prefix);
  }
}
