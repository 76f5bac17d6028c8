package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Local handoff with {@code sync-replicas=auto} on a master with one replica: a handoff the
 * replica acknowledged is granted with the waiter's field already on the replica; one it did not
 * is never granted — the waiter's sealed re-send waits for the replica again and rolls it back.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LocalHandoffReplicaTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedisServer replica;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private RedisProbe master;
  private RedisProbe replicaState;

  @BeforeAll
  static void startReplica() {
    replica = redis.server().startReplica();
  }

  @AfterAll
  static void stopReplica() {
    if (replica != null) {
      replica.close();
    }
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
    Await.until(Duration.ofSeconds(10),
        () -> redis.server().withAdmin(jedis -> jedis.waitReplicas(1, 1_000)) == 1,
        "the replica acknowledges the master's writes");
    master = new RedisProbe(redis.server());
    replicaState = new RedisProbe(replica);
  }

  @AfterEach
  void tearDown() {
    threads.shutdownNow();
    ReplicaAcknowledgementTest.Suspension.resume(replica);
  }

  private LockClient client() {
    return clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.SYNC_REPLICAS, "auto", LockClientConfig.SYNC_TIMEOUT, "250ms"));
  }

  private static void awaitCandidate(LockClient c, String name) {
    LockEngine engine = Clients.engine(c);
    LockNames names = LockNames.of("", name); // these tests' clients have no key prefix
    Await.until(Duration.ofSeconds(10), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == 1;
    }, "a handoff candidate parked on " + name);
  }

  @Test
  void acknowledgedHandoff_isGranted_withTheWaitersFieldOnTheReplica() throws Exception {
    LockClient c = client();
    DistributedLock lock = c.getLock("handed");
    lock.lock();
    CountDownLatch release = new CountDownLatch(1);
    Future<String> waiter = threads.submit(() -> {
      lock.lock();
      try {
        String onReplica = replicaState.hget("handed", RedisProbe.fieldOf(c));
        release.await(10, TimeUnit.SECONDS);
        return onReplica;
      } finally {
        lock.unlock();
      }
    });
    awaitCandidate(c, "handed");
    lock.unlock();
    release.countDown();
    assertEquals("1", waiter.get(10, TimeUnit.SECONDS), "on the replica when granted");
    assertEquals(1, Clients.engine(c).localHandoffs());
    assertFalse(master.exists("handed"));
  }

  @Test
  void unacknowledgedHandoff_isNeverGranted_andIsRolledBack() throws Exception {
    LockClient c = client();
    LossRecorder lost = LossRecorder.on(c);
    DistributedLock lock = c.getLock("unacked");
    lock.lock();
    Future<Boolean> waiter = threads.submit(() -> lock.tryLock(1_500, TimeUnit.MILLISECONDS));
    awaitCandidate(c, "unacked");
    try (ReplicaAcknowledgementTest.Suspension stopped =
        ReplicaAcknowledgementTest.Suspension.of(replica)) {
      lock.unlock(); // the handoff runs on the master; the replica never acknowledges it
      assertFalse(lock.isHeldByCurrentThread());
      assertFalse(waiter.get(10, TimeUnit.SECONDS), "an unacknowledged grant is not granted");
      assertFalse(master.exists("unacked"), "the waiter's grant was rolled back");
    }
    assertEquals(1, Clients.engine(c).localHandoffs(), "the handoff ran on the master");
    assertEquals(0, lost.count(), lost.toString());
    assertTrue(lock.tryLock(), "free and usable");
    lock.unlock();
  }
}
