package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** The fair lock on one Redis server: arrival order across clients, leaving, dead waiters. */
class FairLockTest {
  private static final String QUEUE = "redisson_lock_queue:{fair}";
  private static final String TIMEOUTS = "redisson_lock_timeout:{fair}";

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @BeforeEach
  void setUp() {
    redis.flushAll();
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private LockClient client(String... extra) {
    return clients.create(Map.of("holdfast.redis.address", redis.server().uri()), extra);
  }

  private static List<String> queue() {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.lrange(QUEUE, 0, -1);
    }
  }

  private static void awaitQueue(int size) {
    Await.until(Duration.ofSeconds(10), () -> queue().size() == size,
        "queue of " + size + " waiters");
  }

  /** A waiter that, once it holds the lock, records {@code label} and releases it. */
  private Future<?> waiter(DistributedLock lock, String label, ConcurrentLinkedQueue<String> order) {
    return threads.submit(() -> {
      lock.lock();
      try {
        order.add(label);
      } finally {
        lock.unlock();
      }
      return null;
    });
  }

  @Test
  void waitersFromTwoClients_acquireInTheOrderTheyStartedWaiting() throws Exception {
    LockClient a = client();
    LockClient b = client();
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    ConcurrentLinkedQueue<String> order = new ConcurrentLinkedQueue<>();
    List<String> started = new ArrayList<>();
    List<Future<?>> waiters = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      LockClient c = i % 3 == 1 ? a : b; // b, a, b, b, a, b: not simply alternating
      String label = "w" + i;
      waiters.add(waiter(c.getFairLock("fair"), label, order));
      started.add(label);
      awaitQueue(i + 1);
    }
    holder.unlock();
    for (Future<?> w : waiters) {
      w.get(20, TimeUnit.SECONDS);
    }
    assertEquals(started, new ArrayList<>(order));
    assertEquals(List.of(), queue());
    assertFalse(holder.isLocked());
  }

  @Test
  void freeLock_withALiveWaiterAhead_refusesANewcomer() throws Exception {
    LockClient a = client();
    try (Jedis jedis = redis.server().admin()) {
      long now = Long.parseLong(jedis.time().get(0)) * 1000;
      jedis.zadd(TIMEOUTS, now + 60_000, "someone:1");
      jedis.rpush(QUEUE, "someone:1");
    }
    DistributedLock lock = a.getFairLock("fair");
    redis.server().withAdmin(Jedis::configResetStat);
    assertFalse(lock.tryLock());
    String stats = redis.server().withAdmin(j -> j.info("commandstats"));
    assertTrue(stats.contains("cmdstat_evalsha:calls=1,"),
        "a single try is one script call, without queueing and leaving: " + stats);
    assertFalse(lock.isLocked());
    assertEquals(List.of("someone:1"), queue(), "a failed tryLock() left no entry behind");

    try (Jedis jedis = redis.server().admin()) {
      jedis.lrem(QUEUE, 0, "someone:1");
      jedis.zrem(TIMEOUTS, "someone:1");
    }
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  @Test
  void timedOutWaiter_leavesTheQueueAtOnce_andTheNextIsNotDelayed() throws Exception {
    LockClient a = client();
    LockClient b = client("holdfast.fair.waiter-timeout", "60s"); // parks only until woken
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    Future<Boolean> quitter = threads.submit(() -> b.getFairLock("fair")
        .tryLock(1_500, TimeUnit.MILLISECONDS));
    awaitQueue(1);
    String quitterField = queue().get(0);
    CompletableFuture<Long> acquiredAt = new CompletableFuture<>();
    threads.submit(() -> {
      DistributedLock next = b.getFairLock("fair");
      next.lock();
      acquiredAt.complete(System.nanoTime());
      next.unlock();
      return null;
    });
    awaitQueue(2);

    assertFalse(quitter.get(20, TimeUnit.SECONDS));
    List<String> after = queue();
    assertEquals(1, after.size(), () -> "only the next waiter is left: " + after);
    assertFalse(after.contains(quitterField));

    long released = System.nanoTime();
    holder.unlock();
    long latency = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(20, TimeUnit.SECONDS) - released);
    assertTrue(latency < 2_000, "the next waiter was woken at once: " + latency + "ms");
  }

  @Test
  void interruptedWaiter_leavesTheQueueAtOnce() throws Exception {
    LockClient a = client();
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    CompletableFuture<Thread> waiting = new CompletableFuture<>();
    Future<?> waiter = threads.submit(() -> {
      waiting.complete(Thread.currentThread());
      a.getFairLock("fair").lockInterruptibly();
      return null;
    });
    awaitQueue(1);
    waiting.get().interrupt();

    ExecutionException e = assertThrows(ExecutionException.class,
        () -> waiter.get(20, TimeUnit.SECONDS));
    assertInstanceOf(InterruptedException.class, e.getCause());
    assertEquals(List.of(), queue());
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(0, jedis.zcard(TIMEOUTS));
    }
    holder.unlock();
  }

  @Test
  void waiterOfAClosedClient_stopsBlockingWithinTheWaiterTimeout() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "1s");
    LockClient dying = client("holdfast.fair.waiter-timeout", "1s");
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    Future<?> dead = threads.submit(() -> {
      dying.getFairLock("fair").lock();
      return null;
    });
    awaitQueue(1);
    CompletableFuture<Long> acquiredAt = new CompletableFuture<>();
    threads.submit(() -> {
      DistributedLock next = a.getFairLock("fair");
      next.lock();
      acquiredAt.complete(System.nanoTime());
      next.unlock();
      return null;
    });
    awaitQueue(2);
    dying.close(); // its waiter stops refreshing, without leaving the queue
    assertThrows(ExecutionException.class, () -> dead.get(20, TimeUnit.SECONDS));
    assertEquals(2, queue().size(), "a closed client's waiter stays until its deadline");

    long released = System.nanoTime();
    holder.unlock(); // wakes the dead head, which never comes
    long latency = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(20, TimeUnit.SECONDS) - released);
    assertTrue(latency < 3_000, "the dead waiter blocked at most its 1s timeout: " + latency);
    assertEquals(List.of(), queue());
  }

  @Test
  void foreignWaiterWithAPastDeadline_isDroppedWhereverItStands() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "1s");
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    long now;
    try (Jedis jedis = redis.server().admin()) {
      now = Long.parseLong(jedis.time().get(0)) * 1000;
      jedis.zadd(TIMEOUTS, now + 60_000, "alive:1");
      jedis.rpush(QUEUE, "alive:1");
      jedis.zadd(TIMEOUTS, now - 1, "dead:1");
      jedis.rpush(QUEUE, "dead:1");
    }
    Future<?> waiter = threads.submit(() -> {
      a.getFairLock("fair").tryLock(200, TimeUnit.MILLISECONDS);
      return null;
    });
    waiter.get(20, TimeUnit.SECONDS);
    assertEquals(List.of("alive:1"), queue(), "the dead entry behind a live one is gone");
    holder.unlock();
  }

  @Test
  void deadHeadWhileTheLockIsFree_passesItsTurnWhenItsDeadlinePasses() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "60s");
    long deadline;
    try (Jedis jedis = redis.server().admin()) {
      deadline = Long.parseLong(jedis.time().get(0)) * 1000 + 2_000;
      jedis.zadd(TIMEOUTS, deadline, "dead:1");
      jedis.rpush(QUEUE, "dead:1");
    }
    DistributedLock lock = a.getFairLock("fair");
    long start = System.nanoTime();
    assertTrue(lock.tryLock(20, TimeUnit.SECONDS));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    lock.unlock();
    assertTrue(waited >= 500 && waited < 5_000, "waited for the dead head's turn to pass "
        + "(parked until its deadline, not for the 20s poll of a 60s timeout): " + waited + "ms");
  }

  @Test
  void reentrant_countsSections_andFreesTheLockAtTheLast() throws Exception {
    LockClient a = client();
    LockClient b = client();
    DistributedLock lock = a.getFairLock("fair");
    lock.lock();
    assertTrue(lock.tryLock());
    assertEquals(2, lock.getHoldCount());
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertTrue(lock.isLocked());
    assertFalse(threads.submit(() -> b.getFairLock("fair").tryLock()).get(20, TimeUnit.SECONDS));
    lock.unlock();
    assertFalse(lock.isLocked());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(threads.submit(() -> {
      DistributedLock theirs = b.getFairLock("fair");
      boolean got = theirs.tryLock();
      theirs.unlock();
      return got;
    }).get(20, TimeUnit.SECONDS));
  }

  @Test
  void watchdog_keepsTheFairLockPastItsTimeout() throws Exception {
    LockClient a = client("holdfast.watchdog-timeout", "1s");
    LockClient b = client();
    DistributedLock lock = a.getFairLock("fair");
    lock.lock();
    Future<Boolean> other = threads.submit(() -> b.getFairLock("fair")
        .tryLock(3_000, TimeUnit.MILLISECONDS));
    assertFalse(other.get(20, TimeUnit.SECONDS), "held through three watchdog timeouts");
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertEquals(List.of(), queue());
  }

  @Test
  void lease_expires_andTheNextWaiterTakesIt() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "60s");
    LockClient b = client("holdfast.fair.waiter-timeout", "60s");
    a.getFairLock("fair").lock(700, TimeUnit.MILLISECONDS);
    Future<Boolean> next = threads.submit(() -> {
      DistributedLock theirs = b.getFairLock("fair");
      boolean got = theirs.tryLock(10, TimeUnit.SECONDS);
      theirs.unlock();
      return got;
    });
    assertTrue(next.get(20, TimeUnit.SECONDS), "parked until the lease ran out, then took it");
  }

  /**
   * Holders whose fixed leases run out and are never unlocked: nothing is published when a
   * lease ends, so each waiter must have parked no longer than the lease of whoever holds (or is
   * about to hold) the lock, even with a waiter timeout whose third is far longer.
   */
  @Test
  void expiringLeases_passTheLockDownTheQueueInOrder_withALongWaiterTimeout() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "5m");
    LockClient b = client("holdfast.fair.waiter-timeout", "5m");
    long lease = 700;
    long slack = 2_500;
    int waiters = 8;
    CountDownLatch end = new CountDownLatch(1);
    ConcurrentLinkedQueue<Integer> order = new ConcurrentLinkedQueue<>();
    long[] acquiredAt = new long[waiters + 1];
    List<Future<?>> running = new ArrayList<>();
    try {
      for (int i = 0; i <= waiters; i++) {
        int label = i;
        DistributedLock lock = (i % 2 == 0 ? a : b).getFairLock("fair");
        // The first holder's lease lasts while the others queue; then each holds 700ms.
        long own = i == 0 ? 5_000 : lease;
        CompletableFuture<Void> holding = new CompletableFuture<>();
        running.add(threads.submit(() -> {
          lock.lock(own, TimeUnit.MILLISECONDS);
          acquiredAt[label] = System.nanoTime();
          order.add(label);
          holding.complete(null);
          end.await(); // never unlocks; a fresh thread each, so no field is reused
          return null;
        }));
        if (i == 0) {
          holding.get(20, TimeUnit.SECONDS);
        } else {
          awaitQueue(i);
        }
      }
      try {
        Await.until(Duration.ofSeconds(5 + waiters * (lease + slack) / 1000),
            () -> order.size() == waiters + 1, "every waiter got the lock");
      } catch (AssertionError e) {
        throw new AssertionError("only " + order + " got the lock in time; queue " + queue(), e);
      }
      List<Integer> expected = new ArrayList<>();
      for (int i = 0; i <= waiters; i++) {
        expected.add(i);
      }
      assertEquals(expected, new ArrayList<>(order));
      for (int i = 2; i <= waiters; i++) {
        long gap = TimeUnit.NANOSECONDS.toMillis(acquiredAt[i] - acquiredAt[i - 1]);
        assertTrue(gap < lease + slack, "waiter " + i + " took the lock " + gap
            + "ms after its predecessor, whose lease was " + lease + "ms");
      }
      assertEquals(List.of(), queue());
    } finally {
      end.countDown();
    }
  }

  /** Messages published to one channel, heard by a plain Jedis subscriber. */
  private final class Listener implements AutoCloseable {
    private final java.util.concurrent.BlockingQueue<String> messages =
        new java.util.concurrent.LinkedBlockingQueue<>();
    private final redis.clients.jedis.JedisPubSub pubSub = new redis.clients.jedis.JedisPubSub() {
      @Override
      public void onMessage(String channel, String message) {
        messages.add(message);
      }
    };

    Listener(String channel) {
      threads.submit(() -> {
        try (Jedis jedis = redis.server().admin()) {
          jedis.subscribe(pubSub, channel);
        }
        return null;
      });
      Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
          channel) > 0, "listening on " + channel);
    }

    String next() throws InterruptedException {
      return messages.poll(5, TimeUnit.SECONDS);
    }

    @Override
    public void close() {
      pubSub.unsubscribe();
    }
  }

  private static void enqueue(String field, long deadlineFromNowMillis) {
    try (Jedis jedis = redis.server().admin()) {
      long now = Long.parseLong(jedis.time().get(0)) * 1000;
      jedis.zadd(TIMEOUTS, now + deadlineFromNowMillis, field);
      jedis.rpush(QUEUE, field);
    }
  }

  @Test
  void headTakingTheLock_wakesTheWaiterBehindIt() throws Exception {
    LockClient a = client();
    DistributedLock lock = a.getFairLock("fair");
    enqueue(a.getClientId() + ":" + Thread.currentThread().getId(), 60_000);
    enqueue("next:1", 60_000);
    try (Listener next = new Listener("redisson_lock__channel:{fair}:next:1")) {
      assertTrue(lock.tryLock(), "the head takes the free lock");
      assertEquals("0", next.next(), "the new head is told to re-poll and learn this lease");
    }
    assertEquals(List.of("next:1"), queue());
    lock.unlock();
  }

  @Test
  void headLeavingWhileTheLockIsHeld_wakesTheNewHead() throws Exception {
    LockClient a = client("holdfast.fair.waiter-timeout", "60s");
    LockClient b = client("holdfast.fair.waiter-timeout", "60s");
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    CountDownLatch queued = new CountDownLatch(1);
    Future<Boolean> quitter = threads.submit(() -> {
      queued.countDown();
      return b.getFairLock("fair").tryLock(1_500, TimeUnit.MILLISECONDS);
    });
    queued.await();
    awaitQueue(1);
    enqueue("next:1", 60_000);
    try (Listener next = new Listener("redisson_lock__channel:{fair}:next:1")) {
      assertFalse(quitter.get(20, TimeUnit.SECONDS));
      assertEquals("0", next.next(), "the new head learns the holder's lease, not its own park");
    }
    assertEquals(List.of("next:1"), queue());
    holder.unlock();
  }

  @Test
  void nestedUnlockThatShortensTheLease_wakesTheHead() throws Exception {
    LockClient a = client();
    DistributedLock holder = a.getFairLock("fair");
    holder.lock(5, TimeUnit.SECONDS);
    enqueue("next:1", 60_000);
    holder.lock(60, TimeUnit.SECONDS); // the head is told about a minute
    try (Listener next = new Listener("redisson_lock__channel:{fair}:next:1")) {
      holder.unlock(); // back to the outer section's few seconds
      assertEquals("0", next.next(), "the head learns that the lock expires sooner");
    }
    try (Jedis jedis = redis.server().admin()) {
      assertTrue(jedis.pttl("fair") <= 5_000, "the outer section's lease: " + jedis.pttl("fair"));
    }
    holder.unlock();
  }

  @Test
  void unlock_wakesTheHeadWaiter_notAfterItsPark() throws Exception {
    LockClient a = client();
    LockClient b = client("holdfast.fair.waiter-timeout", "60s"); // would park 20s unwoken
    DistributedLock holder = a.getFairLock("fair");
    holder.lock();
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getFairLock("fair"));
    awaitQueue(1);
    String field = queue().get(0);
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_lock__channel:{fair}:" + field) > 0, "waiter subscribed to its own channel");
    long released = System.nanoTime();
    holder.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by the unlock message: " + latency + "ms");
  }

  @Test
  void forceUnlock_wakesTheHeadWaiter() throws Exception {
    LockClient a = client();
    LockClient b = client("holdfast.fair.waiter-timeout", "60s");
    a.getFairLock("fair").lock();
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getFairLock("fair"));
    awaitQueue(1);
    String field = queue().get(0);
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_lock__channel:{fair}:" + field) > 0, "waiter subscribed to its own channel");
    long released = System.nanoTime();
    assertTrue(b.getFairLock("fair").forceUnlock());
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by forceUnlock's message: " + latency + "ms");
  }
}
