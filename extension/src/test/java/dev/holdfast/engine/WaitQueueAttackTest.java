package dev.holdfast.engine;

import static dev.holdfast.engine.TestThreads.inFrame;
import static dev.holdfast.engine.TestThreads.start;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attacks on issue 16 §1 (the connection pool as a queue, the per-client local FIFO queue of
 * waiters per lock) and on LockHold waiting through that queue. Probes that expose a defect are
 * {@code @Disabled("defect: …")}; the others stay as regression tests.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class WaitQueueAttackTest {

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

  /**
   * Attack: the pool's own maxWait is unbounded. A caller that found every connection taken
   * waits in commons-pool's {@code takeFirst()} for one to come back. If Redis goes down then,
   * each broken connection is invalidated and the pool tries to create a replacement for the
   * waiter, which fails (Redis is down); once Redis is back nothing wakes the waiter: it waits
   * for ever unless some other caller of this client happens to borrow (and return) a
   * connection. Pool of one (so reserve 0): a borrower without a permit (as a release or a
   * renewal) holds the connection while Redis is frozen, lock() waits for it; Redis is killed
   * and restarted. Fixed: the pool's wait is finite, and RedisTopology.borrow asks again after
   * each slice within the caller's own bound.
   */
  @Test
  void poolWaiter_whenRedisDiesAndComesBack_getsTheLock() throws Exception {
    try (RedisServer server = RedisServer.start()) {
      LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, server.uri()),
          LockClientConfig.POOL_MAX_SIZE, "1", LockClientConfig.TIMEOUT, "20s",
          LockClientConfig.WATCHDOG_TIMEOUT, "2s");
      DistributedLock lock = client.getLock("pool-hang");
      assertFalse(lock.isLocked()); // connects
      server.pause();
      // Holds the only connection without a permit, as a release or renewal does.
      RedisTopology topology = Clients.engine(client).topology();
      Thread query = start("query", () -> {
        try (redis.clients.jedis.Connection c = topology.connection("other")) {
          c.ping();
        } catch (RuntimeException expected) {
          // its connection breaks with the server
        }
      });
      Await.until(Duration.ofSeconds(20), () -> inFrame(query, "SocketInputStream")
          || inFrame(query, "NioSocketImpl") || inFrame(query, "RedisInputStream"),
          "the query waits for its reply on the only connection");
      AtomicBoolean got = new AtomicBoolean();
      AtomicReference<Throwable> failure = new AtomicReference<>();
      Thread acquirer = start("acquirer", () -> {
        try {
          lock.lock();
          got.set(true);
          lock.unlock();
        } catch (Throwable e) {
          failure.set(e);
        }
      });
      Await.until(Duration.ofSeconds(20),
          () -> inFrame(acquirer, "GenericObjectPool.borrowObject"),
          "lock() waits for the pool's only connection");
      server.kill(); // the frozen server dies: the query's connection breaks
      query.join(20_000);
      assertFalse(query.isAlive());
      server.restart();
      acquirer.join(30_000);
      assertTrue(got.get(), "lock() did not get the free lock within 30 s of Redis being back"
          + " (failure: " + failure.get() + "; still in the pool: "
          + inFrame(acquirer, "GenericObjectPool.borrowObject") + ")");
    }
  }

  /**
   * Attack: the pool's maxWait is unbounded (-1). commons-pool 2.13.1 turns that into a zero
   * budget in {@code GenericObjectPool.create()}, whose wait for another thread's connection
   * being made ({@code makeObjectCount > 0}, pool at max) then returns at once: borrowers spin
   * on the CPU instead of parking for as long as a connection is being made. A frozen server
   * (accepts, never answers the handshake) makes that last the command timeout: four borrowers
   * without a permit (queries take one now) open the pool's four connections against it, and
   * three lock() calls (the three permits) find the pool full of connections being made.
   * Fixed by the pool's finite wait (a slice): create() then parks.
   */
  @Test
  void poolWaiters_whileConnectionsAreBeingMade_parkRatherThanSpin() throws Exception {
    try (RedisServer server = RedisServer.start()) {
      LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, server.uri()),
          LockClientConfig.POOL_MAX_SIZE, "4", LockClientConfig.TIMEOUT, "10s");
      assertFalse(client.getLock("warm").isLocked());
      server.pause();
      List<Thread> queries = new ArrayList<>();
      // Borrow without a permit, as releases and renewals do: the pool is full.
      RedisTopology topology = Clients.engine(client).topology();
      for (int i = 0; i < 4; i++) {
        queries.add(start("query-" + i, () -> {
          try (redis.clients.jedis.Connection c = topology.connection("other")) {
            c.ping();
          } catch (RuntimeException expected) {
            // the frozen server never answers
          }
        }));
      }
      for (Thread q : queries) {
        Await.until(Duration.ofSeconds(20), () -> inFrame(q, "SocketInputStream")
            || inFrame(q, "NioSocketImpl") || inFrame(q, "RedisInputStream"),
            "the queries wait on the pool's connections");
      }
      List<Thread> acquirers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        DistributedLock l = client.getLock("spin-" + i);
        acquirers.add(start("acquirer-" + i, () -> {
          try {
            l.lock();
            l.unlock();
          } catch (RuntimeException e) {
            // the outcome does not matter here
          }
        }));
      }
      Await.until(Duration.ofSeconds(20), () -> acquirers.stream()
          .allMatch(t -> inFrame(t, "GenericObjectPool")), "the acquirers are in the pool");
      // A spinner burns CPU for the whole window; a parked waiter only wakes once per borrow
      // slice (250 ms) to ask again. CPU time, not stack samples: a sample may catch a waiter
      // in create() on its way back to the pool after a slice, which is not spinning.
      ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
      long before = cpuTime(cpu, acquirers);
      long start = System.nanoTime();
      Thread.sleep(3_000); // the measuring window, not a synchronisation
      long used = cpuTime(cpu, acquirers) - before;
      long elapsed = System.nanoTime() - start;
      boolean stillInPool = acquirers.stream().allMatch(t -> inFrame(t, "GenericObjectPool"));
      server.resume();
      assertTrue(stillInPool, "the acquirers left the pool during the window");
      // Spinning, three threads take well over a tenth of the window even on a loaded machine
      // (two cores shared with a dozen runnable threads); parked, they take a few milliseconds.
      assertTrue(used < elapsed / 10, "the acquirers used " + used / 1_000_000 + " ms of CPU in "
          + elapsed / 1_000_000 + " ms waiting for a connection being made: they spin in "
          + "GenericObjectPool.create() rather than park");
    }
  }

  private static long cpuTime(ThreadMXBean cpu, List<Thread> threads) {
    long sum = 0;
    for (Thread t : threads) {
      long nanos = cpu.getThreadCpuTime(t.getId());
      assertTrue(nanos >= 0, "no CPU time for " + t.getName());
      sum += nanos;
    }
    return sum;
  }

  /**
   * Attack: a thread that holds the write lock takes the read lock (the downgrade the library's
   * own message recommends) while other threads of its client already wait for the read lock.
   * Read-side acquisitions queue locally whenever others of the client wait ({@code
   * queuesLocally}: {@code entry.hasWaiters()}), so the writer parks behind readers that wait
   * for its own write lock, and never becomes head.
   */
  @Test
  void writeHolder_takingReadLockWhileLocalReadersWait_getsIt() throws Exception {
    LockClient client = clients.create(direct);
    DistributedReadWriteLock rw = client.getReadWriteLock("downgrade");
    rw.writeLock().lock();
    try {
      List<Thread> readers = new ArrayList<>();
      AtomicInteger read = new AtomicInteger();
      for (int i = 0; i < 2; i++) {
        readers.add(start("reader-" + i, () -> {
          try {
            if (rw.readLock().tryLock(20, TimeUnit.SECONDS)) {
              read.incrementAndGet();
              rw.readLock().unlock();
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }));
      }
      for (Thread r : readers) {
        Await.until(Duration.ofSeconds(20), () -> inFrame(r, "WaitEntry$Waiter.await"),
            "the readers wait");
      }
      boolean downgraded = rw.readLock().tryLock(3, TimeUnit.SECONDS);
      assertTrue(downgraded, "the write holder did not get the read lock within 3 s");
      rw.readLock().unlock();
    } finally {
      rw.writeLock().unlock();
    }
  }

  /**
   * Attack: queued non-head waiters during an outage. Only the head calls Redis; it gives up once
   * Redis has failed for a watchdog timeout, and only then does the next head start its own
   * failure clock. The waiters of one lock so fail one after the other: the k-th after about k
   * watchdog timeouts (8 waiters, 1 s: ~8 s; 10,000 virtual threads with the default 30 s: days).
   */
  @Test
  void queuedWaiters_duringOutage_failWithinAboutOneWatchdogTimeout() throws Exception {
    try (RedisServer server = RedisServer.start()) {
      Map<String, String> at = Map.of(LockClientConfig.ADDRESS, server.uri());
      LockClient holderClient = clients.create(at, LockClientConfig.WATCHDOG_TIMEOUT, "1s",
          LockClientConfig.TIMEOUT, "300ms");
      LockClient client = clients.create(at, LockClientConfig.WATCHDOG_TIMEOUT, "1s",
          LockClientConfig.TIMEOUT, "300ms");
      DistributedLock held = holderClient.getLock("outage");
      CountDownLatch holding = new CountDownLatch(1);
      Thread holder = start("holder", () -> {
        held.lock();
        holding.countDown();
        // never unlocks: the outage ends the test
      });
      assertTrue(holding.await(20, TimeUnit.SECONDS));
      DistributedLock lock = client.getLock("outage");
      int n = 8;
      ConcurrentLinkedQueue<Long> failedAt = new ConcurrentLinkedQueue<>();
      List<Thread> waiters = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        waiters.add(start("waiter-" + i, () -> {
          try {
            lock.lock();
            lock.unlock();
          } catch (RuntimeException e) {
            failedAt.add(System.nanoTime());
          }
        }));
      }
      for (Thread w : waiters) {
        Await.until(Duration.ofSeconds(20), () -> inFrame(w, "WaitEntry$Waiter.await"),
            "the waiters wait");
      }
      long down = System.nanoTime();
      server.kill();
      for (Thread w : waiters) {
        w.join(60_000);
      }
      holder.join(1);
      assertEquals(n, failedAt.size(), "every lock() failed in the outage");
      long last = failedAt.stream().mapToLong(t -> t).max().orElseThrow();
      long lastMillis = TimeUnit.NANOSECONDS.toMillis(last - down);
      System.out.println("outage: last of " + n + " queued lock() failed after " + lastMillis
          + " ms (watchdog 1 s)");
      assertTrue(lastMillis < 4_000, "the last of " + n + " queued lock() calls failed "
          + lastMillis + " ms into the outage (watchdog timeout 1 s)");
    }
  }

  /**
   * Attack: permits leaking on exceptions. Acquisitions whose script fails (the key holds a
   * string: WRONGTYPE), interrupted lockInterruptibly() while queued for a permit, and no-wait
   * tryLock() without a permit: afterwards every permit is back and a lock is taken at once.
   */
  @Test
  void acquisitionPermits_surviveScriptErrorsAndInterrupts() throws Exception {
    LockClient client = clients.create(direct, LockClientConfig.POOL_MAX_SIZE, "4",
        LockClientConfig.TIMEOUT, "500ms");
    RedisTopology topology = Clients.engine(client).topology();
    int permits = 4 - RedisTopology.reserve(4);
    redis.server().withAdmin(j -> j.set("wrongtype", "x"));
    DistributedLock broken = client.getLock("wrongtype");
    for (int i = 0; i < 20; i++) {
      try {
        broken.tryLock(100, TimeUnit.MILLISECONDS);
      } catch (RuntimeException expected) {
        // the script fails on a string key
      }
    }
    // Take every permit, then interrupt threads queued for one.
    for (int i = 0; i < permits; i++) {
      assertTrue(topology.enterAcquisition(0, false));
    }
    try {
      DistributedLock free = client.getLock("free");
      List<Thread> queued = new ArrayList<>();
      AtomicInteger interrupted = new AtomicInteger();
      for (int i = 0; i < 6; i++) {
        queued.add(start("queued-" + i, () -> {
          try {
            free.lockInterruptibly();
            free.unlock();
          } catch (InterruptedException e) {
            interrupted.incrementAndGet();
          }
        }));
      }
      Await.until(Duration.ofSeconds(20), () -> topology.acquisitionsQueued() >= 1,
          "acquisitions queue for a permit");
      queued.forEach(Thread::interrupt);
      for (Thread t : queued) {
        t.join(20_000);
        assertFalse(t.isAlive());
      }
      assertEquals(6, interrupted.get());
      assertFalse(free.tryLock(), "no permit: a single try is refused");
    } finally {
      for (int i = 0; i < permits; i++) {
        topology.leaveAcquisition();
      }
    }
    for (int i = 0; i < permits; i++) {
      assertTrue(topology.enterAcquisition(0, false), "permit " + i + " leaked");
    }
    for (int i = 0; i < permits; i++) {
      topology.leaveAcquisition();
    }
    assertEquals(0, topology.acquisitionsQueued());
    DistributedLock lock = client.getLock("after");
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  /**
   * Attack: a LockHold acquireAsync cancelled while queued behind a local head. The cancelled
   * acquisition leaves the queue without the lock, the waiters behind it still get the lock in
   * turn once it is released, and nothing stays held.
   */
  @Test
  void acquireAsync_cancelledWhileQueued_waitersBehindStillGetTheLock() throws Exception {
    LockClient client = clients.create(direct);
    DistributedLock lock = client.getLock("async-cancel");
    LockHold first = lock.acquire(null, null);
    List<CompletableFuture<LockHold>> queued = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      queued.add(lock.acquireAsync(Duration.ofSeconds(60), null).toCompletableFuture());
    }
    LockEngine engine = Clients.engine(client);
    Await.until(Duration.ofSeconds(20), () -> engine.waitingThreads() >= 4,
        "four asynchronous acquisitions wait");
    assertTrue(queued.get(0).cancel(true));
    assertTrue(queued.get(2).cancel(true));
    first.release();
    // The executor's threads joined the queue in no set order: take them as they come.
    List<CompletableFuture<LockHold>> left = new ArrayList<>(List.of(queued.get(1),
        queued.get(3)));
    while (!left.isEmpty()) {
      LockHold h = (LockHold) CompletableFuture.anyOf(left.toArray(new CompletableFuture<?>[0]))
          .get(30, TimeUnit.SECONDS);
      assertNotNull(h);
      assertTrue(h.isHeld());
      left.removeIf(f -> f.isDone() && f.join() == h);
      h.release();
    }
    Await.until(Duration.ofSeconds(20), () -> engine.waitingThreads() == 0, "nobody waits");
    assertFalse(lock.isLocked(), "a cancelled acquisition left the lock held");
  }

  /**
   * Attack: acquireAsync cancelled at the moment the holder releases (the handoff may be claimed
   * for the cancelled acquisition, which then gives the hold back). Twenty rounds: every
   * acquisition that was not cancelled gets the lock in turn, and the lock ends free.
   */
  @Test
  void acquireAsync_cancelledWhileHandedOver_lockPassesOnAndEndsFree() throws Exception {
    LockClient client = clients.create(direct);
    DistributedLock lock = client.getLock("async-cancel-race");
    LockEngine engine = Clients.engine(client);
    for (int round = 0; round < 20; round++) {
      LockHold first = lock.acquire(null, null);
      List<CompletableFuture<LockHold>> queued = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        queued.add(lock.acquireAsync(Duration.ofSeconds(60), null).toCompletableFuture());
      }
      Await.until(Duration.ofSeconds(20), () -> engine.waitingThreads() >= 3,
          "three asynchronous acquisitions wait");
      Thread canceller = start("cancel", () -> queued.get(0).cancel(true));
      first.release();
      canceller.join(20_000);
      List<CompletableFuture<LockHold>> left = new ArrayList<>(queued.subList(1, 3));
      if (!queued.get(0).isCancelled()) {
        left.add(queued.get(0)); // completed before the cancel
      }
      while (!left.isEmpty()) {
        LockHold h = (LockHold) CompletableFuture.anyOf(
            left.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
        assertTrue(h.isHeld(), "round " + round);
        left.removeIf(f -> f.isDone() && !f.isCompletedExceptionally() && f.join() == h);
        h.release();
      }
      Await.until(Duration.ofSeconds(20), () -> engine.waitingThreads() == 0, "nobody waits");
      assertFalse(lock.isLocked(), "round " + round + ": the lock stayed held");
    }
  }

  /**
   * Attack: the reserve is said to keep renewals from starving, but queries take connections
   * without a permit too and their number has no bound (threads polling {@code isLocked()}).
   * 400 threads poll through a proxy adding 10 ms per reply on a pool of 4: the pool's queue is
   * about a second long, longer than the holder's lease of 1 s, and its renewal waits in it.
   * Fixed: queries take an acquisition permit, so the reserve stays free for renewals.
   */
  @Test
  void renewal_behindManyPollingThreads_holdIsKept() throws Exception {
    try (dev.holdfast.testing.FaultProxy proxy =
        new dev.holdfast.testing.FaultProxy(redis.server().port())) {
      LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri()),
          LockClientConfig.POOL_MAX_SIZE, "4", LockClientConfig.TIMEOUT, "2s",
          LockClientConfig.WATCHDOG_TIMEOUT, "1s");
      LossRecorder losses = LossRecorder.on(client);
      DistributedLock held = client.getLock("renewed");
      held.lock();
      try {
        proxy.delay(Duration.ofMillis(10));
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> pollers = new ArrayList<>();
        DistributedLock polled = client.getLock("polled");
        for (int i = 0; i < 400; i++) {
          pollers.add(start("poller-" + i, () -> {
            while (!stop.get()) {
              try {
                polled.isLocked();
              } catch (RuntimeException e) {
                // counted by the holder's outcome only
              }
            }
          }));
        }
        Thread.sleep(6_000);
        stop.set(true);
        for (Thread t : pollers) {
          t.join(30_000);
        }
        proxy.delay(Duration.ZERO);
        assertEquals(0, losses.count(), "holds reported lost: " + losses);
        assertTrue(held.isHeldByCurrentThread(), "the live holder lost its lock");
      } finally {
        if (held.isHeldByCurrentThread()) {
          held.unlock();
        }
      }
    }
  }

  /**
   * Attack: a stale local-handoff flag after a holder that is lost rather than released: each
   * thread takes the lock with a fixed lease of 300 ms (as head with others queued, so the
   * next head is not signalled) and keeps its thread alive past the lease without unlocking.
   * The key expires without an unlock message; the next local waiter must take it soon after.
   */
  @Test
  void expiredHolder_nextLocalWaiterAcquiresSoonAfterExpiry() throws Exception {
    LockClient client = clients.create(direct);
    DistributedLock lock = client.getLock("expired-holder");
    int n = 5;
    ConcurrentLinkedQueue<Long> acquiredAt = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      threads.add(start("x-" + i, () -> {
        try {
          go.await();
          lock.lock(300, TimeUnit.MILLISECONDS);
          acquiredAt.add(System.nanoTime());
          Thread.sleep(n * 1_500L); // alive, never unlocks: the lease runs out
        } catch (Throwable e) {
          failures.add(e);
        }
      }));
    }
    go.countDown();
    Await.until(Duration.ofSeconds(60), () -> acquiredAt.size() == n, "all took it in turn");
    assertEquals(List.of(), List.copyOf(failures));
    List<Long> times = acquiredAt.stream().sorted().toList();
    long worst = 0;
    List<Long> intervals = new ArrayList<>();
    for (int i = 1; i < times.size(); i++) {
      worst = Math.max(worst, times.get(i) - times.get(i - 1));
      intervals.add(TimeUnit.NANOSECONDS.toMillis(times.get(i) - times.get(i - 1)));
    }
    long worstMillis = TimeUnit.NANOSECONDS.toMillis(worst);
    System.out.println("expired holders: intervals between takers " + intervals
        + " ms (lease 300 ms)");
    assertTrue(worstMillis < 300 + 700, "a local waiter took the lock " + worstMillis
        + " ms after the previous holder (lease 300 ms)");
    threads.forEach(Thread::interrupt);
  }

  /**
   * Attack: two names sharing a channel ({@code a} and {@code {a}}), each with a local queue of
   * three threads while another client holds both. Releases of each name let every waiter of
   * both names take its lock in turn (a message on the shared channel wakes the head of each
   * entry, never starving one queue).
   */
  @Test
  void sharedChannel_queuesOnBothNames_allWaitersAcquire() throws Exception {
    LockClient holderClient = clients.create(direct);
    LockClient client = clients.create(direct);
    DistributedLock a = holderClient.getLock("a");
    DistributedLock braced = holderClient.getLock("{a}");
    a.lock();
    braced.lock();
    AtomicInteger done = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    List<Thread> threads = new ArrayList<>();
    for (String name : List.of("a", "{a}")) {
      DistributedLock l = client.getLock(name);
      for (int i = 0; i < 3; i++) {
        threads.add(start(name + "-" + i, () -> {
          try {
            if (l.tryLock(30, TimeUnit.SECONDS)) {
              l.unlock();
              done.incrementAndGet();
            }
          } catch (Throwable e) {
            failures.add(e);
          }
        }));
      }
    }
    for (Thread t : threads) {
      Await.until(Duration.ofSeconds(20), () -> inFrame(t, "WaitEntry$Waiter.await"),
          "every thread waits");
    }
    a.unlock();
    Await.until(Duration.ofSeconds(20), () -> done.get() == 3, "the waiters of a took it");
    braced.unlock();
    for (Thread t : threads) {
      t.join(30_000);
    }
    assertEquals(List.of(), List.copyOf(failures));
    assertEquals(6, done.get());
  }

  /**
   * Attack: heads timing out or interrupted at the moment of a handoff. Eight threads of one
   * client loop on one lock with short timed waits and lockInterruptibly(), a chaos thread
   * interrupts them at random, each section lasts about a millisecond. Afterwards: no overlap,
   * no loss, no unexpected failure, nobody left waiting, the lock free (no grant stranded), and
   * the lock is still taken at once by a fresh thread.
   */
  @Test
  void timeoutsAndInterruptsAtHandoff_noOverlapNoStrandedGrant() throws Exception {
    LockClient client = clients.create(direct);
    LossRecorder losses = LossRecorder.on(client);
    DistributedLock lock = client.getLock("chaos");
    dev.holdfast.testing.ExclusionProbe probe = new dev.holdfast.testing.ExclusionProbe();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicInteger sections = new AtomicInteger();
    List<Thread> workers = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      int id = i;
      workers.add(start("chaos-" + i, () -> {
        java.util.Random random = new java.util.Random(id);
        while (!stop.get()) {
          boolean got = false;
          try {
            if (random.nextBoolean()) {
              got = lock.tryLock(1 + random.nextInt(15), TimeUnit.MILLISECONDS);
            } else {
              lock.lockInterruptibly();
              got = true;
            }
          } catch (InterruptedException e) {
            continue;
          } catch (Throwable e) {
            failures.add(e);
            continue;
          }
          if (got) {
            probe.enter();
            sections.incrementAndGet();
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
            probe.exit();
            Thread.interrupted(); // an interrupt meant for the wait
            try {
              lock.unlock();
            } catch (Throwable e) {
              failures.add(e);
            }
          }
        }
      }));
    }
    Thread chaos = start("interrupter", () -> {
      java.util.Random random = new java.util.Random(99);
      while (!stop.get()) {
        workers.get(random.nextInt(workers.size())).interrupt();
        java.util.concurrent.locks.LockSupport.parkNanos(random.nextInt(3_000_000));
      }
    });
    Thread.sleep(8_000);
    stop.set(true);
    chaos.join(10_000);
    for (Thread t : workers) {
      t.interrupt();
      t.join(30_000);
      assertFalse(t.isAlive(), t.getName() + " still waits");
    }
    assertEquals(List.of(), failures.stream().limit(3).toList(), failures.size() + " failures");
    assertEquals(0, probe.overlaps(), "two threads held the lock at once");
    assertEquals(0, losses.count(), "holds reported lost: " + losses);
    assertTrue(sections.get() > 0);
    LockEngine engine = Clients.engine(client);
    Await.until(Duration.ofSeconds(20), () -> engine.waitingThreads() == 0, "nobody waits");
    assertFalse(lock.isLocked(), "a grant was stranded: the lock stays held");
    assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
    lock.unlock();
    System.out.println("chaos: " + sections.get() + " sections");
  }

  /**
   * Attack: the "free but nobody acquires" window after a holder with a stale local-handoff
   * flag ends without a release of this client: it keeps the lock briefly (unlockAfter) so the
   * key expires without an unlock message. The waiters behind it must each get it soon after
   * it expires, not a park of a second per head change.
   */
  @Test
  void staleHandedLocally_holdAtLeast_nextWaitersAcquireSoonAfterExpiry() throws Exception {
    LockClient client = clients.create(direct);
    RedisLock lock = (RedisLock) client.getLock("stale-flag");
    AtomicLong worstGap = new AtomicLong();
    AtomicLong lastEnd = new AtomicLong(System.nanoTime());
    int n = 5;
    List<Thread> threads = new ArrayList<>();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    CountDownLatch go = new CountDownLatch(1);
    for (int i = 0; i < n; i++) {
      threads.add(start("w-" + i, () -> {
        try {
          go.await();
          lock.lock();
          long now = System.nanoTime();
          worstGap.accumulateAndGet(now - lastEnd.get(), Math::max);
          // keep it 200 ms more: the key expires, no unlock message
          lastEnd.set(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200));
          lock.unlockAfter(200);
        } catch (Throwable e) {
          failures.add(e);
        }
      }));
    }
    lastEnd.set(System.nanoTime());
    go.countDown();
    for (Thread t : threads) {
      t.join(60_000);
    }
    assertEquals(List.of(), List.copyOf(failures));
    long gapMillis = TimeUnit.NANOSECONDS.toMillis(worstGap.get());
    System.out.println("worst free-but-nobody-acquires gap after a kept lock: " + gapMillis
        + " ms");
    assertTrue(gapMillis < 900, "the lock was free " + gapMillis + " ms before a local waiter "
        + "took it");
  }
}
