package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.ExclusionProbe;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Issue 11 §3: an exclusive lock released while another thread of the same client waits for it
 * is handed over in the release's own round trip ({@link LockScripts#TRANSFER}) — safely (one
 * holder, exact counts, leases, uncertain handoffs settled) and within a budget that lets
 * waiters of other processes, Holdfast or Redisson, win in bounded time.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LocalHandoffTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedissonClient redisson;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> direct;
  private RedisProbe redisState;
  private LockClient client;

  @BeforeAll
  static void startRedisson() {
    Config config = new Config();
    config.useSingleServer().setAddress(redis.server().uri());
    redisson = Redisson.create(config);
  }

  @AfterAll
  static void stopRedisson() {
    redisson.shutdown();
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
    direct = Map.of(LockClientConfig.ADDRESS, redis.server().uri());
    redisState = new RedisProbe(redis.server());
    client = clients.create(direct);
  }

  @AfterEach
  void stopThreads() throws InterruptedException {
    threads.shutdownNow();
    threads.awaitTermination(10, TimeUnit.SECONDS);
  }

  private static String fieldOf(LockClient c, Thread t) {
    return c.getClientId() + ":" + t.getId();
  }

  /** Waits until {@code n} threads of {@code c} are parked as handoff candidates of a lock. */
  private static void awaitCandidates(LockClient c, String name, int n) {
    LockEngine engine = Clients.engine(c);
    LockNames names = LockNames.of("", name); // these tests' clients have no key prefix
    Await.until(Duration.ofSeconds(10), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == n;
    }, n + " handoff candidate(s) parked on " + name);
  }

  /** Runs {@code task} on a pool thread, handing back that thread too. */
  private <T> Future<T> onThread(Callable<T> task, Thread[] thread) {
    CountDownLatch started = new CountDownLatch(1);
    Future<T> f = threads.submit(() -> {
      thread[0] = Thread.currentThread();
      started.countDown();
      return task.call();
    });
    try {
      assertTrue(started.await(10, TimeUnit.SECONDS));
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    return f;
  }

  /** 16 threads of one client lock and unlock one key until {@code stop}; counts their sections. */
  private List<Future<?>> storm(LockClient c, String name, ExclusionProbe probe,
      AtomicLong sections, AtomicBoolean stop, int perThread) {
    List<Future<?>> workers = new ArrayList<>();
    DistributedLock lock = c.getLock(name);
    for (int t = 0; t < 16; t++) {
      workers.add(threads.submit(() -> {
        for (int i = 0; i < perThread && !stop.get(); i++) {
          lock.lock();
          try {
            probe.enter();
            sections.incrementAndGet();
            probe.exit();
          } finally {
            lock.unlock();
          }
        }
        return null;
      }));
    }
    return workers;
  }

  @Test
  void localStorm_16Threads_excludeEachOther_countsExact_andHandOffLocally() throws Exception {
    ExclusionProbe probe = new ExclusionProbe();
    AtomicLong sections = new AtomicLong();
    LossRecorder lost = LossRecorder.on(client);
    int perThread = 150;
    for (Future<?> w : storm(client, "hot", probe, sections, new AtomicBoolean(), perThread)) {
      w.get(45, TimeUnit.SECONDS);
    }
    assertEquals(0, probe.overlaps(), "two threads were inside at once");
    assertEquals(16L * perThread, sections.get());
    assertFalse(redisState.exists("hot"), "the last unlock freed the lock");
    long handoffs = Clients.engine(client).localHandoffs();
    assertTrue(handoffs > 16L * perThread / 4,
        "most releases under a local storm hand the lock over locally, but only " + handoffs
        + " of " + 16 * perThread + " did");
    assertEquals(0, lost.count(), lost.toString());
  }

  @Test
  void remoteHoldfastWaiter_underLocalStorm_acquiresWithinBound() throws Exception {
    LockClient remote = clients.create(direct);
    assertRemoteWinsUnderStorm(remote.getLock("hot"));
  }

  @Test
  void redissonWaiter_underLocalStorm_acquiresWithinBound() throws Exception {
    assertRemoteWinsUnderStorm(redisson.getLock("hot"));
  }

  /**
   * A waiter of another process gets the lock within a generous bound while 16 local threads
   * would otherwise pass it among themselves forever: the budget sends a release through Redis
   * at least every {@link WaitEntry#MAX_HANDOFFS} handoffs or {@link WaitEntry#MAX_STREAK_MILLIS}
   * ms, and local attempts then yield for a moment.
   */
  private void assertRemoteWinsUnderStorm(Lock remoteLock) throws Exception {
    ExclusionProbe probe = new ExclusionProbe();
    AtomicLong sections = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    List<Future<?>> workers = storm(client, "hot", probe, sections, stop, Integer.MAX_VALUE);
    try {
      LockEngine engine = Clients.engine(client);
      Await.until(Duration.ofSeconds(20), () -> engine.localHandoffs() > 200,
          "the local storm hands the lock over locally");
      Future<Long> remote = threads.submit(() -> {
        long begin = System.nanoTime();
        remoteLock.lock();
        try {
          probe.enter();
          probe.exit();
          return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin);
        } finally {
          remoteLock.unlock();
        }
      });
      long waited = remote.get(20, TimeUnit.SECONDS);
      assertTrue(waited < 10_000, "the remote waiter waited " + waited + " ms");
      long before = engine.localHandoffs();
      Await.until(Duration.ofSeconds(20), () -> engine.localHandoffs() > before + 50,
          "local handoffs go on after the remote waiter's turn");
    } finally {
      stop.set(true);
    }
    for (Future<?> w : workers) {
      w.get(30, TimeUnit.SECONDS);
    }
    assertEquals(0, probe.overlaps(), "the remote waiter and a local thread were inside at once");
    assertFalse(redisState.exists("hot"));
  }

  @Test
  void nestedHold_handsOffOnlyAtItsFinalUnlock() throws Exception {
    DistributedLock lock = client.getLock("nested");
    lock.lock();
    lock.lock();
    Thread[] waiterThread = new Thread[1];
    Future<Integer> waiter = onThread(() -> {
      lock.lock();
      try {
        return Integer.parseInt(redisState.hget("nested", fieldOf(client,
            Thread.currentThread())));
      } finally {
        lock.unlock();
      }
    }, waiterThread);
    awaitCandidates(client, "nested", 1);
    String mine = fieldOf(client, Thread.currentThread());
    lock.unlock();
    assertEquals("1", redisState.hget("nested", mine), "the inner unlock keeps the outer hold");
    assertFalse(waiter.isDone());
    assertEquals(0, Clients.engine(client).localHandoffs());
    lock.unlock();
    assertEquals(1, waiter.get(10, TimeUnit.SECONDS), "the waiter holds count 1");
    assertEquals(1, Clients.engine(client).localHandoffs(), "handed over at the final unlock");
    assertFalse(redisState.exists("nested"));
    assertFalse(lock.isHeldByCurrentThread());
  }

  @Test
  void fixedLeaseWaiter_isHandedTheLockWithItsOwnLease() throws Exception {
    DistributedLock lock = client.getLock("leased");
    lock.lock(); // watchdog lease, 30 s
    CountDownLatch release = new CountDownLatch(1);
    Thread[] waiterThread = new Thread[1];
    Future<Long> waiter = onThread(() -> {
      lock.lock(5, TimeUnit.SECONDS);
      try {
        long pttl = redisState.pttl("leased");
        assertTrue(release.await(10, TimeUnit.SECONDS));
        return pttl;
      } finally {
        lock.unlock();
      }
    }, waiterThread);
    awaitCandidates(client, "leased", 1);
    lock.unlock();
    Await.until(Duration.ofSeconds(10),
        () -> "1".equals(redisState.hget("leased", fieldOf(client, waiterThread[0]))),
        "the waiter holds the lock");
    release.countDown();
    long pttl = waiter.get(10, TimeUnit.SECONDS);
    assertTrue(pttl > 3_000 && pttl <= 5_000, "the waiter's own 5 s lease, was " + pttl);
    assertEquals(1, Clients.engine(client).localHandoffs());
    assertFalse(redisState.exists("leased"));
  }

  @Test
  void watchdogWaiter_isHandedTheLock_andRenewed() throws Exception {
    LockClient c = clients.create(direct, LockClientConfig.WATCHDOG_TIMEOUT, "1s");
    LossRecorder lost = LossRecorder.on(c);
    DistributedLock lock = c.getLock("renewed");
    lock.lock(20, TimeUnit.SECONDS); // a long fixed lease: the handoff must set the waiter's
    CountDownLatch release = new CountDownLatch(1);
    Thread[] waiterThread = new Thread[1];
    Future<Boolean> waiter = onThread(() -> {
      lock.lock();
      try {
        assertTrue(release.await(20, TimeUnit.SECONDS));
        return lock.isHeldByCurrentThread();
      } finally {
        lock.unlock();
      }
    }, waiterThread);
    awaitCandidates(c, "renewed", 1);
    lock.unlock();
    String field = fieldOf(c, waiterThread[0]);
    Await.until(Duration.ofSeconds(10), () -> "1".equals(redisState.hget("renewed", field)),
        "the waiter holds the lock");
    assertTrue(redisState.pttl("renewed") <= 1_000, "the watchdog lease of 1 s, not 20 s");
    Thread.sleep(3_000); // three watchdog leases: still held only if the watchdog renews it
    assertEquals("1", redisState.hget("renewed", field), "renewed past its 1 s lease");
    release.countDown();
    assertTrue(waiter.get(10, TimeUnit.SECONDS), "still held by the waiter");
    assertEquals(1, Clients.engine(c).localHandoffs());
    assertEquals(0, lost.count(), lost.toString());
    assertFalse(redisState.exists("renewed"));
  }

  @Test
  void queuedAcquirer_whoseHandedHolderNeverUnlocks_getsTheLockWhenItsLeaseEnds()
      throws Exception {
    DistributedLock lock = client.getLock("abandoned");
    lock.lock();
    CountDownLatch holding = new CountDownLatch(1);
    CountDownLatch end = new CountDownLatch(1);
    Thread holder = new Thread(() -> {
      lock.lock(700, TimeUnit.MILLISECONDS); // handed over, then never unlocked
      holding.countDown();
      try {
        end.await(); // alive (and not reused) while its hold runs out
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    holder.start();
    awaitCandidates(client, "abandoned", 1);
    // A second waiter keeps the queue alive; it saw the first holder's 30 s lease.
    Thread[] secondThread = new Thread[1];
    Future<Boolean> second = onThread(() -> {
      boolean got = lock.tryLock(20, TimeUnit.SECONDS);
      if (got) {
        lock.unlock();
      }
      return got;
    }, secondThread);
    awaitCandidates(client, "abandoned", 2);
    long begin = System.nanoTime();
    lock.unlock(); // handed to the oldest waiter, the holder
    assertTrue(holding.await(10, TimeUnit.SECONDS));
    assertEquals(1, Clients.engine(client).localHandoffs());
    // The lock was last handed to a thread of this client: a new acquirer queues without
    // asking Redis, and must still get the lock once that holder's lease ends (no message).
    Thread[] lateThread = new Thread[1];
    Future<String> late = onThread(() -> {
      lock.lock();
      try {
        return redisState.hget("abandoned", fieldOf(client, Thread.currentThread()));
      } finally {
        lock.unlock();
      }
    }, lateThread);
    assertEquals("1", late.get(10, TimeUnit.SECONDS));
    assertTrue(second.get(10, TimeUnit.SECONDS), "the queue moves on");
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin);
    assertTrue(waited < 3_000, "both acquired about when the 700 ms lease ended, not at the "
        + "30 s one: " + waited + " ms");
    assertFalse(redisState.exists("abandoned"));
    end.countDown();
    holder.join(5_000);
  }

  @Test
  void fencedWaiter_isNeverHandedTheLock_andGetsAToken() throws Exception {
    FencedLock fenced = client.getFencedLock("fenced");
    DistributedLock plain = client.getLock("fenced");
    plain.lock();
    Thread[] waiterThread = new Thread[1];
    Future<Long> waiter = onThread(() -> {
      Long token = fenced.lockAndGetToken();
      fenced.unlock();
      return token;
    }, waiterThread);
    Await.until(Duration.ofSeconds(10), () -> Clients.engine(client).waitedChannels().size() == 1,
        "the fenced waiter waits");
    plain.unlock();
    assertNotNull(waiter.get(10, TimeUnit.SECONDS));
    assertEquals(0, Clients.engine(client).localHandoffs());
  }

  @Test
  void lostTransferReply_leavesNoStuckLock_andExactCountsOnBothSides() throws Exception {
    try (BlackHoleProxy proxy = new BlackHoleProxy(redis.server().port())) {
      LockClient c = proxied(proxy);
      LossRecorder lost = LossRecorder.on(c);
      DistributedLock lock = c.getLock("lost-reply");
      lock.lock();
      CountDownLatch release = new CountDownLatch(1);
      Thread[] waiterThread = new Thread[1];
      Future<Integer> waiter = onThread(() -> {
        lock.lock();
        try {
          assertTrue(release.await(20, TimeUnit.SECONDS));
          return lock.getHoldCount();
        } finally {
          lock.unlock();
        }
      }, waiterThread);
      awaitCandidates(c, "lost-reply", 1);
      proxy.dropScriptReplies(true);
      try {
        assertThrows(LockException.class, lock::unlock, "the handoff's reply never comes");
      } finally {
        proxy.dropScriptReplies(false);
      }
      Await.until(Duration.ofSeconds(10), () -> lock.isLocked()
          && "1".equals(redisState.hget("lost-reply", fieldOf(c, waiterThread[0]))),
          "the handoff ran although no reply came back: the waiter holds count 1");
      assertNull(redisState.hget("lost-reply", fieldOf(c, Thread.currentThread())));
      lock.unlock(); // re-sends the release: its marker says the hold ended
      assertFalse(lock.isHeldByCurrentThread());
      release.countDown();
      assertEquals(1, waiter.get(20, TimeUnit.SECONDS), "the waiter settled it as granted");
      assertFalse(redisState.exists("lost-reply"));
      assertEquals(0, lost.count(), lost.toString());
      assertTrue(lock.tryLock(), "free and usable");
      lock.unlock();
    }
  }

  @Test
  void waiterGivingUp_whileItsHandoffIsUncertain_leaksNothing() throws Exception {
    try (BlackHoleProxy proxy = new BlackHoleProxy(redis.server().port())) {
      LockClient c = proxied(proxy);
      LossRecorder lost = LossRecorder.on(c);
      DistributedLock lock = c.getLock("gave-up");
      lock.lock();
      Thread[] waiterThread = new Thread[1];
      Future<Boolean> waiter = onThread(() -> {
        try {
          boolean got = lock.tryLock(1_500, TimeUnit.MILLISECONDS);
          if (got) {
            lock.unlock();
          }
          return got;
        } catch (LockException e) {
          return false; // Redis did not answer when its wait ended: not acquired either
        }
      }, waiterThread);
      awaitCandidates(c, "gave-up", 1);
      proxy.dropScriptReplies(true);
      try {
        assertThrows(LockException.class, lock::unlock, "the handoff's reply never comes");
        assertFalse(waiter.get(20, TimeUnit.SECONDS), "its wait ended during the outage");
      } finally {
        proxy.dropScriptReplies(false);
      }
      Await.until(Duration.ofSeconds(10), () -> !redisState.exists("gave-up"),
          "the waiter's uncertain handoff undone, long before its 30 s lease");
      lock.unlock(); // re-sends the release: its marker says the hold ended
      assertFalse(lock.isHeldByCurrentThread());
      assertEquals(0, lost.count(), lost.toString());
      DistributedLock other = clients.create(direct).getLock("gave-up");
      assertTrue(other.tryLock(), "nobody holds it");
      other.unlock();
      Await.until(Duration.ofSeconds(10),
          () -> Clients.engine(c).holds().isEmpty(), "nothing owed or held is left");
    }
  }

  /** A client behind {@code proxy} with a short timeout that has loaded its scripts. */
  private LockClient proxied(BlackHoleProxy proxy) {
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    DistributedLock warmUp = c.getLock("warm-up");
    // Two threads, so the transfer script is loaded too: a swallowed NOSCRIPT would hide it.
    warmUp.lock();
    Future<?> second = threads.submit(() -> {
      warmUp.lock();
      warmUp.unlock();
    });
    awaitCandidates(c, "warm-up", 1);
    warmUp.unlock();
    try {
      second.get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    assertEquals(1, Clients.engine(c).localHandoffs(), "warm-up handoff");
    return c;
  }
}
