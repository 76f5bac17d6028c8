package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.SlotMigration;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Attack review of the "ending" change, cluster part (a separate class only because it needs a
 * cluster; see {@link EndingAttackTest}): a final unlock that Redis turned away on every attempt
 * ({@code TRYAGAIN} during a slot migration, {@code mayHaveRun() == false}) resumes the hold's
 * renewal — so the usual {@code finally { lock.unlock(); }}, which does not call again, leaves
 * the lock renewed for as long as the thread lives: hole 3 by another road.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class EndingClusterAttackTest {
  /** Longer than the refused call (4 x 300 ms), so that only the renewal decides. */
  private static final long WATCHDOG_MILLIS = 4_000;

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void finalUnlockRefusedThroughout_threadNeverCallsAgain_lockIsNotRenewedForEver() {
    RedisClusterSetup cluster = redis.clusterSetup();
    redis.flushAll();
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes(), "holdfast.redis.timeout", "300ms",
        "holdfast.watchdog-timeout", WATCHDOG_MILLIS + "ms"));
    DistributedLock lock = client.getLock("{stuck}job");
    LossRecorder lost = LossRecorder.on(client);
    lock.lock();
    String key = lock.getName();
    try (SlotMigration migration = cluster.startSlotMigration(JedisClusterCRC16.getSlot(key))) {
      migration.moveKeys(key);
      // The release's marker key is on neither side: TRYAGAIN until the call's time is up.
      RedisUnavailableException refused = assertThrows(RedisUnavailableException.class,
          lock::unlock, "the final unlock was turned away");
      assertFalse(refused.mayHaveRun(), refused.getMessage());
    } // the migration ends; the thread lives on and never calls unlock() again
    long after = System.nanoTime();
    DistributedLock other = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes())).getLock(key);
    // Not renewed, the hold would end with its lease (4 s); give it three.
    Await.until(Duration.ofSeconds(40), () -> other.tryLock()
        || System.nanoTime() - after > TimeUnit.MILLISECONDS.toNanos(3 * WATCHDOG_MILLIS
        + 2_000), "another client takes it, or the time is up");
    assertTrue(other.isHeldByCurrentThread(), "the lock whose final unlock() the thread made "
        + "is still held, renewed by the watchdog, "
        + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - after) + " ms later");
    other.unlock();
  }

  /**
   * The same refused final unlock with a watchdog lease shorter than the refused call: renewal
   * stops when the final call is sent (it ends the hold whatever comes of it), so the lease runs
   * out in Redis while the call is turned away — the hold is lost, and the unlock says so (the
   * refusal attached), once; nothing is left held. Once suspended as a defect ("a refused call
   * changed nothing, yet a loss is reported"): the loss is real, the key may have expired.
   */
  @Test
  void finalUnlockRefusedThroughout_longerThanTheLease_reportsTheLoss() {
    RedisClusterSetup cluster = redis.clusterSetup();
    redis.flushAll();
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes(), "holdfast.redis.timeout", "400ms",
        "holdfast.watchdog-timeout", "1200ms"));
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("{suspended}job");
    lock.lock();
    String key = lock.getName();
    try (SlotMigration migration = cluster.startSlotMigration(JedisClusterCRC16.getSlot(key))) {
      migration.moveKeys(key);
      IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
          lock::unlock, "the lease ran out while the final unlock was turned away");
      assertTrue(e.getMessage().contains("was lost"), e.getMessage());
      assertTrue(Arrays.stream(e.getSuppressed()).anyMatch(s -> s instanceof
          RedisUnavailableException r && !r.mayHaveRun()), "the refusal attached: " + e);
    }
    assertEquals(key, lost.awaitFirst(Duration.ofSeconds(10), "the hold's loss").event()
        .lockName());
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "nothing left to unlock");
    DistributedLock other = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes())).getLock(key);
    Await.until(Duration.ofSeconds(20), other::tryLock, "another client takes it");
    other.unlock();
    assertEquals(1, lost.count(), "reported once: " + lost);
  }

  // Control for the test above: the same hold through the same migration, with no unlock in
  // between, is renewed (via ASK) and not lost — so the loss above comes from the suspended
  // renewal, not from the migration.
  @Test
  void holdThroughTheSameMigration_withoutUnlock_isNotLost() throws Exception {
    RedisClusterSetup cluster = redis.clusterSetup();
    redis.flushAll();
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes(), "holdfast.redis.timeout", "400ms",
        "holdfast.watchdog-timeout", "1200ms"));
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("{control}job");
    lock.lock();
    String key = lock.getName();
    try (SlotMigration migration = cluster.startSlotMigration(JedisClusterCRC16.getSlot(key))) {
      migration.moveKeys(key);
      Thread.sleep(2_400); // as long as the refused unlock takes, and more: leases pass
    }
    assertEquals(0, lost.count(), lost.toString());
    lock.unlock();
  }
}
