package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.engine.LockObserver.LossCause;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 21 on cbb94ab: a debt whose settling call Redis answers with an error stays owed
 * and is retried every 2 s while its seal would matter. The probes look at what the retry does
 * to the thread's next holds, to a rival's hold, to the holder's own calls, and at close().
 */
class DebtRetryAttackTest extends ProxiedClientFixture {

  /** Makes {@code lock}'s current hold of this thread lost, owing an abandon under a new id. */
  private static Hold loseOwingAbandon(LockEngine engine, RedisLock lock, long leaseMillis) {
    Hold hold = lock.holdOf(Thread.currentThread().getId());
    assertTrue(engine.lose(hold, LossCause.LEASE_UNCONFIRMED, "test: lease unconfirmed"));
    hold.closeNewest();
    engine.owe(hold, new Hold.Cleanup(engine.nextRequestId(), 1, "abandon",
        engine.leaseOverAfter(leaseMillis)));
    return hold;
  }

  private long errors(String code) {
    String stats = redis.server().withAdmin(j -> j.info("errorstats"));
    String prefix = "errorstat_" + code + ":count=";
    return stats.lines().filter(l -> l.startsWith(prefix)).mapToLong(
        l -> Long.parseLong(l.substring(prefix.length()).split(",")[0])).sum();
  }

  /**
   * Makes Redis refuse writes (OOM; the caller gives them back), makes {@code lock}'s hold lost
   * owing an abandon, and waits until its settling call has been refused.
   */
  private Hold oweRefused(LockEngine engine, RedisLock lock, long leaseMillis) {
    long oomBefore = errors("OOM");
    refuseWrites(true);
    Hold hold = loseOwingAbandon(engine, lock, leaseMillis);
    Await.until(Duration.ofSeconds(10), () -> errors("OOM") > oomBefore,
        "the settling call refused with OOM");
    return hold;
  }

  private void refuseWrites(boolean on) {
    redis.server().withAdmin(j -> j.configSet("maxmemory", on ? "1" : "0"));
  }

  /**
   * Lead 1: an error that only the settling call meets (the default user may not PUBLISH: the
   * resolve of a field that is the lock's last publishes, an acquisition never does). While the
   * debt is refused, the holder's next lock() settles it first and fails with a LockException
   * naming the lock, without hanging; it does not leak a hold. Once the field's lease is over
   * the resolve no longer publishes, the background settles the debt (long before the 60 s seal
   * horizon) and the thread takes the lock again.
   */
  @Test
  void settleRefusedByAcl_lockFailsNamingTheLock_thenSettledWhenTheFieldExpires() {
    LockEngine engine = Clients.engine(a);
    RedisLock lock = (RedisLock) a.getLock("acl-refused");
    lock.lock(12, TimeUnit.SECONDS);
    long thread = Thread.currentThread().getId();
    long errorsBefore = errors("ERR");
    redis.server().withAdmin(j -> j.aclSetUser("default", "-publish", "-spublish"));
    try {
      Hold hold = loseOwingAbandon(engine, lock, 12_000);
      Await.until(Duration.ofSeconds(10), () -> errors("ERR") > errorsBefore,
          "the settling call refused (NOPERM inside the script)");
      assertEquals(hold, lock.holdOf(thread), "still owed");
      long started = System.nanoTime();
      LockException e = assertThrows(LockException.class, () -> lock.tryLock(1, TimeUnit.SECONDS));
      assertTrue(e.getMessage().contains("acl-refused"), "names the lock: " + e.getMessage());
      assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(20), "no hang");
      assertFalse(lock.isHeldByCurrentThread());
      Await.until(Duration.ofSeconds(40), () -> lock.holdOf(thread) == null,
          "settled once the field expired (no publish needed), well before the seal horizon");
      assertTrue(lock.tryLock(), "the thread takes the lock again");
      assertEquals("1", redisState.hget("acl-refused", hold.field));
    } finally {
      redis.server().withAdmin(j -> j.aclSetUser("default", "+publish", "+spublish"));
    }
    lock.unlock();
  }

  /**
   * Lead 2: the OOM-refused debt still owed when memory comes back, the thread re-enters at once
   * (before the 2 s retry): its lock() settles the debt first, then holds twice. The background
   * retry that was scheduled finds nothing owed; the newer hold is neither released nor
   * shortened, and no loss is reported for it.
   */
  @Test
  void debtOwedWhenMemoryReturns_newerReentrantHold_untouchedByTheRetry() {
    LockEngine engine = Clients.engine(a);
    LossRecorder losses = LossRecorder.on(a);
    RedisLock lock = (RedisLock) a.getLock("newer");
    lock.lock();
    long thread = Thread.currentThread().getId();
    Hold old;
    try {
      old = oweRefused(engine, lock, 30_000);
    } finally {
      refuseWrites(false);
    }
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "the old hold's loss");
    lock.lock();
    lock.lock();
    assertTrue(lock.holdOf(thread) != old, "a new hold");
    assertEquals("2", redisState.hget("newer", old.field));
    long calls = redisState.scriptCalls();
    // Several retry periods (2 s each) of script traffic later, the new hold is as it was.
    Await.until(Duration.ofSeconds(30), () -> redisState.scriptCalls() > calls + 3
        || !"2".equals(redisState.hget("newer", old.field)), "some renewals or a change");
    assertEquals("2", redisState.hget("newer", old.field), "the newer hold's count");
    assertTrue(redisState.pttl("newer") > 10_000, "not shortened: " + redisState.pttl("newer"));
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(1, losses.count(), "no loss for the new hold: " + losses);
    lock.unlock();
    lock.unlock();
    assertFalse(redisState.exists("newer"));
  }

  /**
   * Lead 3: the hold's lease runs out while its debt is refused (OOM); memory comes back and a
   * rival takes the lock before the next retry. The retry settles the debt (seals the request)
   * without touching the rival's field.
   */
  @Test
  void leaseOverWhileOwed_rivalTakesTheLock_retryLeavesTheRivalAlone() {
    LockEngine engine = Clients.engine(a);
    RedisLock lock = (RedisLock) a.getLock("expired-owed");
    lock.lock(2, TimeUnit.SECONDS);
    long thread = Thread.currentThread().getId();
    Hold old;
    try {
      old = oweRefused(engine, lock, 2_000);
      Await.until(Duration.ofSeconds(20), () -> !redisState.exists("expired-owed"),
          "the lease ran out while owed");
      assertEquals(old, lock.holdOf(thread), "still owed");
    } finally {
      refuseWrites(false);
    }
    DistributedLock rivals = rival.getLock("expired-owed");
    assertTrue(rivals.tryLock(), "a rival takes it");
    Await.until(Duration.ofSeconds(20), () -> lock.holdOf(thread) == null,
        "the debt settled by a retry");
    assertTrue(rivals.isHeldByCurrentThread(), "the rival's field untouched");
    assertEquals("1", redisState.hget("expired-owed", RedisProbe.fieldOf(rival)));
    assertNull(redisState.hget("expired-owed", old.field));
    rivals.unlock();
  }

  /**
   * The retried resolve's own reply is lost (after memory returns): the call ran, the client
   * cannot know; the next retry finds the request settled and is done. The field is gone, the
   * thread takes the lock again, and a second client's hold taken in between is untouched.
   */
  @Test
  void retriedResolveReplyLost_nextRetryFindsItSettled() {
    LockClient b = viaProxy("1s", "30s");
    LockEngine engine = Clients.engine(b);
    RedisLock lock = (RedisLock) b.getLock("retry-lost");
    CompletableFuture<Void> done = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      try {
        lock.lock();
        long me = Thread.currentThread().getId();
        Hold old;
        try {
          old = oweRefused(engine, lock, 30_000);
          proxy.dropReplies(1);
        } finally {
          refuseWrites(false);
        }
        Await.until(Duration.ofSeconds(20), () -> proxy.pendingDrops() == 0,
            "the retry's reply dropped");
        Await.until(Duration.ofSeconds(30), () -> lock.holdOf(me) == null,
            "settled by the next retry");
        assertFalse(redisState.exists("retry-lost"), "the field removed");
        DistributedLock rivals = rival.getLock("retry-lost");
        assertTrue(rivals.tryLock(), "a rival takes it");
        assertFalse(lock.tryLock(), "the thread waits its turn");
        assertTrue(rivals.isHeldByCurrentThread());
        rivals.unlock();
        assertTrue(lock.tryLock());
        assertEquals("1", redisState.hget("retry-lost", old.field));
        lock.unlock();
        done.complete(null);
      } catch (Throwable e) {
        done.completeExceptionally(e);
      }
    }, "retry-lost");
    t.start();
    Await.until(Duration.ofSeconds(90), done::isDone, "the probe thread finished");
    done.join();
  }

  /**
   * close() while a debt is refused by OOM: the client closes promptly (the retry loop does not
   * hold it up) and the field is left to its lease, nothing hangs.
   */
  @Test
  void closeWhileDebtRefused_closesPromptly() throws Exception {
    LockClient b = direct();
    LockEngine engine = Clients.engine(b);
    RedisLock lock = (RedisLock) b.getLock("closing");
    lock.lock();
    try {
      oweRefused(engine, lock, 30_000);
      CompletableFuture<Void> closed = CompletableFuture.runAsync(b::close);
      closed.get(30, TimeUnit.SECONDS);
    } finally {
      refuseWrites(false);
    }
    assertTrue(redisState.pttl("closing") > 0, "left to its lease");
  }

  /**
   * Lead 3: Redis restarts empty (no persistence; its memory limit back to the configured one)
   * while an OOM-refused debt is owed. The next retry settles it on the empty server (seals the
   * request, removes nothing), the hold is forgotten, a rival's hold taken after the restart is
   * untouched and the thread takes the lock after it.
   */
  @Test
  void redisRestartsEmptyWhileOwed_retrySettles_rivalUntouched() {
    LockEngine engine = Clients.engine(a);
    RedisLock lock = (RedisLock) a.getLock("restarted");
    lock.lock();
    long thread = Thread.currentThread().getId();
    Hold old;
    try {
      old = oweRefused(engine, lock, 30_000);
    } finally {
      redis.server().restartEmpty();
    }
    DistributedLock rivals = rival.getLock("restarted");
    Await.until(Duration.ofSeconds(30), () -> {
      try {
        return rivals.tryLock();
      } catch (LockException e) {
        return false; // the rival's connections are being replaced
      }
    }, "a rival takes the lock on the restarted server");
    Await.until(Duration.ofSeconds(30), () -> lock.holdOf(thread) == null,
        "the debt settled by a retry after the restart");
    assertEquals("1", redisState.hget("restarted", RedisProbe.fieldOf(rival)),
        "the rival's hold untouched");
    assertNull(redisState.hget("restarted", old.field));
    assertTrue(rivals.isHeldByCurrentThread());
    rivals.unlock();
    assertTrue(lock.tryLock(), "the thread takes it");
    lock.unlock();
  }
}
