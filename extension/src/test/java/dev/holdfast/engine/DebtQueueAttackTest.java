package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 20 on the debt queue ({@code Hold.cleanups}, {@code LockEngine#settleNow}, the
 * cleanup rounds): a hold with a fixed lease (no watchdog) whose final unlock()'s reply is held
 * back by the proxy past the lease's deadline, so that the deadline's abandon and the final
 * release's end-in-doubt both queue.
 */
class DebtQueueAttackTest extends ProxiedClientFixture {

  private static void awaitSettled(LockClient b) {
    awaitSettled(b, () -> Clients.engine(b).holds().values().stream()
        .allMatch(h -> h.cleanup() == null));
  }

  private static void awaitSettled(LockClient b, java.util.function.BooleanSupplier done) {
    try {
      Await.until(Duration.ofSeconds(10), done, "every debt settled");
    } catch (AssertionError e) {
      StringBuilder state = new StringBuilder();
      Clients.engine(b).holds().values().forEach(h -> state.append(h).append(" active=")
          .append(h.active()).append(" cleanup=").append(h.cleanup()).append(" count=")
          .append(h.count()).append(" inDoubt=").append(h.endedInDoubt()).append("; "));
      throw new AssertionError(e.getMessage() + ": " + state, e);
    }
  }

  /**
   * Black-holed across the deadline, then healed: the late release and the debts settle, the
   * lock is free within seconds, and the thread's next hold of it is intact.
   */
  @Test
  void finalUnlockUnansweredPastTheDeadline_freeAfterHeal_nextHoldIntact() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock lock = b.getLock("dq1");
    lock.lock(1500, TimeUnit.MILLISECONDS);
    proxy.blackHole(true);
    try {
      assertThrows(RuntimeException.class, lock::unlock, "final unlock unanswered");
      Await.until(Duration.ofSeconds(20), () -> !redisState.exists("dq1"),
          "the lease ran out in Redis");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "held requests delivered");
    awaitSettled(b);
    assertTrue(rival.getLock("dq1").tryLock(), "free for others");
    rival.getLock("dq1").unlock();
    lock.lock(10, TimeUnit.SECONDS);
    assertEquals("1", redisState.hget("dq1", RedisProbe.fieldOf(b)));
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
  }

  /**
   * A rival takes the lock after the lease ran out while the release was held back: the late
   * copy and the debts, settled after the heal, leave the rival's hold alone.
   */
  @Test
  void rivalTakesItWhileHeldBack_debtsLeaveTheRival() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock lock = b.getLock("dq2");
    lock.lock(1500, TimeUnit.MILLISECONDS);
    proxy.blackHole(true);
    DistributedLock theirs = rival.getLock("dq2");
    try {
      assertThrows(RuntimeException.class, lock::unlock, "final unlock unanswered");
      Await.until(Duration.ofSeconds(20), theirs::tryLock, "the rival takes it after the lease");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "held requests delivered");
    awaitSettled(b);
    assertEquals("1", redisState.hget("dq2", RedisProbe.fieldOf(rival)), "rival intact");
    assertTrue(theirs.isHeldByCurrentThread());
    theirs.unlock();
  }

  /**
   * The release's request delayed (not lost) past the lease: the thread locks again at once,
   * on a fresh connection, before the delayed copy reaches Redis. The copy, arriving late, must
   * not end the new hold.
   */
  @Test
  void delayedCopyArrivesAfterTheThreadLockedAgain_newHoldIntact() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock lock = b.getLock("dq3");
    lock.lock(1000, TimeUnit.MILLISECONDS);
    proxy.delay(Duration.ofMillis(2500));
    assertThrows(RuntimeException.class, lock::unlock, "final unlock unanswered in time");
    proxy.delay(Duration.ZERO);
    Await.until(Duration.ofSeconds(20), () -> {
      try {
        return lock.tryLock(0, 10_000, TimeUnit.MILLISECONDS);
      } catch (RuntimeException e) {
        return false; // settling the doubt may time out while the link is slow
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }, "locked again");
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "the delayed copy delivered");
    Await.until(Duration.ofSeconds(10), () -> Clients.engine(b).holds().size() == 1
        && Clients.engine(b).holds().values().iterator().next().cleanup() == null,
        "debts settled");
    assertEquals("1", redisState.hget("dq3", RedisProbe.fieldOf(b)), "the new hold intact");
    assertTrue(lock.isHeldByCurrentThread());
    assertTrue(redisState.pttl("dq3") > 5_000, "its lease intact: " + redisState.pttl("dq3"));
    lock.unlock();
    assertTrue(!redisState.exists("dq3"));
  }

  /**
   * As {@link #rivalTakesItWhileHeldBack_debtsLeaveTheRival}, the unlocking thread then ending
   * (a thread per task): the debts settle and what is left of its hold (ended in
   * doubt, count 0) leaves the client's registry — no entry per such unlock leaks. (While the
   * thread lives, the entry stays until its next call on the lock, as documented.)
   */
  @Test
  void threadEndsAfterUnlockInDoubt_registryEntryDropped() throws Exception {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock theirs = rival.getLock("dq4");
    Thread worker = new Thread(() -> {
      DistributedLock lock = b.getLock("dq4");
      lock.lock(1500, TimeUnit.MILLISECONDS);
      proxy.blackHole(true);
      assertThrows(RuntimeException.class, lock::unlock, "final unlock unanswered");
    });
    try {
      worker.start();
      worker.join(20_000);
      Await.until(Duration.ofSeconds(20), theirs::tryLock, "the rival takes it after the lease");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "held requests delivered");
    assertTrue(!worker.isAlive());
    awaitSettled(b, () -> Clients.engine(b).holds().isEmpty());
    theirs.unlock();
  }

  /**
   * The lease's deadline passes while the final unlock's call is in flight (timeout 2 s, lease
   * 500 ms, black-holed): the deadline and the call's doubt both act on the hold. After the
   * heal the lock is free within seconds, every debt settles, and the thread's next hold is
   * intact once the late copy has reached Redis.
   */
  @Test
  void deadlinePassesDuringTheFinalCall_freeAfterHeal_nextHoldIntact() throws Exception {
    LockClient b = viaProxy("2s", "30s");
    DistributedLock lock = b.getLock("dq5");
    lock.lock(500, TimeUnit.MILLISECONDS);
    proxy.blackHole(true);
    try {
      RuntimeException e = assertThrows(RuntimeException.class, lock::unlock);
      assertTrue(e instanceof dev.holdfast.LockException
          || e instanceof IllegalMonitorStateException, e.toString());
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "held requests delivered");
    Await.until(Duration.ofSeconds(5), () -> !redisState.exists("dq5"), "free after the heal");
    awaitSettled(b);
    assertTrue(lock.tryLock(0, 10_000, TimeUnit.MILLISECONDS));
    assertEquals("1", redisState.hget("dq5", RedisProbe.fieldOf(b)));
    awaitSettled(b);
    assertEquals("1", redisState.hget("dq5", RedisProbe.fieldOf(b)), "new hold intact");
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertTrue(!redisState.exists("dq5"));
  }
}
