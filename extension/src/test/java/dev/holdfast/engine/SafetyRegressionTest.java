package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * Issue 7 (engine part), holds and losses: every loss is noticed, reported exactly once and never
 * hidden by a re-entry; listeners never hold up renewals; waiters are woken when they must be.
 * Each test names the item it reproduces. Lease rules are in {@link SafetyLeaseRulesTest}, lost
 * replies and outages in {@link SafetyUncertaintyTest}.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SafetyRegressionTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private RedisProbe redisState;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of(LockClientConfig.ADDRESS, redis.server().uri());
    redisState = new RedisProbe(redis.server());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  // Item 3: LockLost listeners run off the renewal thread: one blocking for 3 s on the loss of A
  // (watchdog 900 ms) must not let the healthy lock B expire.
  @Test
  void blockingLossListener_neverStopsRenewalOfOtherHolds() throws Exception {
    LockClient holder = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "900ms");
    CountDownLatch heard = new CountDownLatch(1);
    CountDownLatch unblock = new CountDownLatch(1);
    holder.onLockLost(event -> {
      heard.countDown();
      try {
        unblock.await(3, SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    DistributedLock a = holder.getLock("a");
    DistributedLock b = holder.getLock("b");
    a.lock();
    b.lock();
    LockClient other = clients.create(config);
    try {
      assertTrue(other.getLock("a").forceUnlock());
      assertTrue(heard.await(3, SECONDS), "the loss of a is reported");
      assertFalse(other.getLock("b").tryLock(2_500, MILLISECONDS),
          "b stays renewed while a listener blocks");
      assertEquals("1", redisState.hget("b", RedisProbe.fieldOf(holder)), "b's hold count");
    } finally {
      unblock.countDown();
    }
    b.unlock();
    assertFalse(redisState.exists("b"));
    assertThrows(IllegalMonitorStateException.class, a::unlock);
  }

  // Item 4: a re-entry after a loss (forceUnlock by another client) is refused and reports the
  // loss; nothing is created in Redis, and the outer unlock says "lost".
  @Test
  void reentry_afterForceUnlock_reportsLossAndNeverStartsNewHold() throws Exception {
    // A long watchdog period: the re-entry, not a renewal, is the first to meet the loss.
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "10s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("seized");
    lock.lock();
    assertTrue(clients.create(config).getLock("seized").forceUnlock());

    LockException refused = assertThrows(LockException.class, lock::lock, "re-entry after a loss");
    assertTrue(refused.getMessage().contains("lost"), refused.getMessage());
    assertFalse(redisState.exists("seized"), "the refused re-entry created nothing in Redis");
    LossRecorder.Report report = lost.awaitFirst(Duration.ofSeconds(2), "re-entry found it gone");
    assertEquals("seized", report.event().lockName());
    assertEquals(Thread.currentThread().getId(), report.event().threadId());
    assertFalse(lock.isHeldByCurrentThread());
    assertEquals(0, lock.getHoldCount());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    SafetyLeaseRulesTest.assertReportedOnce(lost);

    lock.lock(); // every lost section closed: the thread acquires afresh
    assertEquals("1", redisState.hget("seized", RedisProbe.fieldOf(client)));
    lock.unlock();
    assertFalse(redisState.exists("seized"));
  }

  // Item 8 (white-box): a waiter joining a channel while its last waiter leaves must end up with a
  // confirmed subscription, else it polls every 100 ms. The test holds the subscriber
  // connection's write lock so that leave() and join() both finish their registry part before
  // either updates the connection, the interleaving that 0.1 gets wrong.
  @Test
  void join_whileLastWaiterLeaves_getsConfirmedSubscription() throws Exception {
    LockClient client = clients.create(config);
    LockEngine engine = Clients.engine(client);
    Object subscriptions = Internals.call(engine, "subscriptions");
    String channel = "redisson_lock__channel:{race}";
    LockNames names = LockNames.of("", "race");
    Object first = Internals.call(subscriptions, "join", names, channel, false, "f:1", 30_000L);
    Await.until(Duration.ofSeconds(5), () -> Internals.isTrue(first, "subscribed"),
        "first waiter subscribed");
    Map<?, ?> connections = (Map<?, ?>) Internals.field(subscriptions, "connections");
    assertEquals(1, connections.size(), "one subscriber connection");
    ReentrantLock writes =
        (ReentrantLock) Internals.field(connections.values().iterator().next(), "writeLock");

    AtomicReference<Object> second = new AtomicReference<>();
    Thread leaving = new Thread(() -> Internals.call(subscriptions, "leave", first, false));
    Thread joining = new Thread(() -> second.set(Internals.call(subscriptions, "join", names,
        channel, false, "f:2", 30_000L)));
    writes.lock();
    try {
      leaving.start(); // done with the registry, then waits to update the connection
      awaitBlockedOnOrDone(writes, leaving);
      joining.start(); // registers a new entry, then waits to update the connection
      awaitBlockedOnOrDone(writes, joining);
    } finally {
      writes.unlock();
    }
    leaving.join(5_000);
    joining.join(5_000);
    Object entry = second.get();
    assertNotNull(entry, "join returned");
    Await.until(Duration.ofSeconds(2), () -> Internals.isTrue(entry, "subscribed"),
        "the joining waiter's subscription is confirmed (else it polls every 100 ms)");
    assertEquals(1, redisState.subscribers(channel));

    Internals.call(subscriptions, "leave", entry, false);
    Await.until(Duration.ofSeconds(2), () -> redisState.subscribers(channel) == 0
        && engine.waitedChannels().isEmpty(), "no subscription left behind");
  }

  /**
   * Waits (up to 1 s) until {@code thread} queues for {@code lock} or ends. An engine that no
   * longer takes that lock there simply makes the interleaving its own business.
   */
  private static void awaitBlockedOnOrDone(ReentrantLock lock, Thread thread)
      throws InterruptedException {
    long end = System.nanoTime() + SECONDS.toNanos(1);
    while (!lock.hasQueuedThread(thread) && thread.isAlive() && System.nanoTime() < end) {
      Thread.sleep(1);
    }
  }

  // Item 9: close() wakes every parked waiter promptly (IllegalStateException), however long the
  // holder's lease. Unlock messages published meanwhile keep waiters moving between polls and
  // parks, the moments at which a wake-up counted from the semaphore queue can miss one.
  @Test
  void close_wakesEveryParkedWaiterPromptly() throws Exception {
    clients.create(config).getLock("closing").lock(60, SECONDS);
    LockClient waiting = clients.create(config);
    String channel = "redisson_lock__channel:{closing}";
    List<Future<?>> waiters = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      waiters.add(threads.submit(() -> {
        waiting.getLock("closing").lock();
        return null;
      }));
    }
    Await.until(Duration.ofSeconds(5), () -> redisState.subscribers(channel) == 1,
        "waiters subscribed");
    Thread.sleep(300); // let every waiter park
    AtomicBoolean churning = new AtomicBoolean(true);
    Future<?> churn = threads.submit(() -> {
      try (Jedis jedis = redis.server().admin()) {
        while (churning.get()) {
          jedis.publish(channel, "0");
        }
      }
      return null;
    });
    try {
      Thread.sleep(200);
      waiting.close();
      long deadline = System.nanoTime() + SECONDS.toNanos(2);
      for (Future<?> waiter : waiters) {
        try {
          waiter.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
          fail("a waiter acquired a lock held by another client");
        } catch (TimeoutException e) {
          fail("a waiter was still parked 2 s after close()");
        } catch (ExecutionException e) {
          assertTrue(e.getCause() instanceof IllegalStateException, String.valueOf(e.getCause()));
        }
      }
    } finally {
      churning.set(false);
    }
    churn.get(5, SECONDS);
  }

  // Item 13a: a release racing renewals is never reported as a loss (watchdog 400 ms, renewals
  // every ~133 ms, three threads locking and unlocking as fast as they can).
  @Test
  void unlock_racingRenewals_neverReportsFalseLoss() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "400ms");
    LossRecorder lost = LossRecorder.on(client);
    long end = System.nanoTime() + SECONDS.toNanos(2);
    List<Future<Integer>> loops = new ArrayList<>();
    for (int t = 0; t < 3; t++) {
      DistributedLock lock = client.getLock("churn-" + t);
      loops.add(threads.submit(() -> {
        int cycles = 0;
        while (System.nanoTime() < end) {
          lock.lock();
          lock.lock();
          lock.unlock();
          lock.unlock();
          cycles++;
        }
        return cycles;
      }));
    }
    int cycles = 0;
    for (Future<Integer> loop : loops) {
      cycles += loop.get(10, SECONDS);
    }
    assertEquals(0, lost.count(), "false losses in " + cycles + " cycles: " + lost);
    assertTrue(Clients.engine(client).holds().isEmpty(), "no hold left behind");
  }

  // Item 13b: a lost watchdog hold says "lost" on every open section's unlock, then leaves the
  // registry, and the thread can acquire afresh.
  @Test
  void lostWatchdogHold_everyOpenSectionSaysLost_thenLeavesTheRegistry() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "600ms");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("vanishing");
    lock.lock();
    lock.lock();
    assertTrue(clients.create(config).getLock("vanishing").forceUnlock());
    lost.awaitFirst(Duration.ofSeconds(3), "renewal found it gone");
    for (int section = 2; section >= 1; section--) {
      IllegalMonitorStateException e =
          assertThrows(IllegalMonitorStateException.class, lock::unlock, "section " + section);
      assertTrue(e.getMessage().contains("lost"), "section " + section + ": " + e.getMessage());
    }
    LockEngine engine = Clients.engine(client);
    assertTrue(engine.holds().isEmpty(), "the lost hold left the registry: " + engine.holds());
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "no section left");

    lock.lock();
    lock.unlock();
    assertTrue(engine.holds().isEmpty());
    assertFalse(redisState.exists("vanishing"));
    assertEquals(1, lost.count(), lost.toString());
  }

  // Every loss is reported exactly once: later renewals, queries and unlocks do not repeat it.
  @Test
  void loss_isReportedExactlyOnce() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "600ms");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("once");
    lock.lock();
    assertTrue(clients.create(config).getLock("once").forceUnlock());
    lost.awaitFirst(Duration.ofSeconds(3), "renewal found it gone");
    Thread.sleep(1_000); // five renewal periods
    assertFalse(lock.isHeldByCurrentThread());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    SafetyLeaseRulesTest.assertReportedOnce(lost);
  }

  // Unlock by a non-owner (another thread, another client) still throws IMSE and leaves the
  // owner's mixed sections, count and lease alone.
  @Test
  void unlock_byNonOwner_throwsAndLeavesTheOwnersSectionsAlone() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("owned");
    lock.lock();
    lock.lock(5, SECONDS);
    Future<?> otherThread = threads.submit(() -> lock.unlock());
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> otherThread.get(5, SECONDS));
    assertTrue(e.getCause() instanceof IllegalMonitorStateException, String.valueOf(e.getCause()));
    DistributedLock otherClient = clients.create(config).getLock("owned");
    assertThrows(IllegalMonitorStateException.class, otherClient::unlock);

    assertEquals("2", redisState.hget("owned", RedisProbe.fieldOf(client)));
    long pttl = redisState.pttl("owned");
    assertTrue(pttl > 4_000, "the inner 5 s lease is intact, PTTL " + pttl);
    lock.unlock();
    lock.unlock();
    assertFalse(redisState.exists("owned"));
    assertEquals(0, lost.count(), lost.toString());
  }

  /**
   * Reflection on engine internals for the white-box test, so that an engine rewrite breaks that
   * one test (with a clear message) rather than the compilation of all of them.
   */
  private static final class Internals {
    private Internals() {
    }

    static Object call(Object target, String name, Object... args) {
      for (Method m : target.getClass().getDeclaredMethods()) {
        if (m.getName().equals(name) && m.getParameterCount() == args.length) {
          try {
            m.setAccessible(true);
            return m.invoke(target, args);
          } catch (InvocationTargetException e) {
            if (e.getCause() instanceof RuntimeException r) {
              throw r;
            }
            throw new AssertionError(e.getCause());
          } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
          }
        }
      }
      throw new AssertionError("engine internals changed: no " + target.getClass().getSimpleName()
          + "." + name + " with " + args.length + " parameters; update this white-box test");
    }

    static boolean isTrue(Object target, String name) {
      return (Boolean) call(target, name);
    }

    static Object field(Object target, String name) {
      try {
        Field f = target.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(target);
      } catch (ReflectiveOperationException e) {
        throw new AssertionError("engine internals changed: no " + target.getClass()
            .getSimpleName() + "." + name + "; update this white-box test", e);
      }
    }
  }
}
