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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.JedisCluster;

/**
 * The fair lock on Redis Cluster: the queue, the scores and the per-waiter channels share the
 * lock's slot, and unlocks reach the head waiter by sharded pub/sub.
 */
class FairLockClusterTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", redis.clusterSetup().seedNodes(),
        "holdfast.fair.waiter-timeout", "60s"); // waiters park 20s unless woken
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private int queueSize(String name) {
    try (JedisCluster jedis = new JedisCluster(
        redis.clusterSetup().servers().get(0).hostAndPort())) {
      return (int) jedis.llen("redisson_lock_queue:{" + name + "}");
    }
  }

  @Test
  void waitersAcquireInArrivalOrder_wokenByTheUnlock() throws Exception {
    LockClient a = clients.create(config);
    LockClient b = clients.create(config);
    for (String name : List.of("fair-a", "fair-b", "fair-c")) { // several slots
      DistributedLock holder = a.getFairLock(name);
      holder.lock();
      ConcurrentLinkedQueue<String> order = new ConcurrentLinkedQueue<>();
      List<Future<?>> waiters = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        DistributedLock lock = (i % 2 == 0 ? b : a).getFairLock(name);
        String label = "w" + i;
        waiters.add(threads.submit(() -> {
          lock.lock();
          try {
            order.add(label);
          } finally {
            lock.unlock();
          }
          return null;
        }));
        int size = i + 1;
        Await.until(Duration.ofSeconds(10), () -> queueSize(name) == size, "queued " + size);
      }
      long released = System.nanoTime();
      holder.unlock();
      for (Future<?> w : waiters) {
        w.get(20, TimeUnit.SECONDS);
      }
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
      assertEquals(List.of("w0", "w1", "w2"), new ArrayList<>(order), name);
      assertTrue(millis < 5_000, "each waiter was woken by sharded pub/sub: " + millis + "ms");
      assertFalse(holder.isLocked());
      assertEquals(0, queueSize(name));
    }
  }
}
