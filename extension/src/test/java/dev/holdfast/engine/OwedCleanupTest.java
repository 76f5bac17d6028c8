package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
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
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * What a lost hold owes Redis ({@link Hold#cleanup()}, settled by {@link LockEngine}'s cleanup
 * rounds): every debt is settled, however it arose, before the hold leaves the registry — a debt
 * owed while a round settles another is not dropped, a newer debt never replaces an older one —
 * and an abandon removes the field even when the request it is owed under was settled already.
 */
class OwedCleanupTest extends ProxiedClientFixture {

  private static void assertSealed(String marker, String what) {
    assertTrue(marker != null && marker.startsWith("x:0"), what + ": " + marker);
  }

  private String marker(Hold hold, String requestId) {
    return redisState.get(hold.names.markerPrefix() + requestId);
  }

  /**
   * A lost hold (both sections closed by the application) whose inner release was left pending
   * and whose abandon is owed under a fresh request: the round that settles the abandon finds
   * the pending release and owes its seal then (an abandon under it). That second debt, owed
   * while the round runs, is settled too: the hold leaves the registry and the pending release
   * is sealed (before, the round's own flag refused the start it asked for, and the hold stayed
   * until some other debt started a round — a CI run timed out waiting for it).
   */
  @Test
  void debtOwedWhileARoundSettlesAnother_isSettledToo() {
    LockClient client = a;
    LockEngine engine = Clients.engine(client);
    for (int run = 0; run < 20; run++) {
      RedisLock lock = (RedisLock) client.getLock("owed-" + run);
      lock.lock();
      lock.lock();
      long thread = Thread.currentThread().getId();
      Hold hold = lock.holdOf(thread);
      String pending = engine.nextRequestId();
      hold.pendingRelease(new Hold.Pending(pending, 2, engine.watchdogMillis(), System.nanoTime()));
      assertTrue(engine.lose(hold, LossCause.LEASE_UNCONFIRMED, "test: lease unconfirmed"));
      hold.closeNewest();
      hold.closeNewest();
      String abandon = engine.nextRequestId();
      engine.owe(hold, new Hold.Cleanup(abandon, 2, "abandon", engine.leaseOverAfter(1_000)));
      Await.until(Duration.ofSeconds(10), () -> lock.holdOf(thread) == null,
          "run " + run + ": both debts settled, the hold forgotten");
      assertSealed(marker(hold, abandon), "run " + run + ": the abandon settled");
      assertSealed(marker(hold, pending), "run " + run + ": the pending release sealed");
      assertFalse(redisState.exists("owed-" + run), "run " + run + ": the field removed");
    }
  }

  /**
   * A debt owed while an older one is still unsettled (a loss's abandon whose call is in flight,
   * then a re-entry's or final release's undo) is settled after it, never in its place: the older
   * request, possibly sent, would otherwise stay unsealed, and a late copy of it could remove the
   * thread's next hold's field. Here the older debt is recorded without a round (as if its call
   * were in flight), the newer one starts the round: both are settled before the hold is
   * forgotten.
   */
  @Test
  void newerDebt_neverReplacesAnOlderOne() {
    LockClient client = a;
    LockEngine engine = Clients.engine(client);
    RedisLock lock = (RedisLock) client.getLock("owed-twice");
    lock.lock();
    long thread = Thread.currentThread().getId();
    Hold hold = lock.holdOf(thread);
    assertTrue(engine.lose(hold, LossCause.LEASE_UNCONFIRMED, "test: lease unconfirmed"));
    hold.closeNewest();
    String older = engine.nextRequestId();
    String newer = engine.nextRequestId();
    hold.owe(new Hold.Cleanup(older, 1, "abandon", engine.leaseOverAfter(1_000)));
    engine.owe(hold, new Hold.Cleanup(newer, 1, "abandon", engine.leaseOverAfter(1_000)));
    Await.until(Duration.ofSeconds(10), () -> lock.holdOf(thread) == null,
        "both debts settled, the hold forgotten");
    assertEquals("x:0:1", marker(hold, older), "the older debt settled too");
    assertEquals("x:0:1", marker(hold, newer), "the newer debt settled");
    assertFalse(redisState.exists("owed-twice"));
  }

  /**
   * Attack round 13's liveness hole: held twice, the inner unlock's replies are lost (its
   * release ran: Redis has count 1, the release pending); the next acquisition settles that
   * release first, and the settle's replies are lost too — it ran, sealing the release, but the
   * client cannot know. The thread then ends without unlock(). The watchdog owes the abandon
   * under the pending release's request: before, the abandon found that request sealed and
   * removed nothing, so the dead thread's field lived on until its TTL (up to the watchdog
   * timeout); now it is removed as soon as the abandon is settled, and a rival takes the lock.
   */
  @Test
  void threadEndsAfterUnansweredSettleOfPendingRelease_fieldRemovedAtOnce() throws Exception {
    LockClient b = viaProxy("500ms", "30s");
    RedisLock lock = (RedisLock) b.getLock("ended");
    AtomicReference<String> pendingId = new AtomicReference<>();
    AtomicReference<Hold> held = new AtomicReference<>();
    AtomicReference<Long> threadId = new AtomicReference<>();
    CompletableFuture<Void> done = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      try {
        long me = Thread.currentThread().getId();
        threadId.set(me);
        lock.lock();
        lock.lock();
        held.set(lock.holdOf(me));
        proxy.dropReplies(RedisTopology.ATTEMPTS);
        assertThrows(LockException.class, lock::unlock, "the inner unlock unanswered");
        Hold.Pending pending = lock.holdOf(me).pendingRelease();
        assertNotNull(pending, "the inner release left pending");
        pendingId.set(pending.requestId());
        assertEquals("1", redisState.hget("ended", held.get().field), "it ran");
        proxy.dropReplies(RedisTopology.ATTEMPTS);
        assertThrows(LockException.class, lock::tryLock, "its settle unanswered");
        assertNotNull(lock.holdOf(me).pendingRelease(), "still pending for the client");
        assertEquals("x:1", marker(held.get(), pending.requestId()), "the settle ran: sealed");
        done.complete(null);
      } catch (Throwable e) {
        done.completeExceptionally(e);
      }
    }, "ends-with-release-pending");
    t.start();
    done.get(60, TimeUnit.SECONDS);
    t.join(TimeUnit.SECONDS.toMillis(30));
    assertFalse(t.isAlive());
    long me = threadId.get();
    Await.until(Duration.ofSeconds(30), () -> lock.holdOf(me) == null,
        "the dead thread's hold found, its abandon settled");
    assertFalse(redisState.exists("ended"), "the dead thread's field removed at once, not "
        + "left to its TTL (" + redisState.pttl("ended") + " ms left)");
    assertEquals("x:0:1", marker(held.get(), pendingId.get()), "sealed by the abandon");
    DistributedLock rivals = rival.getLock("ended");
    assertTrue(rivals.tryLock(), "a rival takes it at once");
    rivals.unlock();
    assertNull(lock.holdOf(me));
  }

  /**
   * A fresh acquisition finds a count for its thread's field that none of its calls explains (a
   * leftover of an earlier client with the same id, written here directly): the call fails, and
   * the stale field is removed in the background at once (before, the record of that debt was
   * registered without starting a round, so it waited for the thread's next call or another
   * debt), after which the thread takes the lock.
   */
  @Test
  void unexplainedCountForTheThread_staleFieldRemovedInTheBackground() {
    DistributedLock lock = a.getLock("stale");
    try (var jedis = redis.server().admin()) {
      jedis.hset("stale", RedisProbe.fieldOf(a), "2");
      jedis.pexpire("stale", 60_000);
    }
    LockException e = assertThrows(LockException.class, lock::tryLock);
    assertTrue(e.getMessage().contains("hold count 2"), e.getMessage());
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("stale"),
        "the stale field removed in the background");
    assertTrue(lock.tryLock(), "then the thread takes it");
    lock.unlock();
  }

  /**
   * Round 14's lead: Redis answers a debt's settling call with an error (here OOM: the server
   * at its memory limit refuses writes). The debt stays owed and is retried — the request it
   * settles may still arrive late — and once Redis takes writes again it is settled and the
   * field removed. Before, it was dropped at the first error: the field stayed until its lease
   * (30 s here), with nobody believing in it, and nothing sealed the request.
   */
  @Test
  void settleRefusedWithAnError_staysOwed_settledOnceRedisTakesWritesAgain() {
    LockEngine engine = Clients.engine(a);
    RedisLock lock = (RedisLock) a.getLock("refused");
    lock.lock();
    long thread = Thread.currentThread().getId();
    Hold hold = lock.holdOf(thread);
    long oomBefore = oomErrors();
    redis.server().withAdmin(j -> j.configSet("maxmemory", "1"));
    try {
      assertTrue(engine.lose(hold, LossCause.LEASE_UNCONFIRMED, "test: lease unconfirmed"));
      hold.closeNewest();
      String abandon = engine.nextRequestId();
      engine.owe(hold, new Hold.Cleanup(abandon, 1, "abandon", engine.leaseOverAfter(100)));
      Await.until(Duration.ofSeconds(10), () -> oomErrors() > oomBefore,
          "the settling call refused with OOM");
      assertTrue(redisState.exists("refused"), "nothing removed while writes are refused");
      assertEquals(hold, lock.holdOf(thread), "the debt is still owed");
    } finally {
      redis.server().withAdmin(j -> j.configSet("maxmemory", "0"));
    }
    Await.until(Duration.ofSeconds(15), () -> lock.holdOf(thread) == null,
        "the debt settled once Redis takes writes, the hold forgotten");
    assertFalse(redisState.exists("refused"), "the field removed, long before its 30 s lease");
  }

  private long oomErrors() {
    String stats = redis.server().withAdmin(j -> j.info("errorstats"));
    return stats.lines().filter(l -> l.startsWith("errorstat_OOM:count=")).mapToLong(
        l -> Long.parseLong(l.substring("errorstat_OOM:count=".length()).split(",")[0]))
        .sum();
  }
}
