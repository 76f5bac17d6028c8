package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.CommitGuard;
import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.LockLost;
import dev.holdfast.Locked;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.transaction.RollbackException;
import jakarta.transaction.Status;
import jakarta.transaction.TransactionManager;
import jakarta.transaction.TransactionSynchronizationRegistry;
import jakarta.transaction.Transactional;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attacks on the commit guard (issue 17, part 1): false rollbacks and false losses of the
 * REDIS check, and transactions that commit under a lost lock. Real Redis, real Narayana.
 */
class CommitGuardAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  static final List<Integer> OUTCOMES = CommitGuardTest.OUTCOMES;

  @BeforeAll
  static void narayanaStoresInTarget() {
    CommitGuardTest.narayanaStoresInTarget();
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
    OUTCOMES.clear();
  }

  private static TransactionManager tm() {
    return com.arjuna.ats.jta.TransactionManager.transactionManager();
  }

  private static TransactionSynchronizationRegistry registry() {
    return new com.arjuna.ats.internal.jta.transaction.arjunacore
        .TransactionSynchronizationRegistryImple();
  }

  private static LockClient client(String uri, String... more) {
    Map<String, String> config = new java.util.HashMap<>(Map.of("holdfast.redis.address", uri,
        "holdfast.watchdog-timeout", "30s"));
    for (int i = 0; i < more.length; i += 2) {
      config.put(more[i], more[i + 1]);
    }
    return LockClient.create(config);
  }

  /** Commits a plain transaction guarded (REDIS) by the calling thread's hold of {@code lock}. */
  private static void commitGuardedBy(DistributedLock lock) throws Exception {
    tm().begin();
    CommitGuardTest.recordOutcome(registry());
    CommitGuard.register(registry(), lock, CommitGuard.Check.REDIS);
    tm().commit();
  }

  /**
   * Every kind and state of a held lock passes the REDIS check: write lock, a read lock taken
   * under the thread's write lock, a braced read lock (its field has a suffix), a fenced lock, a
   * re-entered hold, a hold under a key prefix, and a LockHold (negative owner id). No false
   * rollback, no LockLost.
   */
  @Test
  void everyKindHeld_passesTheRedisCheck_withoutAFalseLoss() throws Exception {
    try (LockClient client = client(redis.server().uri(), "holdfast.key-prefix", "app:")) {
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      var rw = client.getReadWriteLock("catalog");
      rw.writeLock().lock();
      try {
        commitGuardedBy(rw.writeLock());
        rw.readLock().lock(); // a reader under the thread's own writer
        try {
          commitGuardedBy(rw.readLock());
          commitGuardedBy(rw.writeLock());
        } finally {
          rw.readLock().unlock();
        }
      } finally {
        rw.writeLock().unlock();
      }
      var braced = client.getReadWriteLock("{shelf}").readLock();
      braced.lock();
      try {
        commitGuardedBy(braced);
      } finally {
        braced.unlock();
      }
      DistributedLock fenced = client.getFencedLock("fenced");
      fenced.lock();
      try {
        commitGuardedBy(fenced);
      } finally {
        fenced.unlock();
      }
      DistributedLock plain = client.getLock("plain");
      plain.lock();
      plain.lock(); // re-entered
      try {
        commitGuardedBy(plain);
        plain.unlock(); // back to one section
        commitGuardedBy(plain);
      } finally {
        plain.unlock();
      }
      LockHold hold = client.getLock("owned").acquire(Duration.ofSeconds(5), null);
      try {
        tm().begin();
        CommitGuardTest.recordOutcome(registry());
        CommitGuard.register(registry(), hold, CommitGuard.Check.REDIS);
        tm().commit();
      } finally {
        hold.release();
      }
      assertEquals(8, OUTCOMES.size(), "all committed: " + OUTCOMES);
      assertTrue(OUTCOMES.stream().allMatch(s -> s == Status.STATUS_COMMITTED),
          "no false rollback: " + OUTCOMES);
      assertTrue(losses.isEmpty(), "no false loss: " + losses);
    }
  }

  /**
   * Redis unreachable when the REDIS check runs: the transaction rolls back (nothing confirms
   * the hold), but no loss is reported — the hold is still believed and, once Redis is back,
   * still held.
   */
  @Test
  void redisUnreachableDuringTheCheck_rollsBack_withoutReportingALoss() throws Exception {
    try (FaultProxy proxy = new FaultProxy(redis.server().port());
        LockClient client = client(proxy.uri(), "holdfast.redis.timeout", "1s")) {
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      DistributedLock lock = client.getLock("outage");
      lock.lock();
      try {
        tm().begin();
        CommitGuardTest.recordOutcome(registry());
        CommitGuard.register(registry(), lock, CommitGuard.Check.REDIS);
        proxy.blackHole(true);
        RollbackException thrown = assertThrows(RollbackException.class, () -> tm().commit());
        assertNotNull(CommitGuardTest.lockLost(thrown), "says why");
        String message = CommitGuardTest.lockLost(thrown).getMessage();
        assertTrue(message.contains("'outage' could not be confirmed in Redis"), message);
        assertTrue(!message.contains("was lost") && !message.contains("no longer held"),
            "an outage is not called a loss: " + message);
        assertEquals(List.of(Status.STATUS_ROLLEDBACK), OUTCOMES);
        proxy.blackHole(false);
        assertTrue(lock.isHeldByCurrentThread(), "still held once Redis answers");
        assertTrue(losses.isEmpty(), "an outage is no loss: " + losses);
      } finally {
        proxy.blackHole(false);
        lock.unlock();
      }
    }
  }

  /**
   * A LockHold released on another thread while the REDIS check runs: Redis removed the field,
   * the release's reply is still on its way. The check must not call that a loss — the hold
   * was released on purpose, and that release succeeded — so the transaction rolls back (it
   * relied on a hold being released) and nothing is reported lost. (Was: {@code LockLost} GONE,
   * and the successful release then failed with the loss.)
   */
  @Test
  void lockHoldReleasedOnAnotherThread_duringTheCheck_isNoLoss() throws Exception {
    try (FaultProxy proxy = new FaultProxy(redis.server().port());
        LockClient client = client(proxy.uri(), "holdfast.redis.timeout", "20s");
        var admin = redis.server().admin()) {
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      LockHold hold = client.getLock("handed").acquire(Duration.ofSeconds(5), null);
      tm().begin();
      CommitGuardTest.recordOutcome(registry());
      CommitGuard.register(registry(), hold, CommitGuard.Check.REDIS);
      proxy.delay(Duration.ofSeconds(3)); // the release's request and its reply each take 3 s
      CompletableFuture<Void> release = CompletableFuture.runAsync(hold::release);
      Await.until(Duration.ofSeconds(20), () -> !admin.exists("handed"),
          "Redis ran the release");
      proxy.delay(Duration.ZERO); // the check's round trip is quick; the reply is not yet back
      assertTrue(!release.isDone(), "the release's reply is still on its way");
      assertThrows(RollbackException.class, () -> tm().commit());
      release.get(30, TimeUnit.SECONDS); // the release succeeded
      Thread.sleep(300); // a report would be on the event thread by now
      assertTrue(losses.isEmpty(), "a release is no loss: " + losses);
    }
  }

  /**
   * A transaction begun inside a {@code @Locked} call (through the container's
   * TransactionManager) and committed by the caller after the call returned: the lock was lost
   * while the transaction's work ran, so the transaction must roll back, however late. (Was: the
   * guard skipped every ended call, and the transaction committed.)
   */
  @Test
  void transactionBegunInsideLocked_lossDuringTheCall_committedAfterIt_rollsBack()
      throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms")); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Tally tally = cdi.select(Tally.class).get();
      TransactionManager transactions = cdi.select(TransactionManager.class).get();
      assertThrows(IllegalMonitorStateException.class,
          () -> tally.beginOnly(() -> loseAndNotice(client, "tally")),
          "the release reports the loss");
      assertEquals(Status.STATUS_ACTIVE, transactions.getStatus(), "begun inside, still open");
      try {
        assertThrows(RollbackException.class, transactions::commit,
            "work done under a lost lock must not commit");
      } finally {
        if (transactions.getTransaction() != null) {
          transactions.rollback();
        }
      }
      assertEquals(List.of(Status.STATUS_ROLLEDBACK), OUTCOMES);
    }
  }

  /**
   * The other side of the probe above: a transaction begun inside a {@code @Locked} call whose
   * hold was released normally commits after the call, as before.
   */
  @Test
  void transactionBegunInsideLocked_untouchedLock_committedAfterTheCall_commits()
      throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms")); WeldContainer cdi = start()) {
      Tally tally = cdi.select(Tally.class).get();
      TransactionManager transactions = cdi.select(TransactionManager.class).get();
      tally.beginOnly(() -> CommitGuardTest.sleep(300)); // a renewal or so during the call
      assertEquals(Status.STATUS_ACTIVE, transactions.getStatus(), "begun inside, still open");
      transactions.commit();
      assertEquals(List.of(Status.STATUS_COMMITTED), OUTCOMES);
    }
  }

  /** An asynchronous {@code @Locked @Transactional} method with an untouched lock commits. */
  @Test
  void asyncLockedTransactional_untouchedLock_commits() throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms", "holdfast.locked.verify-before-commit", "redis"));
        WeldContainer cdi = start()) {
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      cdi.select(LockClient.class).get().onLockLost(losses::add);
      Tally tally = cdi.select(Tally.class).get();
      for (int i = 0; i < 5; i++) {
        assertEquals("written", tally.asyncWrite(() -> CommitGuardTest.sleep(50))
            .toCompletableFuture().get(30, TimeUnit.SECONDS));
      }
      assertAllCommitted(5, losses);
    }
  }

  /**
   * An asynchronous {@code @Locked} method that is also {@code @Transactional}: its transaction
   * runs while the call's hold is held, so a loss during the transaction stops its commit. (Was:
   * asynchronous calls were on no thread's list of running calls, and it committed.)
   */
  @Test
  void asyncLockedTransactional_lossDuringTheTransaction_rollsBack() throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms")); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Tally tally = cdi.select(Tally.class).get();
      CompletableFuture<String> result = tally.asyncWrite(
          () -> loseAndNotice(client, "tally-async")).toCompletableFuture();
      assertThrows(Exception.class, () -> result.get(30, TimeUnit.SECONDS),
          "the caller learns of the loss");
      assertEquals(List.of(Status.STATUS_ROLLEDBACK), OUTCOMES,
          "the transaction ran under a lost lock");
    }
  }

  /**
   * Contended calls with the REDIS check: most holds are granted by a local handoff (TRANSFER)
   * from the thread before, renewals run during some calls. No false rollback, no false loss.
   */
  @Test
  void contendedCalls_handedOffHolds_passTheRedisCheck() throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms", "holdfast.locked.verify-before-commit", "redis"));
        WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      Tally tally = cdi.select(Tally.class).get();
      int threads = 4;
      int calls = 40;
      var pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
      try {
        List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
        for (int t = 0; t < threads; t++) {
          done.add(pool.submit(() -> {
            for (int i = 0; i < calls; i++) {
              long millis = i % 15 == 0 ? 250 : 2; // some calls span a renewal
              tally.hot(() -> CommitGuardTest.sleep(millis));
            }
            return null;
          }));
        }
        for (var f : done) {
          f.get(120, TimeUnit.SECONDS);
        }
      } finally {
        pool.shutdownNow();
      }
      assertAllCommitted(threads * calls, losses);
    }
  }

  /** {@code transactions} transactions completed, all committed, and nothing was lost. */
  private static void assertAllCommitted(int transactions, List<LockLost> losses) {
    assertEquals(transactions, OUTCOMES.size());
    assertTrue(OUTCOMES.stream().allMatch(s -> s == Status.STATUS_COMMITTED),
        "no false rollback: " + OUTCOMES.stream().filter(s -> s != Status.STATUS_COMMITTED)
            .count());
    assertTrue(losses.isEmpty(), "no false loss: " + losses);
  }

  /** REQUIRES_NEW inside a {@code @Locked} call's transaction gets a guard of its own. */
  @Test
  void requiresNewInsideLocked_isGuardedToo() throws Exception {
    try (TestConfig c = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms")); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Tally tally = cdi.select(Tally.class).get();
      Exception thrown = assertThrows(Exception.class,
          () -> tally.outer(() -> loseAndNotice(client, "tally")));
      assertNotNull(CommitGuardTest.lockLost(thrown), () -> "says why: " + chain(thrown)
          + " " + OUTCOMES);
      // The inner (REQUIRES_NEW) completes first, then the outer: neither commits.
      assertEquals(List.of(Status.STATUS_ROLLEDBACK, Status.STATUS_ROLLEDBACK), OUTCOMES);
    }
  }

  /** Force-unlocks {@code name} elsewhere and waits until this client has noticed. */
  private static void loseAndNotice(LockClient client, String name) {
    java.util.concurrent.CountDownLatch noticed = new java.util.concurrent.CountDownLatch(1);
    try (var registration = client.onLockLost(l -> {
      if (l.lockName().equals(name)) {
        noticed.countDown();
      }
    })) {
      CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), name);
      assertTrue(noticed.await(20, TimeUnit.SECONDS), "a renewal noticed the loss");
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  private static String chain(Throwable t) {
    StringBuilder b = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause()) {
      b.append(c).append(" <- ");
    }
    return b.toString();
  }

  private static WeldContainer start() {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addExtension(new com.arjuna.ats.jta.cdi.TransactionExtension())
        .addBeanClasses(Tally.class).initialize();
  }

  @ApplicationScoped
  public static class Tally {
    @Inject
    TransactionSynchronizationRegistry registry;
    @Inject
    TransactionManager transactions;
    @Inject
    Tally self;

    /** Begins a transaction and leaves it to the caller to complete. */
    @Locked("tally")
    public void beginOnly(Runnable work) throws Exception {
      transactions.begin();
      CommitGuardTest.recordOutcome(registry);
      work.run();
    }

    @Locked("hot")
    @Transactional
    public void hot(Runnable work) {
      CommitGuardTest.recordOutcome(registry);
      work.run();
    }

    @Locked("tally-async")
    @Transactional
    public java.util.concurrent.CompletionStage<String> asyncWrite(Runnable work) {
      CommitGuardTest.recordOutcome(registry);
      work.run();
      return CompletableFuture.completedFuture("written");
    }

    @Locked("tally")
    @Transactional
    public void outer(Runnable work) {
      CommitGuardTest.recordOutcome(registry);
      self.inner(work);
    }

    @Transactional(Transactional.TxType.REQUIRES_NEW)
    public void inner(Runnable work) {
      CommitGuardTest.recordOutcome(registry);
      work.run();
    }
  }
}
