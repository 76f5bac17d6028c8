package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.CommitGuard;
import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.LockLost;
import dev.holdfast.LockLostException;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.transaction.RollbackException;
import jakarta.transaction.Status;
import jakarta.transaction.Synchronization;
import jakarta.transaction.TransactionManager;
import jakarta.transaction.TransactionSynchronizationRegistry;
import jakarta.transaction.Transactional;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The commit guard with a real transaction manager (Narayana and its CDI integration: its
 * {@code @Transactional} interceptors, its {@code TransactionManager} bean) in Weld, against real
 * Redis: a transaction under a lost lock does not commit, and the caller sees why.
 */
class CommitGuardTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** The outcome of each transaction, as a synchronization of the test saw it. */
  static final List<Integer> OUTCOMES = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void narayanaStoresInTarget() {
    System.setProperty("ObjectStoreEnvironmentBean.objectStoreDir", "target/narayana-store");
    System.setProperty("com.arjuna.ats.arjuna.objectstore.objectStoreDir",
        "target/narayana-store");
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
    OUTCOMES.clear();
  }

  private static WeldContainer start() {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addExtension(new com.arjuna.ats.jta.cdi.TransactionExtension())
        .addBeanClasses(Ledger.class, Journal.class).initialize();
  }

  /** With the build-compatible extension as Quarkus runs it (here translated by Weld). */
  private static WeldContainer startBuildCompatible() {
    return WeldInitiator.createWeld()
        .addBuildCompatibleExtensions(PreparedOperationsTest.BuildCompatibleOnly.class)
        .addExtension(new com.arjuna.ats.jta.cdi.TransactionExtension())
        .addBeanClasses(Ledger.class, Journal.class).initialize();
  }

  private static TestConfig config(String watchdog, String... more) {
    return TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", watchdog), more);
  }

  /** Records the transaction's outcome in {@link #OUTCOMES}. */
  static void recordOutcome(TransactionSynchronizationRegistry registry) {
    registry.registerInterposedSynchronization(new Synchronization() {
      @Override
      public void beforeCompletion() {
      }

      @Override
      public void afterCompletion(int status) {
        OUTCOMES.add(status);
      }
    });
  }

  private static void forceUnlockElsewhere(String name) {
    forceUnlockElsewhere(redis.server().uri(), name);
  }

  /** Another process takes the lock away: force-unlocks it through a client of its own. */
  static void forceUnlockElsewhere(String redisUri, String name) {
    try (LockClient other = LockClient.create(Map.of("holdfast.redis.address", redisUri))) {
      assertTrue(other.getLock(name).forceUnlock(), "the lock was there to force-unlock");
    }
  }

  /** Force-unlocks {@code name} elsewhere and waits until this client has noticed. */
  static void loseAndNotice(LockClient client, String name) {
    CountDownLatch noticed = new CountDownLatch(1);
    try (var registration = client.onLockLost(l -> {
      if (l.lockName().equals(name)) {
        noticed.countDown();
      }
    })) {
      forceUnlockElsewhere(name);
      assertTrue(noticed.await(20, TimeUnit.SECONDS), "a renewal noticed the loss");
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** The first {@link LockLostException} in {@code t}'s cause chain (and suppressed ones). */
  static LockLostException lockLost(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof LockLostException lost) {
        return lost;
      }
      for (Throwable s : c.getSuppressed()) {
        if (s instanceof LockLostException lost) {
          return lost;
        }
      }
    }
    return null;
  }

  private static void assertRolledBackNaming(Throwable thrown, String lockName) {
    LockLostException lost = lockLost(thrown);
    assertNotNull(lost, () -> "a LockLostException in the cause chain of " + chain(thrown));
    assertEquals(lockName, lost.lockName());
    assertTrue(lost.getMessage().contains(lockName), lost.getMessage());
    boolean commitFailed = false;
    for (Throwable c = thrown; c != null; c = c.getCause()) {
      commitFailed |= c instanceof RollbackException;
    }
    assertTrue(commitFailed, () -> "the commit failed with a RollbackException: " + chain(thrown));
    assertEquals(List.of(Status.STATUS_ROLLEDBACK), OUTCOMES, "rolled back");
  }

  private static String chain(Throwable t) {
    StringBuilder b = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause()) {
      b.append(c).append(" <- ");
    }
    return b.toString();
  }

  @Test
  void lockedTransactional_lossNoticedByRenewal_rollsBackAndSaysWhy() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Ledger ledger = cdi.select(Ledger.class).get();
      Exception thrown = assertThrows(Exception.class,
          () -> ledger.post(() -> loseAndNotice(client, "ledger")));
      assertRolledBackNaming(thrown, "ledger");
      assertTrue(lockLost(thrown).getMessage().contains("renewal")
          || lockLost(thrown).getMessage().contains("force"), lockLost(thrown).getMessage());
    }
  }

  @Test
  void buildCompatibleExtension_registersTheGuardToo() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = startBuildCompatible()) {
      LockClient client = cdi.select(LockClient.class).get();
      Exception thrown = assertThrows(Exception.class,
          () -> cdi.select(Ledger.class).get().post(() -> loseAndNotice(client, "ledger")));
      assertRolledBackNaming(thrown, "ledger");
    }
  }

  @Test
  void lockedTransactional_untouchedLock_commits() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      cdi.select(Ledger.class).get().post(() -> { });
      assertEquals(List.of(Status.STATUS_COMMITTED), OUTCOMES);
    }
  }

  @Test
  void verifyInRedis_lossNotYetNoticed_rollsBackAndReportsTheLossOnce() throws Exception {
    try (TestConfig c = config("30s", "holdfast.locked.verify-before-commit", "redis");
        WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      Exception thrown = assertThrows(Exception.class,
          () -> cdi.select(Ledger.class).get().post(() -> forceUnlockElsewhere("ledger")));
      assertRolledBackNaming(thrown, "ledger");
      dev.holdfast.testing.Await.until(Duration.ofSeconds(5), () -> !losses.isEmpty(),
          "the loss the check found is reported");
      Thread.sleep(200); // a second report would come from the same event thread by now
      assertEquals(1, losses.size(), "reported once: " + losses);
    }
  }

  @Test
  void verifyLocally_lossNotYetNoticed_commits_theWindowFencingCloses() throws Exception {
    try (TestConfig c = config("30s"); WeldContainer cdi = start()) {
      Exception thrown = assertThrows(Exception.class,
          () -> cdi.select(Ledger.class).get().post(() -> forceUnlockElsewhere("ledger")));
      // The local check cannot know: the transaction commits, and only the release finds out.
      assertEquals(List.of(Status.STATUS_COMMITTED), OUTCOMES);
      assertInstanceOf(IllegalMonitorStateException.class, thrown, chain(thrown));
    }
  }

  @Test
  void transactionalCalledFromLocked_isGuarded() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Exception thrown = assertThrows(Exception.class,
          () -> cdi.select(Journal.class).get().record(() -> loseAndNotice(client, "journal")));
      assertRolledBackNaming(thrown, "journal");
    }
  }

  @Test
  void nestedLockedCalls_aLostOuterLock_rollsBackTheInnerTransaction() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Exception thrown = assertThrows(Exception.class, () -> cdi.select(Journal.class).get()
          .aroundLedger(() -> loseAndNotice(client, "journal-outer")));
      assertRolledBackNaming(thrown, "journal-outer");
    }
  }

  @Test
  void transactionBegunInsideLocked_throughTheContainersTransactionManager_isGuarded()
      throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Journal journal = cdi.select(Journal.class).get();
      RollbackException thrown = assertThrows(RollbackException.class,
          () -> journal.ownTransaction(() -> loseAndNotice(client, "journal")));
      assertRolledBackNaming(thrown, "journal");
    }
  }

  @Test
  void transactionBegunWithoutTheEvent_isGuardedByCommitGuardRegister() throws Exception {
    try (TestConfig c = config("600ms"); WeldContainer cdi = start()) {
      LockClient client = cdi.select(LockClient.class).get();
      Journal journal = cdi.select(Journal.class).get();
      // Narayana's own TransactionManager, not the CDI bean: no event, so only the explicit
      // registration guards it.
      RollbackException thrown = assertThrows(RollbackException.class,
          () -> journal.plainTransaction(() -> loseAndNotice(client, "journal")));
      assertRolledBackNaming(thrown, "journal");
    }
  }

  @Test
  void manyCalls_withRenewalsDuringThem_neverRollBack() throws Exception {
    try (TestConfig c = config("600ms", "holdfast.\"" + Ledger.class.getName()
        + "/postVerified\".locked.verify-before-commit", "redis"); WeldContainer cdi = start()) {
      Ledger ledger = cdi.select(Ledger.class).get();
      int calls = 200;
      for (int i = 0; i < calls; i++) {
        long millis = i % 20 == 0 ? 250 : 3; // some calls span a renewal
        Runnable work = () -> sleep(millis);
        if (i % 2 == 0) {
          ledger.post(work);
        } else {
          ledger.postVerified(work);
        }
      }
      assertEquals(calls, OUTCOMES.size());
      assertTrue(OUTCOMES.stream().allMatch(s -> s == Status.STATUS_COMMITTED),
          "no false rollback: " + OUTCOMES.stream().filter(s -> s != Status.STATUS_COMMITTED)
              .count());
    }
  }

  @Test
  void programmatic_lockHoldWithExplicitRegistry_guardsAPlainTransaction() throws Exception {
    TransactionManager tm = plainTransactionManager();
    TransactionSynchronizationRegistry registry = plainRegistry();
    try (LockClient client = plainClient()) {
      LockHold hold = client.getLock("books").acquire(Duration.ofSeconds(5), null);
      try {
        tm.begin();
        recordOutcome(registry);
        CommitGuard.register(registry, hold, CommitGuard.Check.REDIS);
        forceUnlockElsewhere("books");
        RollbackException thrown = assertThrows(RollbackException.class, tm::commit);
        assertRolledBackNaming(thrown, "books");
      } finally {
        assertThrows(IllegalMonitorStateException.class, hold::release);
      }
      OUTCOMES.clear();
      // Already lost: refused at once, and the transaction can only roll back.
      tm.begin();
      recordOutcome(registry);
      assertThrows(LockLostException.class,
          () -> CommitGuard.register(registry, hold, CommitGuard.Check.LOCAL));
      assertEquals(Status.STATUS_MARKED_ROLLBACK, tm.getStatus());
      tm.rollback();
      // A thread's hold of a lock, untouched: commits.
      OUTCOMES.clear();
      DistributedLock lock = client.getLock("shelves");
      lock.lock();
      try {
        tm.begin();
        recordOutcome(registry);
        CommitGuard.register(registry, lock, CommitGuard.Check.REDIS);
        tm.commit();
        assertEquals(List.of(Status.STATUS_COMMITTED), OUTCOMES);
      } finally {
        lock.unlock();
      }
      assertThrows(IllegalStateException.class,
          () -> CommitGuard.register(registry, lock, CommitGuard.Check.LOCAL),
          "no transaction");
    }
  }

  @Test
  void programmatic_multiLock_needsEveryMember() throws Exception {
    TransactionManager tm = plainTransactionManager();
    TransactionSynchronizationRegistry registry = plainRegistry();
    try (LockClient client = plainClient()) {
      DistributedLock both = client.getMultiLock(client.getLock("left"), client.getLock("right"));
      both.lock();
      try {
        tm.begin();
        recordOutcome(registry);
        CommitGuard.register(registry, both, CommitGuard.Check.REDIS);
        forceUnlockElsewhere("right");
        RollbackException thrown = assertThrows(RollbackException.class, tm::commit);
        LockLostException lost = lockLost(thrown);
        assertNotNull(lost, chain(thrown));
        assertEquals(both.getName(), lost.lockName());
        assertTrue(lost.getMessage().contains("'right'"), lost.getMessage());
        assertEquals(List.of(Status.STATUS_ROLLEDBACK), OUTCOMES);
      } finally {
        assertThrows(IllegalMonitorStateException.class, both::unlock);
      }
    }
  }

  @Test
  void programmatic_readLockAndFairLock_verifiedInRedis() throws Exception {
    TransactionManager tm = plainTransactionManager();
    TransactionSynchronizationRegistry registry = plainRegistry();
    try (LockClient client = plainClient()) {
      for (DistributedLock lock : List.of(client.getReadWriteLock("catalog").readLock(),
          client.getFairLock("queue"))) {
        OUTCOMES.clear();
        lock.lock();
        try {
          tm.begin();
          recordOutcome(registry);
          CommitGuard.register(registry, lock, CommitGuard.Check.REDIS);
          tm.commit(); // held: the check finds the reader's (or fair holder's) entry
          tm.begin();
          recordOutcome(registry);
          CommitGuard.register(registry, lock, CommitGuard.Check.REDIS);
          forceUnlockElsewhere(lock.getName());
          RollbackException thrown = assertThrows(RollbackException.class, tm::commit);
          assertNotNull(lockLost(thrown), chain(thrown));
          assertEquals(List.of(Status.STATUS_COMMITTED, Status.STATUS_ROLLEDBACK), OUTCOMES,
              lock.getName());
        } finally {
          assertThrows(IllegalMonitorStateException.class, lock::unlock);
        }
      }
    }
  }

  /** Narayana without a container, as plain Java uses it. */
  private static TransactionManager plainTransactionManager() {
    return com.arjuna.ats.jta.TransactionManager.transactionManager();
  }

  private static TransactionSynchronizationRegistry plainRegistry() {
    return new com.arjuna.ats.internal.jta.transaction.arjunacore
        .TransactionSynchronizationRegistryImple();
  }

  /** A client whose watchdog notices nothing during a test. */
  private static LockClient plainClient() {
    return LockClient.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "30s"));
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @ApplicationScoped
  public static class Ledger {
    @Inject
    TransactionSynchronizationRegistry registry;

    @Locked("ledger")
    @Transactional
    public void post(Runnable work) {
      recordOutcome(registry);
      work.run();
    }

    @Locked("ledger-verified")
    @Transactional
    public void postVerified(Runnable work) {
      recordOutcome(registry);
      work.run();
    }
  }

  @ApplicationScoped
  public static class Journal {
    @Inject
    TransactionSynchronizationRegistry registry;
    @Inject
    TransactionManager transactions;
    @Inject
    LockClient client;
    @Inject
    Journal self;
    @Inject
    Ledger ledger;

    @Locked("journal-outer")
    public void aroundLedger(Runnable work) {
      ledger.post(work);
    }

    @Locked("journal")
    public void record(Runnable work) {
      self.write(work);
    }

    @Transactional
    public void write(Runnable work) {
      recordOutcome(registry);
      work.run();
    }

    @Locked("journal")
    public void ownTransaction(Runnable work) throws Exception {
      transactions.begin();
      recordOutcome(registry);
      work.run();
      transactions.commit();
    }

    @Locked("journal")
    public void plainTransaction(Runnable work) throws Exception {
      TransactionManager plain = com.arjuna.ats.jta.TransactionManager.transactionManager();
      plain.begin();
      recordOutcome(registry);
      CommitGuard.register(client.getLock("journal"), CommitGuard.Check.LOCAL);
      work.run();
      plain.commit();
    }
  }
}
