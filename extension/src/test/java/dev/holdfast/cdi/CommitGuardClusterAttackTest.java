package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.CommitGuard;
import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.SlotMigration;
import jakarta.transaction.Status;
import jakarta.transaction.TransactionManager;
import jakarta.transaction.TransactionSynchronizationRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * The REDIS check of the commit guard while the hold's slot migrates: its HEXISTS is answered
 * {@code ASK} (key moved, slot still migrating) and then {@code MOVED}; a held lock must pass
 * both — a redirect is no "gone".
 */
class CommitGuardClusterAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @BeforeAll
  static void narayanaStoresInTarget() {
    CommitGuardTest.narayanaStoresInTarget();
  }

  @Test
  void slotMigrating_askThenMoved_heldLockCommits_noFalseLoss() throws Exception {
    redis.flushAll();
    CommitGuardTest.OUTCOMES.clear();
    RedisClusterSetup cluster = redis.clusterSetup();
    TransactionManager tm = com.arjuna.ats.jta.TransactionManager.transactionManager();
    TransactionSynchronizationRegistry registry = new com.arjuna.ats.internal.jta.transaction
        .arjunacore.TransactionSynchronizationRegistryImple();
    try (LockClient client = LockClient.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.seedNodes(), "holdfast.watchdog-timeout", "30s"))) {
      List<LockLost> losses = new CopyOnWriteArrayList<>();
      client.onLockLost(losses::add);
      DistributedLock lock = client.getLock("{mig}a");
      lock.lock();
      try (SlotMigration migration = cluster.startSlotMigration(
          JedisClusterCRC16.getSlot(lock.getName()))) {
        tm.begin();
        CommitGuardTest.recordOutcome(registry);
        CommitGuard.register(registry, lock, CommitGuard.Check.REDIS);
        assertEquals(1, migration.moveKeys(lock.getName()), "the lock's key moved");
        tm.commit(); // HEXISTS at the source: ASK to the target
        tm.begin();
        CommitGuardTest.recordOutcome(registry);
        CommitGuard.register(registry, lock, CommitGuard.Check.REDIS);
        migration.finish();
        tm.commit(); // HEXISTS at the old owner: MOVED
      } finally {
        lock.unlock();
      }
      assertEquals(List.of(Status.STATUS_COMMITTED, Status.STATUS_COMMITTED),
          CommitGuardTest.OUTCOMES);
      assertTrue(losses.isEmpty(), "no false loss: " + losses);
    }
  }
}
