package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * Attacks on {@link LockHold} (issue 16 §2) against a real Redis: cancellation racing a grant,
 * garbage collection after a release in doubt, read-write sides with braced names, fencing and
 * handoff, releases whose reply is lost, closing the client under asynchronous calls. Each test
 * is a probe that passed (kept as a regression test) unless marked {@code @Disabled("defect")}.
 */
class LockHoldAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  /** A replica of {@link #redis}, for the replica acknowledgement probes only. */
  private static RedisServer replica;

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private LockClient client;
  private LockClient other;
  private LossRecorder losses;

  @BeforeAll
  static void startReplica() {
    replica = redis.server().startReplica();
  }

  @AfterAll
  static void stopReplica() {
    if (replica != null) {
      replica.close();
    }
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri());
    client = clients.create(config);
    other = clients.create(config);
    losses = LossRecorder.on(client);
  }

  @AfterEach
  void tearDown() {
    ReplicaAcknowledgementTest.Suspension.resume(replica);
    if (redis.server().isPaused()) {
      redis.server().resume();
    }
    threads.shutdownNow();
  }

  private <T> T onOtherThread(java.util.concurrent.Callable<T> call) throws Exception {
    return threads.submit(call).get(30, TimeUnit.SECONDS);
  }

  private Set<String> keys() {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.keys("*");
    }
  }

  /** Waits until {@code n} acquisitions of {@code c} are parked as handoff candidates. */
  private static void awaitCandidates(LockClient c, String name, int n) {
    LockEngine engine = Clients.engine(c);
    LockNames names = LockNames.of("", name);
    Await.until(Duration.ofSeconds(10), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == n;
    }, n + " handoff candidate(s) parked on " + name);
  }

  /**
   * Cancel an acquireAsync exactly while a thread of the same client hands it the lock: either
   * the future completes with the hold, or the cancelled acquisition gives the handed lock back
   * at once — never stranded in Redis under a field nobody renews or releases (which would keep
   * it locked for the whole 30 s watchdog lease).
   */
  @Test
  void cancelRacingALocalHandoff_neverStrandsTheLock() throws Exception {
    DistributedLock lock = client.getLock("cancel-handoff");
    ExecutorService holder = Executors.newSingleThreadExecutor();
    try {
      for (int round = 0; round < 25; round++) {
        holder.submit((Runnable) lock::lock).get(30, TimeUnit.SECONDS);
        CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
        awaitCandidates(client, "cancel-handoff", 1);
        CountDownLatch go = new CountDownLatch(1);
        Future<?> unlocked = holder.submit(() -> {
          go.await();
          lock.unlock();
          return null;
        });
        go.countDown();
        if (round % 2 == 1) {
          Thread.onSpinWait();
        }
        boolean cancelled = f.cancel(true);
        unlocked.get(30, TimeUnit.SECONDS);
        if (!cancelled) {
          LockHold hold = f.join();
          assertTrue(hold.isHeld(), "round " + round);
          hold.release();
        }
        final int r = round;
        Await.until(Duration.ofSeconds(10), () -> !lock.isLocked(),
            "round " + r + ": the lock is free (cancelled " + cancelled + ")");
        Await.until(Duration.ofSeconds(10), () -> Clients.engine(client).activeHolds() == 0,
            "round " + r + ": nothing held in the registry");
      }
    } finally {
      holder.shutdownNow();
    }
    assertEquals(0, losses.count(), losses.toString());
  }

  /**
   * Cancel an acquireAsync of a fair lock while its queue entry is being granted (another
   * client unlocks at the same moment): the lock and its queue end empty promptly, and another
   * client takes the lock at once — no stale queue entry or stranded grant blocks it.
   */
  @Test
  void cancelRacingAFairGrant_leavesNoQueueEntryOrGrant() throws Exception {
    DistributedLock lock = client.getFairLock("cancel-fair");
    DistributedLock otherLock = other.getFairLock("cancel-fair");
    ExecutorService holder = Executors.newSingleThreadExecutor();
    try {
      for (int round = 0; round < 15; round++) {
        assertTrue(holder.submit(() -> otherLock.tryLock(10, TimeUnit.SECONDS))
            .get(30, TimeUnit.SECONDS));
        CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
        try (Jedis jedis = redis.server().admin()) {
          Await.until(Duration.ofSeconds(10),
              () -> jedis.llen("redisson_lock_queue:{cancel-fair}") == 1, "queued");
        }
        CountDownLatch go = new CountDownLatch(1);
        Future<?> unlocked = holder.submit(() -> {
          go.await();
          otherLock.unlock();
          return null;
        });
        go.countDown();
        boolean cancelled = f.cancel(true);
        unlocked.get(30, TimeUnit.SECONDS);
        if (!cancelled) {
          f.join().release();
        }
        final int r = round;
        Await.until(Duration.ofSeconds(10), () -> !lock.isLocked(),
            "round " + r + ": the lock is free (cancelled " + cancelled + ")");
        try (Jedis jedis = redis.server().admin()) {
          Await.until(Duration.ofSeconds(10),
              () -> jedis.llen("redisson_lock_queue:{cancel-fair}") == 0,
              "round " + r + ": the queue is empty");
        }
        // A cancelled acquisition granted anyway holds it briefly, then releases it: another
        // client takes it within seconds, not at the end of a 30 s watchdog lease.
        assertTrue(holder.submit(() -> otherLock.tryLock(10, TimeUnit.SECONDS))
            .get(30, TimeUnit.SECONDS), "round " + r + ": another client takes it soon");
        holder.submit((Runnable) otherLock::unlock).get(30, TimeUnit.SECONDS);
      }
    } finally {
      holder.shutdownNow();
    }
    assertEquals(0, losses.count(), losses.toString());
  }

  /**
   * A release in doubt (Redis does not answer) ends the hold; the object is then dropped and
   * collected. No LockLost may be reported for it (it was released, not lost), and the lock is
   * settled in the background.
   */
  @Test
  void collectedAfterAReleaseInDoubt_isNotReportedLost() throws Exception {
    LockClient quick = clients.create(config, "holdfast.redis.timeout", "300ms",
        "holdfast.watchdog-timeout", "3s");
    LossRecorder quickLosses = LossRecorder.on(quick);
    DistributedLock lock = quick.getLock("doubt-gc");
    releaseInDoubtAndDrop(lock);
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(8); // several watchdog rounds
    while (System.nanoTime() < end) {
      System.gc();
      Thread.sleep(200);
    }
    Await.until(Duration.ofSeconds(30), () -> !lock.isLocked(), "settled in the background");
    assertEquals(0, quickLosses.count(), quickLosses.toString());
  }

  private void releaseInDoubtAndDrop(DistributedLock lock) throws Exception {
    LockHold hold = lock.acquire(null, null);
    redis.server().pause();
    try {
      assertThrows(RuntimeException.class, hold::release);
    } finally {
      redis.server().resume();
    }
  }

  /**
   * A release whose reply is lost, then a second release(): the second does nothing, and the
   * lock is settled in the background well before its watchdog lease would end — not renewed,
   * not stuck until lease end.
   */
  @Test
  void releaseReplyLost_secondReleaseNoOp_lockSettledBeforeLeaseEnd() throws Exception {
    LockClient slow = clients.create(config, "holdfast.redis.timeout", "300ms",
        "holdfast.watchdog-timeout", "60s");
    DistributedLock lock = slow.getLock("doubt-settle");
    LockHold hold = lock.acquire(null, null);
    redis.server().pause();
    long start;
    try {
      assertThrows(RuntimeException.class, hold::release);
    } finally {
      redis.server().resume();
      start = System.nanoTime();
    }
    hold.release(); // nothing
    assertFalse(hold.isHeld());
    Await.until(Duration.ofSeconds(40), () -> !lock.isLocked(),
        "settled in the background before the 60 s lease is over");
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(45));
  }

  /**
   * releaseAfter (keep path) whose reply is lost: the hold is over for its owner, nothing is
   * reported lost, and the lock is not renewed: it is free by the time the keep (and the lease
   * left) is over plus the settling.
   */
  @Test
  void releaseAfterReplyLost_isNotRenewed_andNotReportedLost() throws Exception {
    LockClient quick = clients.create(config, "holdfast.redis.timeout", "300ms",
        "holdfast.watchdog-timeout", "3s");
    LossRecorder quickLosses = LossRecorder.on(quick);
    DistributedLock lock = quick.getLock("keep-doubt");
    LockHold hold = lock.acquire(null, null);
    redis.server().pause();
    CompletableFuture<Void> ended;
    try {
      ended = EngineAccess.releaseAfter(hold, 2_000).toCompletableFuture();
      Await.until(Duration.ofSeconds(30), ended::isDone, "the keep ended in doubt");
    } finally {
      redis.server().resume();
    }
    assertTrue(ended.isCompletedExceptionally());
    assertFalse(hold.isHeld());
    hold.release(); // nothing
    Await.until(Duration.ofSeconds(20), () -> !lock.isLocked(), "expires: never renewed");
    Thread.sleep(4_000); // a few watchdog rounds after
    assertEquals(0, quickLosses.count(), quickLosses.toString());
  }

  /** releaseAfter longer than several watchdog rounds: no false loss of the released hold. */
  @Test
  void releaseAfter_longerThanWatchdogRounds_noFalseLoss() throws Exception {
    LockClient quick = clients.create(config, "holdfast.watchdog-timeout", "3s");
    LossRecorder quickLosses = LossRecorder.on(quick);
    DistributedLock lock = quick.getLock("keep-long");
    LockHold hold = lock.acquire(null, null);
    long start = System.nanoTime();
    EngineAccess.releaseAfter(hold, 6_000).toCompletableFuture().get(20, TimeUnit.SECONDS);
    assertFalse(hold.isHeld());
    System.gc();
    assertTrue(lock.isLocked());
    Await.until(Duration.ofSeconds(30), () -> !lock.isLocked(), "expires after the keep");
    assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(5_500),
        "kept as asked");
    assertEquals(0, quickLosses.count(), quickLosses.toString());
  }

  /**
   * A LockHold and thread holds on the two sides of one read-write lock with a braced name:
   * the hold's write excludes the acquiring thread's read (no write-owner read through the
   * field suffix), a thread's read excludes the hold's write, holds of both owners share
   * reads, and nothing is left in Redis (no stray rwlock_timeout key) afterwards.
   */
  @Test
  void readWrite_bracedName_holdAndThreadsExcludeAcrossSides_andLeaveNoKeys() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("{K}");
    LockHold write = rw.writeLock().acquire(null, null);
    assertFalse(rw.readLock().tryLock(), "the acquiring thread is no write owner");
    assertFalse(onOtherThread(() -> rw.readLock().tryLock()));
    assertFalse(onOtherThread(() -> other.getReadWriteLock("{K}").readLock().tryLock()));
    assertThrows(LockNotAcquiredException.class,
        () -> rw.readLock().acquire(Duration.ofMillis(200), null), "a second owner's read");
    write.release();

    assertTrue(rw.readLock().tryLock());
    LockHold read = rw.readLock().acquire(Duration.ofSeconds(5), null);
    assertThrows(LockNotAcquiredException.class,
        () -> rw.writeLock().acquire(Duration.ofMillis(200), null));
    assertFalse(onOtherThread(() -> rw.writeLock().tryLock()));
    rw.readLock().unlock();
    assertThrows(LockNotAcquiredException.class,
        () -> rw.writeLock().acquire(Duration.ofMillis(200), null), "the hold still reads");
    read.release();
    LockHold write2 = rw.writeLock().acquire(Duration.ofSeconds(5), null);
    write2.release();
    Await.until(Duration.ofSeconds(10), () -> keys().isEmpty(), "nothing left: " + keys());
    assertEquals(0, losses.count(), losses.toString());
  }

  /**
   * Redisson names 'a' and '{a}' share one unlock channel: a LockHold on "{cc}" and a waiter
   * on "cc" of the same client must each wake on their own release, and a release of one never
   * hands the other's lock over.
   */
  @Test
  void sameChannelNames_holdReleaseWakesTheRightWaiter() throws Exception {
    DistributedLock braced = client.getLock("{cc}");
    DistributedLock plain = client.getLock("cc");
    LockHold b = braced.acquire(null, null);
    LockHold p = plain.acquire(null, null);
    CompletableFuture<LockHold> waitsBraced = braced.acquireAsync(null, null)
        .toCompletableFuture();
    CompletableFuture<LockHold> waitsPlain = plain.acquireAsync(null, null)
        .toCompletableFuture();
    Await.until(Duration.ofSeconds(10),
        () -> Clients.engine(client).waitingThreads() == 2, "both wait");
    b.release();
    LockHold b2 = waitsBraced.get(20, TimeUnit.SECONDS);
    assertFalse(waitsPlain.isDone(), "the plain lock is still held");
    assertTrue(p.isHeld());
    p.release();
    LockHold p2 = waitsPlain.get(20, TimeUnit.SECONDS);
    assertTrue(b2.isHeld() && p2.isHeld());
    b2.release();
    p2.release();
    assertFalse(braced.isLocked() || plain.isLocked());
  }

  /**
   * A fenced LockHold waiting behind a fenced thread hold of the same client is never handed
   * the lock locally (a handoff assigns no token): it gets a fresh, greater token.
   */
  @Test
  void fencedHold_afterAThreadOfTheSameClient_getsAFreshGreaterToken() throws Exception {
    dev.holdfast.FencedLock lock = client.getFencedLock("fenced-handoff");
    ExecutorService holder = Executors.newSingleThreadExecutor();
    try {
      long first = holder.submit(() -> {
        lock.lock();
        return lock.getToken();
      }).get(30, TimeUnit.SECONDS);
      long handoffs = Clients.engine(client).localHandoffs();
      CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
      Await.until(Duration.ofSeconds(10),
          () -> Clients.engine(client).waitingThreads() == 1, "the hold waits");
      holder.submit((Runnable) lock::unlock).get(30, TimeUnit.SECONDS);
      LockHold hold = f.get(30, TimeUnit.SECONDS);
      assertNotNull(hold.token());
      assertTrue(hold.token() > first, hold.token() + " after " + first);
      assertEquals(handoffs, Clients.engine(client).localHandoffs(), "no local handoff");
      // A plain handle's waiter behind the fenced hold: the hold's release never hands it
      // over either (the fenced hold goes through Redis), and the waiter takes it.
      Future<Boolean> plain = threads.submit(
          () -> client.getLock("fenced-handoff").tryLock(20, TimeUnit.SECONDS));
      Await.until(Duration.ofSeconds(10),
          () -> Clients.engine(client).waitingThreads() == 1, "the thread waits");
      hold.release();
      assertTrue(plain.get(30, TimeUnit.SECONDS));
      assertThrows(LockNotAcquiredException.class,
          () -> lock.acquire(Duration.ZERO, null), "held by the plain waiter's thread");
    } finally {
      holder.shutdownNow();
    }
    assertEquals(0, losses.count(), losses.toString());
  }

  /**
   * A loss of a LockHold is reported with its negative owner id; the listener sees it once;
   * isHeld() and toString() agree with release() about the loss.
   */
  @Test
  void lostHold_negativeIdReportedOnce_isHeldAndToStringAgree() throws Exception {
    DistributedLock lock = client.getLock("lost-neg");
    LockHold hold = lock.acquire(null, null);
    long owner = ((OwnedLockHold) hold).ownerId;
    assertTrue(owner < 0);
    onOtherThread(() -> {
      other.getLock("lost-neg").forceUnlock();
      return null;
    });
    assertTrue(hold.toString().contains("held"), "no Redis call in toString: " + hold);
    Await.until(Duration.ofSeconds(30), () -> {
      return !hold.isHeld();
    }, "the renewal finds it gone");
    assertTrue(hold.toString().contains("lost"), hold.toString());
    losses.awaitFirst(Duration.ofSeconds(10), "the hold's loss");
    assertEquals(owner, losses.reports().get(0).event().threadId());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, hold::release);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    hold.release(); // a second call does nothing
    assertEquals(1, losses.count(), losses.toString());
    assertFalse(lock.isHeldByThread(owner));
  }

  /**
   * Closing the client while a releaseAsync waits for its reply (Redis paused with CLIENT
   * PAUSE, so the script runs once the pause ends; reproduced in round 0 when run with the
   * whole class, i.e. with warm pool connections): the stage completes, and a release that
   * ran in Redis must not leave the hold believed. Was a defect: the first send went
   * unanswered ("may have run"), the re-send could not borrow from the closed pool ("Could not
   * get a resource from the pool", a plain JedisException) and RedisTopology.call threw a
   * plain LockException that dropped the earlier send's doubt, so the release was taken as
   * "answered with an error, the hold goes on". Now such a call ends in doubt
   * (RedisUnavailableException that may have run) and the release is settled as designed.
   */
  @Test
  void closeDuringReleaseInFlight_releaseThatRan_isNotBelievedHeld() throws Exception {
    for (int round = 0; round < 12; round++) {
      String name = "close-release-" + round;
      LockClient closing = clients.create(config, "holdfast.redis.timeout", "1s",
          "holdfast.watchdog-timeout", "20s");
      LockHold hold = closing.getLock(name).acquire(null, null);
      CompletableFuture<Void> released;
      redis.server().pause();
      try {
        released = hold.releaseAsync().toCompletableFuture();
        Await.until(Duration.ofSeconds(10), () -> ((OwnedLockHold) hold).hold().ending(),
            "the release is in flight");
        if (round >= 9) {
          Thread.sleep(900 + (round - 9) * 150L); // about when the first send times out
        } else if (round % 3 == 1) {
          Thread.sleep(round * 10L);
        }
        closing.close();
        Await.until(Duration.ofSeconds(30), released::isDone, "the release stage completes");
      } finally {
        redis.server().resume();
      }
      Throwable failure = released.handle((v, t) -> t).join();
      Thread.sleep(500); // what was sent has run
      boolean inRedis = other.getLock(name).isLocked();
      assertFalse(hold.isHeld() && !inRedis, "round " + round + ": believed held although"
          + " Redis released it (stage " + failure + ", " + hold + ", keys " + keys() + ")");
    }
  }

  private LockClient replicated(String... extra) {
    Map<String, String> base = Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.SYNC_REPLICAS, "1", LockClientConfig.SYNC_TIMEOUT, "250ms");
    LockClient c = clients.create(base, extra);
    DistributedLock warmUp = c.getLock("warm-up");
    warmUp.lock();
    warmUp.unlock();
    return c;
  }

  private void awaitReplicaCaughtUp() {
    Await.until(Duration.ofSeconds(10),
        () -> redis.server().withAdmin(jedis -> jedis.waitReplicas(1, 1_000)) == 1,
        "the replica acknowledges the master's writes");
  }

  /**
   * sync-replicas=1, replica silent: a LockHold's grant is not acknowledged, so it is rolled
   * back and not given (acquire with a wait throws LockNotAcquired, nothing left on the
   * master); an acquireAsync without a wait keeps trying and completes once the replica is back.
   */
  @Test
  void unacknowledgedGrant_ofAHold_isRolledBack_andAsyncCompletesWhenTheReplicaIsBack()
      throws Exception {
    awaitReplicaCaughtUp();
    LockClient c = replicated();
    DistributedLock lock = c.getLock("acked-hold");
    CompletableFuture<LockHold> pending;
    try (ReplicaAcknowledgementTest.Suspension stopped =
        ReplicaAcknowledgementTest.Suspension.of(replica)) {
      assertThrows(LockNotAcquiredException.class,
          () -> lock.acquire(Duration.ofMillis(600), null));
      assertFalse(lock.isLocked(), "rolled back on the master");
      assertEquals(0, Clients.engine(c).activeHolds());
      pending = lock.acquireAsync(null, null).toCompletableFuture();
      Thread.sleep(1_000); // it must not complete while nothing acknowledges
      assertFalse(pending.isDone(), "granted without acknowledgement: " + pending);
    }
    awaitReplicaCaughtUp();
    LockHold hold = pending.get(20, TimeUnit.SECONDS);
    assertTrue(hold.isHeld());
    assertTrue(lock.isLocked());
    hold.release();
    assertFalse(lock.isLocked());
  }

  /**
   * sync-replicas=1: a thread hands the lock locally to a waiting LockHold while the replica is
   * silent. The hold must never be given a grant the replica did not acknowledge: while the
   * replica is stopped the hold either is not complete, or the master has its field; once the
   * replica is back it completes and releases cleanly.
   */
  @Test
  void handoffToAHold_notAcknowledged_isNeverAGrantWithoutTheMaster() throws Exception {
    awaitReplicaCaughtUp();
    LockClient c = replicated();
    LossRecorder cLosses = LossRecorder.on(c);
    DistributedLock lock = c.getLock("acked-handoff");
    ExecutorService holder = Executors.newSingleThreadExecutor();
    try {
      holder.submit((Runnable) lock::lock).get(30, TimeUnit.SECONDS);
      CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
      awaitCandidates(c, "acked-handoff", 1);
      try (ReplicaAcknowledgementTest.Suspension stopped =
          ReplicaAcknowledgementTest.Suspension.of(replica)) {
        try {
          holder.submit((Runnable) lock::unlock).get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
          // an unacknowledged release may report itself; what matters is the hold below
        }
        Thread.sleep(1_000);
        if (f.isDone()) {
          LockHold early = f.join();
          String field = Clients.engine(c).fieldOf(((OwnedLockHold) early).ownerId);
          boolean onMaster;
          try (Jedis j = redis.server().admin()) {
            onMaster = j.hexists("acked-handoff", field);
          }
          assertTrue(onMaster, "a hold given while the replica was silent is on the master");
        }
      }
      awaitReplicaCaughtUp();
      LockHold hold = f.get(30, TimeUnit.SECONDS);
      assertTrue(hold.isHeld());
      hold.release();
      Await.until(Duration.ofSeconds(10), () -> !lock.isLocked(), "released");
    } finally {
      holder.shutdownNow();
    }
    assertEquals(0, cLosses.count(), cLosses.toString());
  }

  /**
   * A LockHold of a fair lock interoperates with Redisson: a Redisson fair waiter queued behind
   * the hold is woken by its release and takes the lock long before the hold's watchdog lease.
   */
  @Test
  void fairHold_redissonFairWaiter_wakesOnRelease() throws Exception {
    org.redisson.config.Config rc = new org.redisson.config.Config();
    rc.useSingleServer().setAddress(redis.server().uri());
    org.redisson.api.RedissonClient redisson = org.redisson.Redisson.create(rc);
    try {
      LockHold hold = client.getFairLock("fair-interop").acquire(null, null);
      org.redisson.api.RLock rlock = redisson.getFairLock("fair-interop");
      Future<Long> waited = threads.submit(() -> {
        long start = System.nanoTime();
        boolean got = rlock.tryLock(20, TimeUnit.SECONDS);
        long took = System.nanoTime() - start;
        if (got) {
          rlock.unlock();
        }
        return got ? took : -1;
      });
      try (Jedis jedis = redis.server().admin()) {
        Await.until(Duration.ofSeconds(10),
            () -> jedis.llen("redisson_lock_queue:{fair-interop}") == 1, "Redisson queued");
      }
      Thread.sleep(300); // let it subscribe
      hold.release();
      long took = waited.get(30, TimeUnit.SECONDS);
      assertTrue(took > 0 && took < TimeUnit.SECONDS.toNanos(15),
          "Redisson woke after " + TimeUnit.NANOSECONDS.toMillis(took) + "ms");
      // And the other way round: a LockHold waits behind Redisson's fair hold.
      rlock.lock();
      CompletableFuture<LockHold> f = client.getFairLock("fair-interop")
          .acquireAsync(Duration.ofSeconds(20), null).toCompletableFuture();
      try (Jedis jedis = redis.server().admin()) {
        Await.until(Duration.ofSeconds(10),
            () -> jedis.llen("redisson_lock_queue:{fair-interop}") == 1, "the hold queued");
      }
      rlock.unlock();
      LockHold h2 = f.get(30, TimeUnit.SECONDS);
      assertTrue(h2.isHeld());
      h2.release();
      assertFalse(rlock.isLocked());
    } finally {
      redisson.shutdown();
    }
    assertEquals(0, losses.count(), losses.toString());
  }
}
