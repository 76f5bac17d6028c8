package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 15 hole 7: with {@code sync-replicas=auto}, a replica in its initial (full) sync —
 * state {@code wait_bgsave} or {@code send_bulk}, which acknowledges nothing — is not waited
 * for. Redis 7's default 5 s diskless-sync delay keeps a restarted replica in that state for
 * longer than the sync timeout and the watchdog timeout used here.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ReplicaResyncTest {

  private static final long WATCHDOG_MS = 1_500;

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisServer replica;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    replica = redis.server().startReplica();
    // Redis 7's default, which the harness turns off for fast starts.
    redis.server().withAdmin(jedis -> jedis.configSet("repl-diskless-sync-delay", "6"));
  }

  @AfterEach
  void tearDown() {
    redis.server().withAdmin(jedis -> jedis.configSet("repl-diskless-sync-delay", "0"));
    replica.close();
  }

  @Test
  void auto_replicaInFullResync_isNotWaitedFor_grantsStand_andNoHoldIsLost() throws Exception {
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.SYNC_REPLICAS, "auto",
        LockClientConfig.SYNC_TIMEOUT, "250ms",
        LockClientConfig.WATCHDOG_TIMEOUT, WATCHDOG_MS + "ms"));
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock kept = client.getLock("kept");
    kept.lock();

    replica.restartEmpty(); // comes back without data: it needs a full sync
    Await.until(Duration.ofSeconds(10), () -> replicaState().contains("state=wait_bgsave"),
        "the restarted replica waits for its full sync");
    long syncStarted = System.nanoTime();

    // While it syncs: grants are not rolled back for want of an acknowledgement.
    int granted = 0;
    for (int i = 0; i < 5; i++) {
      DistributedLock lock = client.getLock("during-sync-" + i);
      if (lock.tryLock()) {
        granted++;
        lock.unlock();
      }
    }
    assertTrue(replicaState().contains("state=wait_bgsave")
        || replicaState().contains("state=send_bulk"), "the replica was still syncing");
    assertEquals(5, granted, "grants while the replica synced (not rolled back)");

    Await.until(Duration.ofSeconds(30), () -> replicaState().contains("state=online"),
        "the replica finishes its sync");
    long syncedAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - syncStarted);
    assertTrue(syncedAfter > WATCHDOG_MS, "the sync lasted longer than the watchdog timeout ("
        + syncedAfter + " ms)");
    assertEquals(0, lost.count(), "holds lost while the replica synced: " + lost);
    assertTrue(kept.isHeldByCurrentThread(), "the watchdog hold was kept");

    // Online again: grants wait for it and it has them.
    DistributedLock acked = client.getLock("acked");
    assertTrue(acked.tryLock());
    assertTrue(new RedisProbe(replica).exists("acked"), "the replica has the grant");
    acked.unlock();
    kept.unlock();
  }

  private String replicaState() {
    return redis.server().withAdmin(jedis -> jedis.info("replication"));
  }
}
