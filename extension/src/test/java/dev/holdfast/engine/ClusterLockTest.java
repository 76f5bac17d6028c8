package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.ExclusionProbe;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.util.JedisClusterCRC16;

/** Locks on a 3-master, 3-replica Redis Cluster with sharded pub/sub. */
class ClusterLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 1);

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
  void create_clusterRefusesTheCredentials_failsAtOnce_namingSeedsAndCause() {
    Map<String, String> wrong = new HashMap<>(config);
    wrong.put("holdfast.redis.username", "nobody");
    wrong.put("holdfast.redis.password", "not-the-password");
    LockException e = assertThrows(LockException.class, () -> clients.create(wrong));
    String message = e.getMessage();
    assertTrue(message.startsWith("Cannot connect to Redis (cluster via ["), message);
    assertTrue(message.contains("authentication failed (WRONGPASS"), message);
    assertTrue(message.contains("Check holdfast.redis.nodes"), message);
    assertFalse(message.contains("not-the-password"), message);
  }

  @Test
  void locksSpreadOverSlots_workFromTwoClients() {
    LockClient a = clients.create(config);
    LockClient b = clients.create(config);
    Set<Integer> slots = new HashSet<>();
    for (int i = 0; i < 30; i++) {
      String name = "job-" + i;
      slots.add(JedisClusterCRC16.getSlot(name));
      DistributedLock mine = a.getLock(name);
      mine.lock();
      assertFalse(b.getLock(name).tryLock(), name);
      mine.unlock();
      assertTrue(b.getLock(name).tryLock(), name);
      b.getLock(name).unlock();
    }
    assertTrue(slots.size() > 20);
  }

  @Test
  void hashTaggedNames_keepKeyAndChannelInOneSlot() {
    LockClient a = clients.create(config);
    DistributedLock lock = a.getLock("order:{42}:payment");
    lock.lock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @Test
  void waiter_usesShardedPubSubOnTheKeysNode_andWakesPromptly() throws Exception {
    LockClient a = clients.create(config);
    LockClient b = clients.create(config);
    DistributedLock lock = a.getLock("sharded");
    lock.lock();
    Future<Boolean> waiter = threads.submit(() -> b.getLock("sharded").tryLock(20, TimeUnit.SECONDS));
    RedisServer owner = redis.clusterSetup().masterForKey("sharded");
    Await.until(Duration.ofSeconds(5), () -> shardChannels(owner).contains(
        "redisson_lock__channel:{sharded}"), "SSUBSCRIBE on the owning master");
    try (Jedis jedis = owner.admin()) {
      assertTrue(jedis.pubsubChannels("*").isEmpty(), "no classic SUBSCRIBE broadcast");
    }
    long released = System.nanoTime();
    lock.unlock();
    assertTrue(waiter.get(10, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - released < TimeUnit.SECONDS.toNanos(2), "woken by message");
    Await.until(Duration.ofSeconds(5), () -> shardChannels(owner).isEmpty(), "unsubscribed");
  }

  @Test
  void watchdog_renewsLocksInEverySlot() {
    LockClient a = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    List<DistributedLock> held = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      DistributedLock lock = a.getLock("renewed-" + i);
      lock.lock();
      held.add(lock);
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(2_000);
    Await.until(Duration.ofSeconds(10), () -> {
      for (DistributedLock lock : held) {
        assertTrue(lock.isLocked(), lock.getName() + " expired despite the watchdog");
      }
      return System.nanoTime() > deadline; // over three watchdog timeouts
    }, "locks kept across three timeouts");
    held.forEach(DistributedLock::unlock);
  }

  @Test
  void mutualExclusion_underContention() throws Exception {
    List<LockClient> all = List.of(clients.create(config), clients.create(config));
    ExclusionProbe probe = new ExclusionProbe();
    AtomicInteger done = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> workers = new ArrayList<>();
    for (LockClient c : all) {
      for (int t = 0; t < 3; t++) {
        workers.add(threads.submit(() -> {
          start.await();
          DistributedLock lock = c.getLock("contended");
          for (int r = 0; r < 20; r++) {
            lock.lock();
            try {
              probe.enter();
              Thread.yield();
              done.incrementAndGet();
              probe.exit();
            } finally {
              lock.unlock();
            }
          }
          return null;
        }));
      }
    }
    start.countDown();
    for (Future<?> w : workers) {
      w.get(60, TimeUnit.SECONDS);
    }
    assertEquals(0, probe.overlaps());
    assertEquals(120, done.get());
  }

  @Test
  void failover_waiterFollowsTheSlotToItsNewMaster() throws Exception {
    LockClient a = clients.create(config);
    LockClient b = clients.create(config);
    DistributedLock lock = a.getLock("migrating");
    lock.lock(); // 30 s lease: only a message wakes the waiter early
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getLock("migrating"));
    RedisServer before = redis.clusterSetup().masterForKey("migrating");
    Await.until(Duration.ofSeconds(5), () -> !shardChannels(before).isEmpty(), "subscribed");

    RedisServer after = redis.clusterSetup().failoverMasterOf("migrating");

    // Sharded unlocks are delivered on the slot's primary only, although the demoted one still
    // accepts SSUBSCRIBE: the waiter must end up on the new primary, even when the first topology
    // refresh still names the old one.
    Await.until(Duration.ofSeconds(15), () -> shardChannels(after).contains(
        "redisson_lock__channel:{migrating}"), "waiter resubscribed on the new master");
    long released = System.nanoTime();
    lock.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by the new master's message: " + latency + "ms");
  }

  private static List<String> shardChannels(RedisServer node) {
    try (Jedis jedis = node.admin()) {
      return jedis.pubsubShardChannels("*");
    }
  }
}
