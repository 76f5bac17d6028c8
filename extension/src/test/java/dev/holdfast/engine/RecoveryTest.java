package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** Redis forgets things — scripts, keys, connections; the client must notice and carry on. */
class RecoveryTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void scriptFlush_isHealedByReloading() {
    LockClient client = clients.create(config);
    DistributedLock lock = client.getLock("flushed");
    lock.lock();
    try (Jedis jedis = redis.server().admin()) {
      jedis.scriptFlush();
    }
    lock.lock();
    assertEquals(2, lock.getHoldCount());
    try (Jedis jedis = redis.server().admin()) {
      jedis.scriptFlush();
    }
    lock.unlock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @Test
  void restart_wakesWaitersWhichThenAcquire() throws Exception {
    LockClient holder = clients.create(config);
    holder.getLock("survivor").lock(); // 30 s watchdog lease
    LockClient waiting = clients.create(config);
    Future<Long> waiter = Waiters.acquireAndRelease(threads, waiting.getLock("survivor"));
    Await.until(Duration.ofSeconds(5), () -> !Clients.engine(waiting).waitedChannels().isEmpty()
        && Waiters.subscribers(redis.server().admin(), "redisson_lock__channel:{survivor}") > 0,
        "waiter subscribed");
    long restartedAt = System.nanoTime();
    redis.server().restart(); // all keys, scripts and connections are gone
    long took = Waiters.millisUntilAcquired(waiter, restartedAt);
    assertTrue(took < 10_000, "resubscription woke the waiter long before the 30 s lease: " + took);
  }

  @Test
  void restart_reportsHeldLockLost_neverSilentlyHeld() throws Exception {
    LockClient holder = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    List<LockLost> lost = new CopyOnWriteArrayList<>();
    holder.onLockLost(lost::add);
    DistributedLock lock = holder.getLock("volatile");
    lock.lock();
    redis.server().restart();
    Await.until(Duration.ofSeconds(10), () -> !lost.isEmpty(), "LockLost after restart");
    assertEquals("volatile", lost.get(0).lockName());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("was lost"), e.getMessage());
    lock.lock();
    assertTrue(lock.isHeldByCurrentThread(), "usable again after the restart");
    lock.unlock();
  }

  @Test
  void redisDown_failsCallsWithLockException_thenRecovers() {
    LockClient client = clients.create(config, "holdfast.redis.timeout", "300ms");
    DistributedLock lock = client.getLock("outage");
    redis.server().kill();
    try {
      assertThrows(dev.holdfast.LockException.class, lock::tryLock);
    } finally {
      redis.server().restart();
    }
    assertTrue(lock.tryLock());
    lock.unlock();
  }

}
