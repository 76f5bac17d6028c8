package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.Jedis;

/**
 * Holdfast's fair lock and Redisson's {@code RFairLock} on the same name: they exclude each other,
 * each one's unlock wakes the other's head waiter on its own channel, and they share one queue.
 */
class RedissonFairLockInteropTest {
  private static final String QUEUE = "redisson_lock_queue:{shared}";

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedissonClient redisson;
  private final ExecutorService threads = Executors.newCachedThreadPool();

  @BeforeAll
  static void startRedisson() {
    Config config = new Config();
    config.useSingleServer().setAddress(redis.server().uri());
    // Redisson lowers every waiter's score by this much at each of its acquisitions (see
    // docs/redisson.md): with its default of 5 minutes, Holdfast waiters would lose their places.
    config.setFairLockWaitTimeout(100);
    redisson = Redisson.create(config);
  }

  @AfterAll
  static void stopRedisson() {
    redisson.shutdown();
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  /** Waiters park up to 20 s between attempts unless woken: a fast acquisition proves the wake. */
  private LockClient holdfast(String waiterTimeout) {
    return clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.fair.waiter-timeout", waiterTimeout));
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

  private static void awaitSubscribed(String field) {
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_lock__channel:{shared}:" + field) > 0, "head waiter subscribed");
  }

  @Test
  void holdfastHolder_excludesRedissonWaiter_andItsUnlockWakesIt() throws Exception {
    DistributedLock ours = holdfast("60s").getFairLock("shared");
    ours.lock();
    RLock theirs = redisson.getFairLock("shared");
    assertFalse(threads.submit(() -> theirs.tryLock()).get(20, TimeUnit.SECONDS));
    assertTrue(theirs.isLocked());

    Future<Long> waiter = Waiters.acquireAndRelease(threads, theirs);
    awaitQueue(1);
    awaitSubscribed(queue().get(0));
    long released = System.nanoTime();
    ours.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "Redisson's waiter woke by our message, not after the 30s "
        + "lease: " + latency + "ms");
    assertEquals(List.of(), queue());
  }

  @Test
  void redissonHolder_excludesHoldfastWaiter_andItsUnlockWakesIt() throws Exception {
    RLock theirs = redisson.getFairLock("shared");
    theirs.lock();
    DistributedLock ours = holdfast("60s").getFairLock("shared");
    assertFalse(ours.tryLock());
    assertTrue(ours.isLocked());

    Future<Long> waiter = Waiters.acquireAndRelease(threads, ours);
    awaitQueue(1);
    awaitSubscribed(queue().get(0));
    long released = System.nanoTime();
    theirs.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by Redisson's message, not the 20s park: "
        + latency + "ms");
    assertFalse(theirs.isLocked());
    assertEquals(List.of(), queue());
  }

  @Test
  void mixedQueue_isServedInArrivalOrder() throws Exception {
    LockClient holdfast = holdfast("10s");
    DistributedLock holder = holdfast.getFairLock("shared");
    holder.lock();
    ConcurrentLinkedQueue<String> order = new ConcurrentLinkedQueue<>();
    List<String> started = new ArrayList<>();
    List<Future<?>> waiters = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      boolean fromRedisson = i % 2 == 0;
      Lock lock = fromRedisson ? redisson.getFairLock("shared") : holdfast.getFairLock("shared");
      String label = (fromRedisson ? "redisson-" : "holdfast-") + i;
      waiters.add(threads.submit(() -> {
        lock.lock();
        try {
          order.add(label);
        } finally {
          lock.unlock();
        }
        return null;
      }));
      started.add(label);
      awaitQueue(i + 1);
    }
    holder.unlock();
    for (Future<?> w : waiters) {
      w.get(20, TimeUnit.SECONDS);
    }
    assertEquals(started, new ArrayList<>(order));
    assertEquals(List.of(), queue());
  }
}
