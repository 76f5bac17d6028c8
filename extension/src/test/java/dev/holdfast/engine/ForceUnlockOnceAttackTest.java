package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

/**
 * Attack round 25 on cfa1054's run-once {@code forceUnlock()}: the request's marker records the
 * reply, an unanswered call is sealed in the background ({@code FORCE_SEAL}) and this client's
 * holds of the key are checked again once it lands. Invariant: a hold this client still believes
 * is in Redis, and a loss it reports really happened (its field is gone).
 */
class ForceUnlockOnceAttackTest extends ProxiedClientFixture {

  /**
   * {@code hold} is not believed while {@code rivals} (a rival's lock that excludes it) is taken.
   */
  private static void assertNoTwoHolders(LockHold hold, DistributedLock rivals, String how,
      LossRecorder losses) {
    boolean believes = hold.isHeld();
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(believes && rivalTakes, "two holders: " + how + "; losses " + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }

  /**
   * Every kind's unanswered forceUnlock() (its sends held 20 s on the way to Redis, the client's
   * timeout 1 s) throws; the request is sealed in the background while the held copies are
   * still on their way; another thread of this client then takes the lock. Once the copies
   * reached Redis the new hold is in Redis, or it is no longer believed (reported lost): never
   * believed and gone while a rival's lock that excludes it ({@code excluding}) is taken.
   */
  private void lateCopiesOfUnansweredCall(String key, Function<LockClient, DistributedLock> kind,
      Function<LockClient, DistributedLock> excluding) throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = kind.apply(b);
    LossRecorder losses = LossRecorder.on(b);
    kind.apply(b).forceUnlock(); // its script loaded: nothing held yet
    proxy.delay(Duration.ofSeconds(20));
    assertThrows(LockException.class, lock::forceUnlock, "no answer within the timeout");
    assertTrue(proxy.pendingRequestBytes() > 0, "its copies are still on the way to Redis");
    proxy.delay(Duration.ZERO);
    LockHold hold = take(lock, "takes-after-the-throw").get(60, TimeUnit.SECONDS);
    assertTrue(redisState.exists(key), "taken in Redis");
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0,
        "the forceUnlock's held sends delivered");
    Await.until(Duration.ofSeconds(20), () -> redisState.exists(key) || !hold.isHeld(),
        "the hold is in Redis, or no longer believed");
    assertNoTwoHolders(hold, excluding.apply(rival), "after the late copies", losses);
    if (hold.isHeld()) {
      hold.close();
    }
  }

  @Test
  void fairLock_lateCopiesOfUnansweredForceUnlock_noTwoHolders() throws Exception {
    lateCopiesOfUnansweredCall("fair-late", c -> c.getFairLock("fair-late"),
        c -> c.getFairLock("fair-late"));
  }

  @Test
  void writeLock_lateCopiesOfUnansweredForceUnlock_noTwoHolders() throws Exception {
    lateCopiesOfUnansweredCall("rw-late", c -> c.getReadWriteLock("rw-late").writeLock(),
        c -> c.getReadWriteLock("rw-late").readLock());
  }

  @Test
  void readLock_lateCopiesOfUnansweredForceUnlock_noTwoHolders() throws Exception {
    lateCopiesOfUnansweredCall("rr-late", c -> c.getReadWriteLock("rr-late").readLock(),
        c -> c.getReadWriteLock("rr-late").writeLock());
  }

  /**
   * Redis is unreachable (the proxy holds every byte) while this client force-unlocks a key that
   * another of its threads holds: the call throws, and the check of the hold cannot be answered
   * either, so the hold is reported lost "as if deleted". The held sends are then dropped
   * (connections reset): the request never ran, and the seal lands answering "sealed now,
   * nothing ran". The field was still in Redis, yet the loss stood (FORCE_UNLOCKED) and nobody
   * released the field: no rival could take the lock until the hold's lease (120 s) ran out. A
   * hold that cannot be asked about is now left to the seal: nothing ran, so it stays held.
   */
  @Test
  void unreachableForceUnlockThatNeverRan_holdReportedLost_fieldOrphaned() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = b.getLock("never-ran");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded
    LockHold hold = take(lock, "holds").get(60, TimeUnit.SECONDS);
    String field = Clients.engine(b).fieldOf(((OwnedLockHold) hold).ownerId);
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, lock::forceUnlock, "no answer");
      proxy.resetAll(); // the held copies are dropped: the request never runs
    } finally {
      proxy.blackHole(false);
    }
    // The seal lands (retried every 250 ms): a '-1' marker appears; until then wait generously.
    Await.until(Duration.ofSeconds(30), () -> proxy.pendingRequestBytes() == 0
        && redisState.hget("never-ran", field) != null, "settled");
    Await.until(Duration.ofSeconds(30), () -> losses.count() > 0 || hold.isHeld(),
        "settled belief");
    assertTrue(redisState.exists("never-ran"), "the request never ran: the field is in Redis");
    DistributedLock rivals = rival.getLock("never-ran");
    boolean stuck = !hold.isHeld() && !rivals.tryLock();
    assertFalse(losses.count() > 0 && redisState.hget("never-ran", field) != null,
        "reported lost while its field is still in Redis (stuck for anyone: " + stuck + "): "
        + losses);
  }

  /**
   * forceUnlock()'s sends are held 65 s on the way to Redis (a partition longer than a minute:
   * the kernel keeps retransmitting a closed socket's unsent bytes); the call throws and the
   * seal lands at once on a fresh connection, its marker living the seal time (60 s here).
   * Another thread of this client takes the lock after the seal's check. The held copy reaches
   * Redis after the marker expired: it runs, deletes that hold, and nothing checks it (the
   * seal's check is long over, the client's record only makes acquisitions answered later check
   * themselves) — the hold is believed and a rival takes the lock: two holders.
   */
  @Disabled("LIMITATION, documented (docs/safety.md, 'Nothing uncertain is left behind'): a "
      + "copy delayed longer than the seal time is outside what request markers guard against")
  @Test
  void copyLaterThanTheSealTime_deletesHoldTakenAfterTheSeal() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = b.getLock("very-late");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded
    long sealMillis = Clients.engine(b).markerMillis(true);
    proxy.delay(Duration.ofMillis(sealMillis + 5_000));
    assertThrows(LockException.class, lock::forceUnlock, "no answer within the timeout");
    assertTrue(proxy.pendingRequestBytes() > 0, "its copies are still on the way to Redis");
    proxy.delay(Duration.ZERO);
    LockHold hold = take(lock, "takes-after-the-seal").get(60, TimeUnit.SECONDS);
    assertTrue(redisState.exists("very-late"), "taken in Redis");
    Await.until(Duration.ofMillis(sealMillis + 60_000), () -> proxy.pendingRequestBytes() == 0,
        "the forceUnlock's held sends delivered");
    long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!redisState.exists("very-late") && hold.isHeld() && System.nanoTime() - settle < 0) {
      java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
    } // up to 20 s for a check to report the hold lost (none comes: the assertion below says)
    assertNoTwoHolders(hold, rival.getLock("very-late"), "a copy " + (sealMillis + 5_000)
        + " ms late deleted the hold taken after the seal", losses);
  }

  /**
   * Two threads of this client force-unlock the same key (held by a rival) at once, many
   * rounds: exactly one call reports the delete and the key is gone.
   */
  @Test
  void twoForceUnlocksRacing_exactlyOneDeletes() throws Exception {
    LockClient b = viaProxy("20s", "30s");
    proxy.delay(Duration.ofMillis(1));
    DistributedLock lock = b.getLock("race");
    for (int round = 0; round < 10; round++) {
      LockHold held = take(rival.getLock("race"), "rival-" + round).get(60, TimeUnit.SECONDS);
      CompletableFuture<Boolean> one = CompletableFuture.supplyAsync(lock::forceUnlock);
      CompletableFuture<Boolean> two = CompletableFuture.supplyAsync(lock::forceUnlock);
      int deleted = (one.get(60, TimeUnit.SECONDS) ? 1 : 0) + (two.get(60, TimeUnit.SECONDS)
          ? 1 : 0);
      assertEquals(1, deleted, "round " + round);
      assertFalse(redisState.exists("race"), "round " + round);
    }
  }

  /**
   * The client is closed while the seal of an unanswered forceUnlock() is pending (Redis
   * unreachable): close() returns promptly and the seal stops (no task keeps retrying on a
   * closed client; the request stays unsealed, as the client is gone).
   */
  @Test
  void clientClosedWhileSealPending_closesPromptly() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = b.getLock("closing");
    b.getLock("warm-force").forceUnlock();
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, lock::forceUnlock, "no answer");
      CompletableFuture<Void> closed = CompletableFuture.runAsync(b::close);
      closed.get(60, TimeUnit.SECONDS);
      assertTrue(Clients.engine(b).closed(), "closed");
    } finally {
      proxy.blackHole(false);
    }
    // Nothing of the closed client keeps calling Redis: once the held bytes are in, two reads
    // of the script calls a second apart agree (a seal retried every 250 ms never would).
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0, "delivered");
    Await.until(Duration.ofSeconds(30), () -> {
      long before = redisState.scriptCalls();
      java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(1));
      return before == redisState.scriptCalls();
    }, "no seal retries after close");
  }
}
