package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 7 (engine part), uncertainty: replies that never come and Redis that cannot be reached.
 * The client under test talks through a {@link BlackHoleProxy} (its Redis can vanish while
 * other clients and the assertions still reach the server); each test names the item it
 * reproduces. All fail on the 0.1 engine and pass under the 0.2 contract.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SafetyUncertaintyTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> direct;
  private RedisProbe redisState;
  private BlackHoleProxy proxy;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    direct = Map.of(LockClientConfig.ADDRESS, redis.server().uri());
    redisState = new RedisProbe(redis.server());
    proxy = new BlackHoleProxy(redis.server().port());
  }

  @AfterEach
  void tearDown() {
    threads.shutdownNow();
    proxy.close();
  }

  /**
   * A client behind the proxy with a short socket timeout, plus {@code extra} settings. It has
   * acquired, re-entered and released once, so Redis knows its scripts: a swallowed NOSCRIPT
   * reply would mean that the faulted call never ran.
   */
  private LockClient proxied(String... extra) {
    Map<String, String> config = Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms");
    LockClient client = clients.create(config, extra);
    DistributedLock warmUp = client.getLock("warm-up");
    warmUp.lock();
    assertTrue(warmUp.tryLock());
    warmUp.unlock();
    warmUp.unlock();
    return client;
  }

  // Item 5: unlock() retried after a LockException (every reply lost, the release did run)
  // recognises that release: no false "lost", and the lock is free.
  @Test
  void unlock_retriedAfterLostReplies_succeedsAndLockIsFree() {
    LockClient client = proxied();
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    proxy.dropScriptReplies(true);
    try {
      assertThrows(LockException.class, lock::unlock, "unlock without any reply");
    } finally {
      proxy.dropScriptReplies(false);
    }
    assertFalse(redisState.exists("retried"), "the release ran although no reply came back");
    assertDoesNotThrow(lock::unlock, "the retried unlock recognises its own release");
    assertFalse(redisState.exists("retried"));
    assertEquals(0, lost.count(), lost.toString());
    lock.lock();
    assertEquals("1", redisState.hget("retried", RedisProbe.fieldOf(client)), "usable again");
    lock.unlock();
  }

  // Item 5 (companion): an inner unlock retried after a LockException decrements once.
  @Test
  void innerUnlock_retriedAfterLostReplies_decrementsOnce() {
    LockClient client = proxied();
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    lock.lock();
    proxy.dropScriptReplies(true);
    try {
      assertThrows(LockException.class, lock::unlock, "unlock without any reply");
    } finally {
      proxy.dropScriptReplies(false);
    }
    lock.unlock();
    assertEquals("1", redisState.hget("retried", RedisProbe.fieldOf(client)),
        "one section left after the retried inner unlock");
    lock.unlock();
    assertFalse(redisState.exists("retried"));
  }

  // Item 10: an acquisition whose reply was lost and whose undo could not reach Redis is undone
  // once Redis is back, long before its 10 s watchdog lease would have freed the lock.
  @Test
  void uncertainAcquire_whoseUndoFailed_isUndoneOnceRedisIsBack() {
    LockClient client = proxied(LockClientConfig.WATCHDOG_TIMEOUT, "10s");
    DistributedLock lock = client.getLock("orphan");
    String field = RedisProbe.fieldOf(client);
    proxy.runNextScriptThenBlackHole();
    try {
      assertThrows(LockException.class, lock::tryLock, "tryLock() fails fast in an outage");
      assertEquals("1", redisState.hget("orphan", field), "the acquisition ran in Redis (setup)");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(4), () -> !redisState.exists("orphan"),
        "the orphaned hold undone within 4 s of Redis being back (its lease is 10 s)");
    assertFalse(lock.isHeldByCurrentThread());
    DistributedLock other = clients.create(direct).getLock("orphan");
    assertTrue(other.tryLock(), "another client acquires");
    other.unlock();
  }

  // Item 11: a re-entry whose script ran (count 2) but whose reply was lost while Redis became
  // unreachable is resolved (undone: count back to 1) or reported lost; it must never leave a
  // hold that the watchdog renews for ever after the outer unlock.
  @Test
  void uncertainReentry_duringOutage_neverLeaksTheLock() throws Exception {
    LockClient client = proxied(LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("leaky");
    String field = RedisProbe.fieldOf(client);
    lock.lock();
    proxy.runNextScriptThenBlackHole();
    try {
      assertThrows(LockException.class, lock::tryLock, "tryLock() fails fast in an outage");
      assertEquals("2", redisState.hget("leaky", field), "the re-entry ran in Redis (setup)");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(4),
        () -> lost.count() > 0 || "1".equals(redisState.hget("leaky", field)),
        "the uncertain re-entry resolved (count back to 1) or its hold reported lost");
    if (lost.count() == 0) {
      lock.unlock();
      assertFalse(redisState.exists("leaky"), "one unlock for the one confirmed acquisition");
    } else {
      IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
          lock::unlock);
      assertTrue(e.getMessage().contains("lost"), e.getMessage());
    }
    DistributedLock other = clients.create(direct).getLock("leaky");
    assertTrue(other.tryLock(5, SECONDS), "free within the watchdog timeout (+2 s)");
    other.unlock();
    assertTrue(lost.count() <= 1, "reported at most once: " + lost);
  }

  // Item 13e: waiting calls started while Redis is down ride the outage out from their first
  // attempt on and acquire once it is back.
  @Test
  void waitingCalls_startedDuringOutage_acquireOnceRedisIsBack() throws Exception {
    LockClient client = clients.create(direct, LockClientConfig.TIMEOUT, "300ms",
        LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    redis.server().kill();
    Future<Boolean> tryLock;
    Future<Boolean> lock;
    try {
      tryLock = threads.submit(() -> {
        DistributedLock l = client.getLock("outage-1");
        boolean acquired = l.tryLock(5, SECONDS);
        if (acquired) {
          l.unlock();
        }
        return acquired;
      });
      lock = threads.submit(() -> {
        DistributedLock l = client.getLock("outage-2");
        l.lock();
        l.unlock();
        return true;
      });
      Thread.sleep(1_000); // the outage
    } finally {
      redis.server().restart();
    }
    assertTrue(outcome(tryLock, "tryLock(5 s)"), "tryLock(5 s) acquired once Redis was back");
    assertTrue(outcome(lock, "lock()"));
  }

  // Item 14: a holder that cannot reach Redis stops believing it holds the lock: the LockLost is
  // heard before another client can acquire, queries answer from local state, unlock says lost.
  @Test
  void unreachableHolder_reportsLossBeforeAnyoneElseAcquires() throws Exception {
    LockClient holder = proxied(LockClientConfig.WATCHDOG_TIMEOUT, "1500ms");
    LossRecorder lost = LossRecorder.on(holder);
    DistributedLock lock = holder.getLock("partitioned");
    lock.lock();
    DistributedLock other = clients.create(direct).getLock("partitioned");
    proxy.blackHole(true);
    try {
      long acquiredAt = Await.value(Duration.ofSeconds(6),
          () -> other.tryLock() ? System.nanoTime() : null, "another client acquires");
      assertEquals(1, lost.count(), "the holder reported the loss before the other acquired");
      LossRecorder.Report report = lost.reports().get(0);
      assertTrue(report.heardAtNanos() < acquiredAt, "LockLost heard "
          + TimeUnit.NANOSECONDS.toMillis(report.heardAtNanos() - acquiredAt)
          + " ms after another client acquired");
      assertTrue(report.event().reason().contains("confirm"), report.event().reason());

      long asked = System.nanoTime();
      assertFalse(lock.isHeldByCurrentThread(), "the holder no longer believes it holds");
      long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - asked);
      assertTrue(took < 500, "answered from local state, took " + took + " ms");
      IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
          lock::unlock);
      assertTrue(e.getMessage().contains("lost"), e.getMessage());
    } finally {
      proxy.blackHole(false);
    }
    other.unlock();
  }

  private static boolean outcome(Future<Boolean> call, String what) throws Exception {
    try {
      return call.get(10, SECONDS);
    } catch (ExecutionException e) {
      throw new AssertionError(what + " failed instead of riding out the outage", e.getCause());
    }
  }
}
