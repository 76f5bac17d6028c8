package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.ExclusionProbe;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * The exclusive lock against one real redis-server: its Redis layout, messages, clients and
 * contention. The contract every lock kind keeps is in {@link LockContractTest}.
 */
class StandaloneLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private LockClient client;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri());
    client = clients.create(config);
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private <T> T inOtherThread(java.util.concurrent.Callable<T> task) throws Exception {
    return threads.submit(task).get(10, TimeUnit.SECONDS);
  }

  private Jedis admin() {
    return redis.server().admin();
  }

  @Test
  void lock_storesRedissonLayout_andUnlockDeletesKey() {
    DistributedLock lock = client.getLock("orders");
    lock.lock();
    try (Jedis jedis = admin()) {
      assertEquals("hash", jedis.type("orders"));
      String field = client.getClientId() + ":" + Thread.currentThread().getId();
      assertEquals(Map.of(field, "1"), jedis.hgetAll("orders"));
      long pttl = jedis.pttl("orders");
      assertTrue(pttl > 25_000 && pttl <= 30_000, "watchdog lease, was " + pttl);
    }
    lock.unlock();
    try (Jedis jedis = admin()) {
      assertFalse(jedis.exists("orders"));
    }
  }

  @Test
  void unlock_byNonOwnerThread_throwsAndKeepsLock() throws Exception {
    DistributedLock lock = client.getLock("owned");
    lock.lock();
    IllegalMonitorStateException e = inOtherThread(() -> {
      try {
        lock.unlock();
        return null;
      } catch (IllegalMonitorStateException expected) {
        return expected;
      }
    });
    assertTrue(e != null && e.getMessage().contains("is not held by"), String.valueOf(e));
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(1, lock.getHoldCount());
    lock.unlock();
  }

  @Test
  void unlock_byOtherClient_throwsAndKeepsLock() {
    client.getLock("owned").lock();
    DistributedLock other = clients.create(config).getLock("owned");
    assertThrows(IllegalMonitorStateException.class, other::unlock);
    assertTrue(other.isLocked());
    assertFalse(other.isHeldByCurrentThread());
  }

  @Test
  void unlock_neverHeld_throws() {
    IllegalMonitorStateException e =
        assertThrows(IllegalMonitorStateException.class, () -> client.getLock("free").unlock());
    assertTrue(e.getMessage().contains("'free' is not held"), e.getMessage());
  }

  @Test
  void explicitLease_expiresWithoutWatchdog() throws Exception {
    DistributedLock lock = client.getLock("leased");
    assertTrue(lock.tryLock(0, 500, TimeUnit.MILLISECONDS));
    long ttl = lock.remainTimeToLive();
    assertTrue(ttl > 0 && ttl <= 500, "ttl " + ttl);
    Await.until(Duration.ofSeconds(5), () -> !lock.isLocked(), "lease expiry");
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost") && e.getMessage().contains("lease of 500ms ran out"),
        e.getMessage());
  }

  @Test
  void watchdog_keepsLockPastItsTimeout_andStopsOnUnlock() {
    LockClient fast = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    DistributedLock lock = fast.getLock("kept");
    lock.lock();
    lock.lock(); // reentrant: renewed until the last unlock
    // Each renewal raises the TTL back to ~600ms; count the raises over several timeouts.
    AtomicLong renewals = new AtomicLong();
    long[] last = {lock.remainTimeToLive()};
    Await.until(Duration.ofSeconds(10), () -> {
      long ttl = lock.remainTimeToLive();
      assertTrue(ttl > 0, "lock must never expire while held, ttl " + ttl);
      if (ttl > last[0] + 50) {
        renewals.incrementAndGet();
      }
      last[0] = ttl;
      return renewals.get() >= 5;
    }, "five renewals");
    lock.unlock();
    assertTrue(lock.isLocked(), "one hold left");
    lock.unlock();
    assertFalse(lock.isLocked());
    assertTrue(Clients.engine(fast).holds().isEmpty(), "watchdog forgot the hold");
  }

  @Test
  void closedClient_stopsRenewing_soItsLocksExpire() {
    LockClient doomed = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    doomed.getLock("orphan").lock();
    doomed.close();
    doomed.close(); // idempotent
    DistributedLock lock = client.getLock("orphan");
    assertTrue(lock.isLocked());
    Await.until(Duration.ofSeconds(5), () -> !lock.isLocked(), "lease expiry after close");
    assertThrows(IllegalStateException.class, () -> doomed.getLock("orphan").lock());
  }

  @Test
  void waiterInOtherClient_wakesPromptlyOnUnlock() throws Exception {
    DistributedLock held = client.getLock("handoff");
    held.lock(); // watchdog lease: 30 s, so only the unlock message can wake the waiter early
    DistributedLock waiting = clients.create(config).getLock("handoff");
    Future<Long> waiter = Waiters.acquireAndRelease(threads, waiting);
    Await.until(Duration.ofSeconds(5), () -> channels().contains("redisson_lock__channel:{handoff}"),
        "waiter subscribed");
    long releasedAt = System.nanoTime();
    held.unlock();
    long latencyMs = Waiters.millisUntilAcquired(waiter, releasedAt);
    System.out.println("wake-up latency after unlock: " + latencyMs + " ms");
    assertTrue(latencyMs < 2_000, "woken by the message, not the 30 s lease: " + latencyMs);
    Await.until(Duration.ofSeconds(5), () -> channels().isEmpty(), "no leaked subscription");
  }

  @Test
  void forceUnlock_deletesAnyHolder_andWakesWaiter() throws Exception {
    client.getLock("stuck").lock();
    LockClient other = clients.create(config);
    Future<Boolean> waiter = threads.submit(() -> {
      other.getLock("stuck").lock();
      return other.getLock("stuck").isHeldByCurrentThread();
    });
    Await.until(Duration.ofSeconds(5), () -> !channels().isEmpty(), "waiter subscribed");
    assertTrue(clients.create(config).getLock("stuck").forceUnlock());
    assertTrue(waiter.get(5, TimeUnit.SECONDS), "waiter woke within 5 s of a 30 s lease");
    assertFalse(client.getLock("nothing").forceUnlock());
  }

  @Test
  void lockInterruptibly_interruptedWhileWaiting_throwsAndLeavesNothingBehind() throws Exception {
    client.getLock("contended").lock();
    LockClient other = clients.create(config);
    DistributedLock lock = other.getLock("contended");
    CompletableFuture<Throwable> outcome = new CompletableFuture<>();
    Thread waiter = new Thread(() -> {
      try {
        lock.lockInterruptibly();
        outcome.complete(null);
      } catch (Throwable t) {
        outcome.complete(t);
      }
    });
    waiter.start();
    Await.until(Duration.ofSeconds(5), () -> !channels().isEmpty(), "waiter subscribed");
    waiter.interrupt();
    assertTrue(outcome.get(5, TimeUnit.SECONDS) instanceof InterruptedException);
    Await.until(Duration.ofSeconds(5), () -> channels().isEmpty(), "subscription released");
    assertTrue(Clients.engine(other).holds().isEmpty());
    assertTrue(Clients.engine(other).waitedChannels().isEmpty());
  }

  @Test
  void lockInterruptibly_alreadyInterrupted_throwsWithoutAcquiring() {
    DistributedLock lock = client.getLock("free");
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, lock::lockInterruptibly);
    assertFalse(Thread.interrupted(), "flag consumed by the exception");
    assertFalse(lock.isLocked());
  }

  @Test
  void lock_isUninterruptible_andRestoresTheFlag() throws Exception {
    DistributedLock held = client.getLock("patient");
    held.lock();
    DistributedLock lock = clients.create(config).getLock("patient");
    CompletableFuture<Boolean> flagAfterLock = new CompletableFuture<>();
    Thread waiter = new Thread(() -> {
      lock.lock();
      flagAfterLock.complete(Thread.currentThread().isInterrupted());
      lock.unlock();
    });
    waiter.start();
    Await.until(Duration.ofSeconds(5), () -> !channels().isEmpty(), "waiter subscribed");
    waiter.interrupt();
    Await.until(Duration.ofSeconds(5), () -> waiter.getState() == Thread.State.TIMED_WAITING,
        "still waiting after the interrupt");
    assertFalse(flagAfterLock.isDone());
    held.unlock();
    assertTrue(flagAfterLock.get(5, TimeUnit.SECONDS), "interrupt flag restored");
  }

  @Test
  void badInput_isRejectedWithTheCulprit() {
    IllegalArgumentException empty =
        assertThrows(IllegalArgumentException.class, () -> client.getLock(""));
    assertTrue(empty.getMessage().contains("Lock name"));
    IllegalArgumentException tag =
        assertThrows(IllegalArgumentException.class, () -> client.getLock("orders:{}"));
    assertTrue(tag.getMessage().contains("orders:{}"), tag.getMessage());
    DistributedLock lock = client.getLock("ok");
    IllegalArgumentException lease = assertThrows(IllegalArgumentException.class,
        () -> lock.lock(0, TimeUnit.SECONDS));
    assertTrue(lease.getMessage().contains("leaseTime"));
    assertThrows(IllegalArgumentException.class, () -> lock.tryLock(1, -1, TimeUnit.SECONDS));
  }

  @Test
  void keyPrefix_namespacesKeyAndChannel() throws Exception {
    LockClient prefixed = clients.create(config, "holdfast.key-prefix", "app1:");
    DistributedLock lock = prefixed.getLock("jobs");
    lock.lock();
    try (Jedis jedis = admin()) {
      assertTrue(jedis.exists("app1:jobs"));
      assertFalse(jedis.exists("jobs"));
    }
    assertFalse(client.getLock("jobs").isLocked(), "other namespace");
    lock.unlock();
  }

  @Test
  void mutualExclusion_underContention_acrossClientsAndThreads() throws Exception {
    int clientCount = 3;
    int threadsPerClient = 4;
    int rounds = 25;
    List<LockClient> all = new CopyOnWriteArrayList<>();
    for (int i = 0; i < clientCount; i++) {
      all.add(clients.create(config));
    }
    try (Jedis jedis = admin()) {
      jedis.set("counter", "0");
    }
    ExclusionProbe probe = new ExclusionProbe();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> workers = new CopyOnWriteArrayList<>();
    for (LockClient c : all) {
      for (int t = 0; t < threadsPerClient; t++) {
        workers.add(threads.submit(() -> {
          start.await();
          DistributedLock lock = c.getLock("counter-lock");
          try (Jedis jedis = redis.server().admin()) {
            for (int r = 0; r < rounds; r++) {
              lock.lock();
              try {
                probe.enter();
                // A read-modify-write that loses updates unless it is exclusive.
                int value = Integer.parseInt(jedis.get("counter"));
                Thread.yield();
                jedis.set("counter", Integer.toString(value + 1));
                probe.exit();
              } finally {
                lock.unlock();
              }
            }
          }
          return null;
        }));
      }
    }
    start.countDown();
    for (Future<?> w : workers) {
      w.get(60, TimeUnit.SECONDS);
    }
    try (Jedis jedis = admin()) {
      assertEquals(clientCount * threadsPerClient * rounds, Integer.parseInt(jedis.get("counter")));
      assertFalse(jedis.exists("counter-lock"));
    }
    assertEquals(0, probe.overlaps());
    Await.until(Duration.ofSeconds(5), () -> channels().isEmpty(), "no leaked subscription");
  }

  @Test
  void lostLock_isReportedToListeners_andUnlockSaysLost() throws Exception {
    LockClient fast = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    List<LockLost> lost = new CopyOnWriteArrayList<>();
    fast.onLockLost(event -> {
      throw new IllegalStateException("a faulty listener must not stop the others");
    });
    fast.onLockLost(lost::add);
    DistributedLock lock = fast.getLock("fragile");
    lock.lock();
    try (Jedis jedis = admin()) {
      jedis.del("fragile"); // as if Redis lost it
    }
    Await.until(Duration.ofSeconds(5), () -> !lost.isEmpty(), "LockLost reported");
    LockLost event = lost.get(0);
    assertEquals("fragile", event.lockName());
    assertEquals(Thread.currentThread().getId(), event.threadId());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("was lost"), e.getMessage());
    assertTrue(Clients.engine(fast).holds().isEmpty());
    // The lock is usable again afterwards.
    lock.lock();
    lock.unlock();
  }

  private List<String> channels() {
    try (Jedis jedis = admin()) {
      return jedis.pubsubChannels("*");
    }
  }
}
