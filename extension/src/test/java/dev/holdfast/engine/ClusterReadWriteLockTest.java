package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * A smoke test of the read-write lock on Redis Cluster: every key of a call (hash, markers,
 * readers' timeout keys) in the lock's slot, sharded pub/sub waking waiters, renewals.
 */
class ClusterReadWriteLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", redis.clusterSetup().seedNodes(),
        "holdfast.redis.timeout", "500ms");
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void readersShare_writerWaits_andEachUnlockWakesTheOtherSide() throws Exception {
    for (String name : List.of("catalog", "orders:{42}")) {
      LockClient a = clients.create(config, "holdfast.watchdog-timeout", "600ms");
      LockClient b = clients.create(config);
      DistributedReadWriteLock ours = a.getReadWriteLock(name);
      DistributedReadWriteLock theirs = b.getReadWriteLock(name);
      ours.readLock().lock();
      assertTrue(threads.submit(() -> {
        boolean got = theirs.readLock().tryLock();
        theirs.readLock().unlock();
        return got;
      }).get(10, TimeUnit.SECONDS), "readers share on " + name);

      Future<Long> writer = Waiters.acquireAndRelease(threads, theirs.writeLock());
      String channel = "redisson_rwlock:" + (name.contains("{") ? name : "{" + name + "}");
      RedisServer owner = redis.clusterSetup().masterForKey(name);
      Await.until(Duration.ofSeconds(5), () -> shardChannels(owner).contains(channel),
          "SSUBSCRIBE on the owning master");
      // Outlive the 600 ms watchdog lease several times: renewals keep the read hold.
      assertThrows(TimeoutException.class, () -> writer.get(1_500, TimeUnit.MILLISECONDS),
          "the renewed reader still holds " + name);
      assertTrue(ours.readLock().isHeldByCurrentThread());
      long released = System.nanoTime();
      ours.readLock().unlock();
      assertTrue(Waiters.millisUntilAcquired(writer, released) < 2_000, "writer woken");

      theirs.writeLock().lock();
      Future<Long> reader = Waiters.acquireAndRelease(threads, ours.readLock());
      Await.until(Duration.ofSeconds(5), () -> shardChannels(owner).contains(channel),
          "reader subscribed");
      released = System.nanoTime();
      theirs.writeLock().unlock();
      assertTrue(Waiters.millisUntilAcquired(reader, released) < 2_000, "reader woken");
      try (Jedis jedis = owner.admin()) {
        assertFalse(jedis.exists(name), "released: " + name);
      }
    }
  }

  private static List<String> shardChannels(RedisServer node) {
    try (Jedis jedis = node.admin()) {
      return jedis.pubsubShardChannels("*");
    }
  }
}
