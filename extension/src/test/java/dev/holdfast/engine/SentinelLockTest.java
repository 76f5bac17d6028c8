package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/** Locks through Redis Sentinel, before and across a failover. */
class SentinelLockTest {

  @RegisterExtension
  final RedisExtension redis = RedisExtension.sentinel(); // fresh per test: failover is one-way

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private Map<String, String> config() {
    return Map.of("holdfast.redis.mode", "sentinel",
        "holdfast.redis.nodes", redis.sentinelSetup().sentinelNodes(),
        "holdfast.redis.sentinel.master", redis.sentinelSetup().masterName(),
        "holdfast.redis.timeout", "500ms");
  }

  @Test
  void create_masterRefusesTheCredentials_failsAtOnce_namingMasterSentinelsAndCause() {
    // The sentinels take no credentials and know the master; the master refuses the user.
    Map<String, String> config = new HashMap<>(config());
    config.put("holdfast.redis.username", "nobody");
    config.put("holdfast.redis.password", "not-the-password");
    LockException e = assertThrows(LockException.class, () -> clients.create(config));
    String message = e.getMessage();
    assertTrue(message.startsWith("Cannot connect to Redis (sentinel master '"
        + redis.sentinelSetup().masterName() + "' via ["), message);
    assertTrue(message.contains("authentication failed (WRONGPASS"), message);
    assertFalse(message.contains("not-the-password"), message);
  }

  @Test
  void locksOnTheMaster_andWakesWaiters() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    DistributedLock lock = a.getLock("sentinel-lock");
    lock.lock();
    try (Jedis master = redis.sentinelSetup().master().admin()) {
      assertTrue(master.exists("sentinel-lock"));
    }
    Future<Boolean> waiter = threads.submit(() -> b.getLock("sentinel-lock").tryLock(20, TimeUnit.SECONDS));
    awaitSubscribed(redis.sentinelSetup().currentMaster());
    long released = System.nanoTime();
    lock.unlock();
    assertTrue(waiter.get(10, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - released < TimeUnit.SECONDS.toNanos(2), "woken by message");
  }

  @Test
  void failover_lockSurvivesOnPromotedReplica_andWaiterFollowsTheNewMaster() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    DistributedLock lock = a.getLock("ha-lock");
    lock.lock(); // 30 s watchdog lease
    try (Jedis master = redis.sentinelSetup().master().admin()) {
      // Replication is asynchronous: make sure the replica has the lock before the master dies.
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getLock("ha-lock"));
    awaitSubscribed(redis.sentinelSetup().currentMaster());

    HostAndPort promoted = redis.sentinelSetup().failover();

    Await.until(Duration.ofSeconds(20), () -> subscribers(promoted) > 0,
        "waiter resubscribed on the new master");
    assertTrue(lock.isHeldByCurrentThread(), "the lock was replicated before the failover");
    long released = System.nanoTime();
    lock.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "woken by the new master's message: " + latency + "ms");
    assertFalse(lock.isLocked());
  }

  @Test
  void manualFailover_oldMasterStaysUp_waiterStillHearsTheUnlock() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    DistributedLock lock = a.getLock("switch-lock");
    lock.lock();
    HostAndPort before = redis.sentinelSetup().currentMaster();
    try (Jedis master = new Jedis(before)) {
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getLock("switch-lock"));
    awaitSubscribed(before);
    HostAndPort sentinel = redis.sentinelSetup().sentinels().iterator().next();
    try (Jedis jedis = new Jedis(sentinel)) {
      jedis.sentinelFailover(redis.sentinelSetup().masterName());
    }
    // The old master is demoted, not killed: a subscriber may stay on it, as a replica.
    Await.until(Duration.ofSeconds(30), () -> !redis.sentinelSetup().currentMaster().equals(before)
        && isMaster(redis.sentinelSetup().currentMaster()), "sentinels promoted the replica");
    long released = System.nanoTime();
    Await.until(Duration.ofSeconds(10), () -> {
      try {
        lock.unlock(); // may need the client to notice the switch first
        return true;
      } catch (dev.holdfast.LockException e) {
        return false;
      }
    }, "unlock on the new master");
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 5_000, "waiter woken by the unlock, not the 30 s lease: " + latency);
  }

  private static boolean isMaster(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.role().get(0).equals("master");
    } catch (RuntimeException e) {
      return false;
    }
  }

  private void awaitSubscribed(HostAndPort master) {
    Await.until(Duration.ofSeconds(5), () -> subscribers(master) > 0, "waiter subscribed");
  }

  private static long subscribers(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.pubsubChannels("redisson_lock__channel:*").size();
    } catch (RuntimeException e) {
      return 0;
    }
  }
}
