package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 16 §1: many threads of one client on a few locks. No call fails because of the client's
 * own resources (its connection pool is a queue), no two threads hold a lock at once, no live
 * thread's hold is reported lost, and the Redis script calls per acquisition do not grow with
 * the number of local waiters. Virtual threads on Java 21+, platform threads on 17.
 */
@Tag("concurrency")
@Timeout(value = 10, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ManyWaitersTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private Map<String, String> direct;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    direct = Map.of(LockClientConfig.ADDRESS, redis.server().uri());
  }

  @Test
  void burstOfThreads_onTenNames_noFailuresNoOverlapsNoLosses() throws Exception {
    boolean virtual = TestThreads.virtualAvailable();
    int threads = virtual ? 10_000 : 1_000;
    int calls = 2;
    // A small pool and a short command timeout: the burst queues for connections far longer
    // than one command timeout, which must not fail a call.
    LockClient client = clients.create(direct, LockClientConfig.POOL_MAX_SIZE, "8",
        LockClientConfig.TIMEOUT, "500ms");
    LossRecorder losses = LossRecorder.on(client);
    Result r = burst(client, TestThreads.virtualIfAvailable(), threads, calls, 10);
    assertEquals(List.of(), r.failures.stream().limit(5).toList(),
        r.failures.size() + " calls failed");
    assertEquals(0, r.overlaps.get(), "two threads held one lock at once");
    assertEquals(threads * calls, r.done.get());
    assertEquals(0, losses.count(), "holds reported lost: " + losses);
  }

  /**
   * Platform threads (Java 17 too) through a proxy adding 3 ms to every reply, on a pool of two
   * connections: the burst waits for connections far longer than one command timeout.
   */
  @Test
  void platformThreads_slowRedis_onTenNames_noFailuresNoOverlapsNoLosses() throws Exception {
    try (FaultProxy proxy = new FaultProxy(redis.server().port())) {
      proxy.delay(Duration.ofMillis(3));
      LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri()),
          LockClientConfig.POOL_MAX_SIZE, "2", LockClientConfig.TIMEOUT, "1s");
      LossRecorder losses = LossRecorder.on(client);
      Result r = burst(client, TestThreads.platform(), 1_000, 2, 10);
      assertEquals(List.of(), r.failures.stream().limit(5).toList(),
          r.failures.size() + " calls failed");
      assertEquals(0, r.overlaps.get(), "two threads held one lock at once");
      assertEquals(2_000, r.done.get());
      assertEquals(0, losses.count(), "holds reported lost: " + losses);
    }
  }

  /**
   * Every connection acquisitions may use is taken: a timed tryLock counts the wait for one in
   * its own wait and returns false, queued, never failing; a single try returns false; a query
   * (which takes a permit too) fails after about one timeout; releases and renewals use the
   * reserve and go on; lock() waits and gets the lock once one is free.
   */
  @Test
  void acquisitionsOutOfConnections_waitWithinTheirWait_releasesAndRenewalsGoOn()
      throws Exception {
    LockClient client = clients.create(direct, LockClientConfig.POOL_MAX_SIZE, "4",
        LockClientConfig.TIMEOUT, "300ms", LockClientConfig.WATCHDOG_TIMEOUT, "1s");
    LockEngine engine = Clients.engine(client);
    LossRecorder losses = LossRecorder.on(client);
    DistributedLock held = client.getLock("held");
    held.lock(); // before the permits are gone
    RedisTopology topology = engine.topology();
    int permits = 4 - RedisTopology.reserve(4);
    for (int i = 0; i < permits; i++) {
      assertTrue(topology.enterAcquisition(0, false));
    }
    try {
      DistributedLock free = client.getLock("free");
      long start = System.nanoTime();
      assertFalse(free.tryLock(300, TimeUnit.MILLISECONDS), "no connection within the wait");
      assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(300),
          "the wait for a connection counted in the call's own wait");
      assertFalse(free.tryLock(), "a single try without a connection");
      // Queries take a permit too (they must not starve renewals): none comes free here.
      assertThrows(dev.holdfast.LockException.class, held::isLocked);
      // Renewals go on (the hold outlives three leases of 1 s) and the release is not queued;
      // checked through another client, whose permits are its own.
      Thread.sleep(3_000);
      DistributedLock seen = clients.create(direct).getLock("held");
      assertTrue(seen.isLocked());
      assertEquals(1, engine.activeHolds());
      held.unlock();
      assertFalse(seen.isLocked());

      AtomicInteger got = new AtomicInteger();
      Thread waiter = TestThreads.platform().newThread(() -> {
        free.lock();
        got.incrementAndGet();
        free.unlock();
      });
      waiter.start();
      Await.until(Duration.ofSeconds(20), () -> topology.acquisitionsQueued() == 1,
          "lock() queued for a connection");
      assertEquals(0, got.get());
      topology.leaveAcquisition();
      permits--;
      waiter.join(20_000);
      assertEquals(1, got.get(), "lock() got the lock once a connection was free");
      assertEquals(0, losses.count(), "holds reported lost: " + losses);
    } finally {
      for (int i = 0; i < permits; i++) {
        topology.leaveAcquisition();
      }
    }
  }

  /**
   * The script calls of N local waiters of a lock held by another client: while it is held, and
   * then per acquisition once it is released, do not grow with N.
   */
  @Test
  void waitingThreads_scriptCallsDoNotGrowWithTheirNumber() throws Exception {
    Cost one = waitThenAcquireInTurn(1);
    Cost many = waitThenAcquireInTurn(200);
    System.out.println("script calls, 1 waiter: " + one + "; 200 waiters: " + many);
    // While held (~2 s, the holder's lease 1 s renewed): the head re-polls at most a few times.
    assertTrue(many.whileHeld <= Math.max(12, one.whileHeld * 3),
        "calls while 200 threads waited: " + many.whileHeld + " (1 thread: " + one.whileHeld
            + ")");
    // Then each acquisition costs a small constant: its grant or handoff, and the next head's
    // one look at Redis.
    double perAcquisition = (double) many.afterRelease / 200;
    assertTrue(perAcquisition <= 4.0, "calls per acquisition with 200 waiters: "
        + perAcquisition + " (" + many.afterRelease + " calls; 1 waiter: " + one.afterRelease
        + ")");
  }

  private record Cost(long whileHeld, long afterRelease) {
  }

  private Cost waitThenAcquireInTurn(int n) throws Exception {
    redis.flushAll();
    LockClient holderClient = clients.create(direct, LockClientConfig.WATCHDOG_TIMEOUT, "1s");
    LockClient client = clients.create(direct, LockClientConfig.WATCHDOG_TIMEOUT, "1s");
    LockEngine engine = Clients.engine(client);
    DistributedLock held = holderClient.getLock("cost");
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch holding = new CountDownLatch(1);
    Thread holder = new Thread(() -> {
      held.lock();
      holding.countDown();
      try {
        release.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        held.unlock();
      }
    });
    holder.start();
    assertTrue(holding.await(20, TimeUnit.SECONDS));
    DistributedLock lock = client.getLock("cost");
    AtomicInteger done = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    List<Thread> waiters = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Thread t = TestThreads.platform().newThread(() -> {
        try {
          lock.lock();
          lock.unlock();
          done.incrementAndGet();
        } catch (Throwable e) {
          failures.add(e);
        }
      });
      t.start();
      waiters.add(t);
    }
    Await.until(Duration.ofSeconds(60), () -> engine.waitingThreads() == n,
        n + " threads waiting");
    long before = scriptCalls();
    Thread.sleep(2_000); // the hold lasts this long: the cost of waiting is what is measured
    long whileHeld = scriptCalls() - before;
    release.countDown();
    holder.join(20_000);
    long released = scriptCalls();
    for (Thread t : waiters) {
      t.join(60_000);
    }
    assertEquals(List.of(), List.copyOf(failures));
    assertEquals(n, done.get());
    // The holder's own release is one of them.
    return new Cost(whileHeld, scriptCalls() - released + 1);
  }

  private static long scriptCalls() {
    String stats = redis.server().withAdmin(j -> j.info("commandstats"));
    long calls = 0;
    for (String line : stats.split("\r?\n")) {
      if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
        int from = line.indexOf("calls=") + 6;
        calls += Long.parseLong(line.substring(from, line.indexOf(',', from)));
      }
    }
    return calls;
  }

  private static final class Result {
    final AtomicInteger done = new AtomicInteger();
    final AtomicInteger overlaps = new AtomicInteger();
    final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
  }

  /** {@code threads} threads, each {@code calls} times: lock a random name, sleep 1 ms, unlock. */
  private static Result burst(LockClient client, ThreadFactory factory, int threads, int calls,
      int names) throws InterruptedException {
    Result r = new Result();
    AtomicInteger[] inside = new AtomicInteger[names];
    DistributedLock[] locks = new DistributedLock[names];
    for (int i = 0; i < names; i++) {
      inside[i] = new AtomicInteger();
      locks[i] = client.getLock("burst:" + i);
    }
    CountDownLatch start = new CountDownLatch(1);
    List<Thread> all = new ArrayList<>(threads);
    for (int t = 0; t < threads; t++) {
      int seed = t;
      Thread thread = factory.newThread(() -> {
        try {
          start.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int c = 0; c < calls; c++) {
          int name = (seed * 7 + c * 3) % names;
          try {
            locks[name].lock();
            try {
              if (inside[name].incrementAndGet() != 1) {
                r.overlaps.incrementAndGet();
              }
              Thread.sleep(1);
              inside[name].decrementAndGet();
            } finally {
              locks[name].unlock();
            }
            r.done.incrementAndGet();
          } catch (Throwable e) {
            r.failures.add(e);
          }
        }
      });
      all.add(thread);
      thread.start();
    }
    start.countDown();
    for (Thread t : all) {
      t.join();
    }
    return r;
  }
}
