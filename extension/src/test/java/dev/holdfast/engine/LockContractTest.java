package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The contract every lock kind keeps, on every topology: one set of cases, run for each
 * {@link Kind} by {@code StandaloneLockContractTest}, {@code SentinelLockContractTest} and
 * {@code ClusterLockContractTest}. A kind whose factory throws
 * {@link UnsupportedOperationException} (not implemented yet) is skipped, not failed.
 *
 * <p>Each case uses two clients: {@code client} (the one under test) and {@code other} (another
 * process, as far as the locks can tell).
 */
abstract class LockContractTest {

  /** The lock kinds, each with how to get one and what keeps it from being acquired. */
  enum Kind {
    EXCLUSIVE(LockClient::getLock),
    FAIR(LockClient::getFairLock),
    READ((c, n) -> c.getReadWriteLock(n).readLock(),
        (c, n) -> c.getReadWriteLock(n).writeLock(), List::of),
    WRITE((c, n) -> c.getReadWriteLock(n).writeLock()),
    /**
     * Two members on different keys (different slots in a cluster); its conflicting holder holds
     * only the second, so a failing acquisition must give the first back.
     */
    MULTI((c, n) -> c.getMultiLock(c.getLock(n + ":1"), c.getLock(n + ":2")),
        (c, n) -> c.getLock(n + ":2"), n -> List.of(n + ":1", n + ":2"));

    private final BiFunction<LockClient, String, DistributedLock> factory;
    private final BiFunction<LockClient, String, DistributedLock> conflicting;
    private final Function<String, List<String>> keys;

    Kind(BiFunction<LockClient, String, DistributedLock> factory) {
      this(factory, factory, List::of);
    }

    Kind(BiFunction<LockClient, String, DistributedLock> factory,
        BiFunction<LockClient, String, DistributedLock> conflicting,
        Function<String, List<String>> keys) {
      this.factory = factory;
      this.conflicting = conflicting;
      this.keys = keys;
    }

    /** The lock of this kind called {@code name}; skips the test if the kind is not there yet. */
    DistributedLock lock(LockClient client, String name) {
      return orSkip(() -> factory.apply(client, name));
    }

    /** A lock whose holder (in another client) keeps this kind's lock {@code name} from us. */
    DistributedLock conflicting(LockClient client, String name) {
      return orSkip(() -> conflicting.apply(client, name));
    }

    /** The Redis keys (without prefix) that hold this kind's lock {@code name}. */
    List<String> keys(String name) {
      return keys.apply(name);
    }

    private DistributedLock orSkip(java.util.function.Supplier<DistributedLock> factory) {
      try {
        return factory.get();
      } catch (UnsupportedOperationException e) {
        Assumptions.abort(name() + " locks are not implemented yet: " + e.getMessage());
        throw e; // not reached
      }
    }
  }

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  LockClient client;
  LockClient other;

  /** The topology's {@code holdfast.*} configuration. */
  abstract Map<String, String> config();

  /** Empties every master. */
  abstract void flushAll();

  /** Deletes {@code key} behind the clients' backs, as a Redis that lost it would. */
  abstract void deleteKey(String key);

  @BeforeEach
  void setUp() {
    flushAll();
    client = clients.create(config());
    other = clients.create(config());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private <T> T inOtherThread(Callable<T> task) throws Exception {
    return threads.submit(task).get(10, TimeUnit.SECONDS);
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void lock_thenUnlock_holdsAndFrees(Kind kind) {
    DistributedLock lock = kind.lock(client, "plain");
    assertFalse(lock.isLocked());
    lock.lock();
    assertTrue(lock.isLocked());
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(1, lock.getHoldCount());
    lock.unlock();
    assertFalse(lock.isLocked());
    assertFalse(lock.isHeldByCurrentThread());
    assertTrue(Clients.engine(client).holds().isEmpty(), "no hold left behind");
    DistributedLock theirs = kind.lock(other, "plain");
    assertTrue(theirs.tryLock(), "free for another client");
    theirs.unlock();
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void reentrantLock_countsHolds_andReleasesOnLastUnlock(Kind kind) {
    DistributedLock lock = kind.lock(client, "reentrant");
    lock.lock();
    lock.lock(10, TimeUnit.SECONDS);
    assertTrue(lock.tryLock());
    assertEquals(3, lock.getHoldCount());
    lock.unlock();
    assertEquals(2, lock.getHoldCount());
    lock.unlock();
    assertTrue(lock.isLocked());
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertEquals(0, lock.getHoldCount());
    assertFalse(lock.isLocked());
    assertTrue(Clients.engine(client).holds().isEmpty(), "no hold left behind");
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void unlock_byNonOwnerThread_throwsAndKeepsLock(Kind kind) throws Exception {
    DistributedLock lock = kind.lock(client, "owned");
    lock.lock();
    Throwable thrown = inOtherThread(() -> {
      try {
        lock.unlock();
        return null;
      } catch (RuntimeException e) {
        return e;
      }
    });
    assertInstanceOf(IllegalMonitorStateException.class, thrown);
    assertTrue(lock.isHeldByCurrentThread(), "still held by its owner");
    assertEquals(1, lock.getHoldCount());
    assertThrows(IllegalMonitorStateException.class, kind.lock(other, "owned")::unlock,
        "nor may another client unlock it");
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void tryLock_whileAnotherClientHolds_failsAndHoldsNothing(Kind kind) throws Exception {
    DistributedLock holder = kind.conflicting(other, "busy");
    holder.lock();
    DistributedLock lock = kind.lock(client, "busy");
    assertFalse(lock.tryLock());
    long start = System.nanoTime();
    assertFalse(lock.tryLock(300, TimeUnit.MILLISECONDS));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(waited >= 290 && waited < 5_000, "waited " + waited + "ms");
    assertFalse(lock.tryLock(100, 1_000, TimeUnit.MILLISECONDS));
    assertFalse(lock.isHeldByCurrentThread());
    assertEquals(0, lock.getHoldCount());
    holder.unlock();
    assertFalse(lock.isLocked(), "the failed attempts left nothing held");
    Await.until(Duration.ofSeconds(5), () -> Clients.engine(client).waitedChannels().isEmpty(),
        "no subscription left behind");
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void waiter_isWokenByUnlock_notByTheLease(Kind kind) throws Exception {
    DistributedLock holder = kind.conflicting(other, "handoff");
    holder.lock(); // watchdog lease of 30 s: only the unlock message wakes the waiter early
    DistributedLock lock = kind.lock(client, "handoff");
    Future<Long> waiter = Waiters.acquireAndRelease(threads, lock);
    Await.until(Duration.ofSeconds(5),
        () -> !Clients.engine(client).waitedChannels().isEmpty(), "waiter subscribed");
    long releasedAt = System.nanoTime();
    holder.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, releasedAt);
    assertTrue(latency < 2_000, "woken by the unlock, not the 30 s lease: " + latency + "ms");
    assertFalse(lock.isLocked(), "the waiter released it");
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void lease_expires_andFreesTheLock(Kind kind) throws Exception {
    DistributedLock lock = kind.lock(client, "leased");
    assertTrue(lock.tryLock(0, 500, TimeUnit.MILLISECONDS));
    long ttl = lock.remainTimeToLive();
    assertTrue(ttl > 0 && ttl <= 500, "ttl " + ttl);
    Await.until(Duration.ofSeconds(5), () -> !lock.isLocked(), "lease expiry");
    assertTrue(kind.lock(other, "leased").tryLock(), "another client takes it");
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost") || e.getMessage().contains("not held"),
        e.getMessage());
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void watchdog_keepsTheLockPastItsTimeout(Kind kind) {
    LockClient fast = clients.create(config(), "holdfast.watchdog-timeout", "1s");
    DistributedLock lock = kind.lock(fast, "kept");
    lock.lock();
    long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1_800);
    Await.until(Duration.ofSeconds(10), () -> {
      long ttl = lock.remainTimeToLive();
      assertTrue(ttl > 0, "held past the timeout, ttl " + ttl);
      return System.nanoTime() - until > 0;
    }, "1.8 watchdog timeouts");
    assertTrue(lock.isHeldByCurrentThread());
    assertFalse(kind.conflicting(other, "kept").tryLock(), "still excludes others");
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void forceUnlock_freesTheLock_whoeverHoldsIt(Kind kind) {
    kind.lock(other, "stuck").lock();
    DistributedLock lock = kind.lock(client, "stuck");
    assertTrue(lock.isLocked());
    assertFalse(lock.isHeldByCurrentThread());
    assertTrue(lock.forceUnlock());
    assertFalse(lock.isLocked());
    assertFalse(lock.forceUnlock(), "nothing left to delete");
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void queries_reportState(Kind kind) throws Exception {
    DistributedLock lock = kind.lock(client, "observed");
    assertFalse(lock.isLocked());
    assertFalse(lock.isHeldByCurrentThread());
    assertEquals(-2, lock.remainTimeToLive());
    lock.lock(5, TimeUnit.SECONDS);
    long me = Thread.currentThread().getId();
    assertTrue(lock.isLocked());
    assertTrue(lock.isHeldByCurrentThread());
    assertTrue(lock.isHeldByThread(me));
    assertFalse(lock.isHeldByThread(me + 1_000_000));
    assertFalse(inOtherThread(lock::isHeldByCurrentThread));
    assertEquals(0, (int) inOtherThread(lock::getHoldCount));
    long ttl = lock.remainTimeToLive();
    assertTrue(ttl > 3_000 && ttl <= 5_000, "ttl " + ttl);
    assertTrue(lock.getName().contains("observed"), lock.getName());
    assertThrows(UnsupportedOperationException.class, lock::newCondition);
    lock.unlock();
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void lostLock_isReported_andUnlockSaysLost(Kind kind) {
    LockClient fast = clients.create(config(), "holdfast.watchdog-timeout", "1s");
    List<LockLost> lost = new CopyOnWriteArrayList<>();
    fast.onLockLost(lost::add);
    DistributedLock lock = kind.lock(fast, "fragile");
    lock.lock();
    kind.keys("fragile").forEach(this::deleteKey); // as if Redis lost it
    Await.until(Duration.ofSeconds(5), () -> lost.size() == kind.keys("fragile").size(),
        "LockLost reported for each key");
    for (LockLost event : lost) {
      assertTrue(kind.keys("fragile").contains(event.lockName()), event.lockName());
      assertEquals(Thread.currentThread().getId(), event.threadId());
    }
    assertFalse(lock.isHeldByCurrentThread());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    lock.lock(); // usable again
    lock.unlock();
    assertFalse(lock.isLocked());
  }
}
