package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import dev.holdfast.testing.SlotMigration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Attacks on MOVED following and the stale-grant rule of {@code RedisLock.Attempt.opened} (a grant answered after
 * its time was up is undone and tried again when it is a replay or the answer to a call sent
 * more than once) on a Redis 7 cluster of three primaries.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MovedAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisClusterSetup cluster;
  private LockClient client;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    cluster = redis.clusterSetup();
    client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes()));
  }

  /**
   * A fixed lease shorter than a slot migration: the acquisition is refused ({@code TRYAGAIN}:
   * its marker key is new, so the importing node refuses the multi-key script even after
   * {@code ASKING}) until the migration ends, then {@code MOVED} is followed at once — a call
   * sent many times, answered after its lease (counted from its first send) was up. The grant
   * is judged stale, undone and tried again as a new request: the free lock must still be
   * acquired within the wait, with a bounded number of commands, and held in Redis afterwards
   * exactly once (no stale count 1 left under the thread's field).
   */
  @Test
  void leaseShorterThanMigration_staleGrantUndone_freeLockAcquiredOnce() throws Exception {
    DistributedLock lock = client.getLock("{spin}free");
    int slot = JedisClusterCRC16.getSlot(lock.getName());
    SlotMigration migration = cluster.startSlotMigration(slot);
    RedisServer source = migration.source();
    RedisServer target = migration.target();
    long before = commands(source) + commands(target);
    Thread finisher = new Thread(() -> {
      try {
        Thread.sleep(1_500); // longer than the lease below: the point of the probe
      } catch (InterruptedException e) {
        return;
      }
      migration.finish();
    });
    finisher.start();
    long start = System.nanoTime();
    boolean acquired = lock.tryLock(20_000, 1_000, TimeUnit.MILLISECONDS);
    double seconds = (System.nanoTime() - start) / 1e9;
    long calls = commands(source) + commands(target) - before;
    finisher.join();
    System.out.printf("tryLock(20s, 1s) across a migration -> %s after %.2fs, %d commands%n",
        acquired, seconds, calls);
    assertTrue(acquired, "the free lock was acquired once the migration ended");
    try (Jedis jedis = target.admin()) {
      assertEquals(1, jedis.hlen(lock.getName()), "one field");
      assertEquals("1", jedis.hvals(lock.getName()).get(0), "count 1: nothing stale left");
    }
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    try (Jedis jedis = target.admin()) {
      assertFalse(jedis.exists(lock.getName()), "released");
    }
    assertTrue(calls < 500, calls + " commands for one acquisition across a migration");
  }

  /** Commands the node has processed so far (INFO stats), this probe's own INFO included. */
  private static long commands(RedisServer node) {
    String info = node.withAdmin(jedis -> jedis.info("stats"));
    for (String line : info.split("\r?\n")) {
      if (line.startsWith("total_commands_processed:")) {
        return Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
      }
    }
    throw new IllegalStateException("no total_commands_processed in " + info);
  }
}
