package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisBinary;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisServer;
import dev.holdfast.testing.SlotMigration;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * A Redis 6.2 cluster has no sharded pub/sub: unlocks use {@code PUBLISH} (broadcast over the
 * cluster bus) and waiters {@code SUBSCRIBE} on the key's master.
 */
class LegacyClusterLockTest {
  private static final String REDIS_62 = "redis-server-6.2.6-v5-linux-amd64";

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedisClusterSetup cluster;

  @BeforeAll
  static void startCluster() {
    Optional<Path> binary = RedisBinary.extract(REDIS_62);
    assumeTrue(binary.isPresent() && System.getProperty("os.arch").matches("amd64|x86_64")
        && System.getProperty("os.name").toLowerCase().contains("linux"),
        "needs the linux-amd64 Redis 6.2 binary");
    cluster = RedisClusterSetup.start(binary.get(), 3, 0);
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  void waiter_isWokenByClassicPublish() throws Exception {
    Map<String, String> config = Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes());
    LockClient a = clients.create(config);
    LockClient b = clients.create(config);
    assertFalse(Clients.engine(a).topology().sharded(), "Redis 6.2 has no SPUBLISH");
    DistributedLock lock = a.getLock("legacy");
    lock.lock();
    ExecutorService threads = Executors.newSingleThreadExecutor();
    try {
      Future<Boolean> waiter = threads.submit(() -> b.getLock("legacy").tryLock(20, TimeUnit.SECONDS));
      RedisServer owner = cluster.masterForKey("legacy");
      Await.until(Duration.ofSeconds(5), () -> channels(owner) > 0, "SUBSCRIBE on the key's master");
      long released = System.nanoTime();
      lock.unlock();
      assertTrue(waiter.get(10, TimeUnit.SECONDS));
      assertTrue(System.nanoTime() - released < TimeUnit.SECONDS.toNanos(2), "woken by message");
    } finally {
      threads.shutdownNow();
    }
  }

  /**
   * Issue 15 hole 5 on Redis 6.2, whose renewals go one call per slot with declared keys: while
   * a slot migrates with some of its keys moved, that call gets TRYAGAIN; its holds are then
   * renewed one by one (following ASK), and none is lost.
   */
  @Test
  void slotMigratingWithSomeKeysMoved_itsHoldsAreRenewedOneByOne_andNoneIsLost()
      throws Exception {
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes(),
        "holdfast.redis.timeout", "300ms",
        "holdfast.watchdog-timeout", "3s"));
    LossRecorder lost = LossRecorder.on(client);
    List<DistributedLock> held = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      DistributedLock lock = client.getLock("{legacy-migration}" + i);
      lock.lock();
      held.add(lock);
    }
    int slot = JedisClusterCRC16.getSlot(held.get(0).getName());
    try (SlotMigration migration = cluster.startSlotMigration(slot)) {
      assertEquals(2, migration.moveKeys(held.get(0).getName(), held.get(1).getName()));
      Thread.sleep(7_000); // more than two watchdog timeouts: unrenewed holds would be lost
      assertEquals(0, lost.count(), "holds reported lost: " + lost);
      for (DistributedLock lock : held) {
        assertTrue(lock.isHeldByCurrentThread(), lock.getName() + " was not kept");
      }
      assertTrue(migration.targetHas(held.get(0).getName()), "renewed on the target");
    }
    held.forEach(DistributedLock::unlock);
    assertEquals(0, lost.count(), "holds reported lost: " + lost);
  }

  private static int channels(RedisServer node) {
    try (Jedis jedis = node.admin()) {
      return jedis.pubsubChannels("redisson_lock__channel:*").size();
    }
  }
}
