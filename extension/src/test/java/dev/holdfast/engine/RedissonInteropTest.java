package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
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
 * A service can move from Redisson to Holdfast one instance at a time: on the same lock name both
 * exclude each other and each wakes the other's waiters with its unlock message.
 */
class RedissonInteropTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedissonClient redisson;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private LockClient holdfast;

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
    holdfast = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void holdfastHolder_excludesRedisson_andItsUnlockWakesRedissonWaiter() throws Exception {
    DistributedLock lock = holdfast.getLock("shared");
    lock.lock();
    RLock theirs = redisson.getLock("shared");
    assertFalse(threads.submit(() -> theirs.tryLock()).get(5, TimeUnit.SECONDS));
    assertTrue(theirs.isLocked());

    Future<Long> waiter = Waiters.acquireAndRelease(threads, theirs); // on the same channel
    awaitSubscriber();
    long released = System.nanoTime();
    lock.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "Redisson waiter woke by our message, not the 30 s lease: " + latency);
  }

  @Test
  void redissonHolder_excludesHoldfast_andItsUnlockWakesHoldfastWaiter() throws Exception {
    RLock theirs = redisson.getLock("shared");
    theirs.lock();
    DistributedLock ours = holdfast.getLock("shared");
    assertFalse(ours.tryLock());
    assertTrue(ours.isLocked());
    assertFalse(ours.isHeldByCurrentThread());
    Future<Long> waiter = Waiters.acquireAndRelease(threads, ours);
    awaitSubscriber();
    long released = System.nanoTime();
    theirs.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by Redisson's message, not the 30 s lease: " + latency);
    assertFalse(theirs.isLocked());
  }

  @Test
  void bothLibraries_writeTheSameLayout() {
    holdfast.getLock("layout").lock();
    RLock theirs = redisson.getLock("layout2");
    theirs.lock();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(jedis.type("layout2"), jedis.type("layout"));
      String ourField = jedis.hkeys("layout").iterator().next();
      String theirField = jedis.hkeys("layout2").iterator().next();
      assertTrue(ourField.matches("[0-9a-f-]{36}:\\d+"), ourField);
      assertTrue(theirField.matches("[0-9a-f-]{36}:\\d+"), theirField);
    }
    theirs.unlock();
  }

  private void awaitSubscriber() {
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_lock__channel:{shared}") > 0, "waiter subscribed to the lock channel");
  }
}
