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
import dev.holdfast.testing.LogCapture;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 8 part 1, replica acknowledgement ({@code holdfast.redis.sync-replicas}), on a real master
 * with one replica: {@code WAIT} is sent exactly when the setting asks for it; an acquisition or
 * re-entry the replicas did not acknowledge is rolled back and not granted; an unacknowledged
 * release is reported; an unacknowledged renewal does not extend the hold.
 *
 * <p>The replica stops acknowledging when it is SIGSTOPped: its connection stays open, so the
 * master still counts it as connected, and after SIGCONT it reads what the kernel buffered and
 * catches up. Every test leaves it running and caught up.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ReplicaAcknowledgementTest {

  private static final String SYNC_TIMEOUT = "250ms";

  /** The master; its replica is {@link #replica}. */
  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** A server without replicas. */
  @RegisterExtension
  static final RedisExtension alone = RedisExtension.standalone();

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
    alone.flushAll();
    awaitReplicaCaughtUp();
    master = new RedisProbe(redis.server());
    replicaState = new RedisProbe(replica);
  }

  @AfterEach
  void tearDown() {
    threads.shutdownNow();
    Suspension.resume(replica); // in case a test failed before its own resume
  }

  /** A client of the master with {@code sync-replicas=<syncReplicas>}, plus {@code extra}. */
  private LockClient client(String syncReplicas, String... extra) {
    return clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.SYNC_REPLICAS, syncReplicas,
        LockClientConfig.SYNC_TIMEOUT, SYNC_TIMEOUT), extra);
  }

  // ---- When WAIT is sent ----

  @Test
  void auto_withHealthyReplica_waitsOnEveryChange_andTheReplicaHasItWhenTheCallReturns() {
    LockClient client = warmedUp(client("auto"));
    DistributedLock lock = client.getLock("acked");
    String field = RedisProbe.fieldOf(client);
    long waits = master.waitCalls();
    long scripts = master.scriptCalls();

    lock.lock();
    assertEquals("1", replicaState.hget("acked", field), "acquisition on the replica");
    assertTrue(lock.tryLock());
    assertEquals("2", replicaState.hget("acked", field), "re-entry on the replica");
    lock.unlock();
    assertEquals("1", replicaState.hget("acked", field), "inner release on the replica");
    lock.unlock();
    assertFalse(replicaState.exists("acked"), "final release on the replica");

    assertEquals(4, master.waitCalls() - waits, "one WAIT per state change");
    assertEquals(4, master.scriptCalls() - scripts, "one script per state change");
  }

  @Test
  void auto_withoutReplicas_sendsNoWait_andOneScriptCallPerChange() {
    LockClient client = warmedUp(clients.create(Map.of(
        LockClientConfig.ADDRESS, alone.server().uri(),
        LockClientConfig.SYNC_REPLICAS, "auto")));
    RedisProbe server = new RedisProbe(alone.server());
    DistributedLock lock = client.getLock("unreplicated");
    long waits = server.waitCalls();

    long scripts = server.scriptCalls();
    lock.lock();
    assertEquals(1, server.scriptCalls() - scripts, "lock()");
    scripts = server.scriptCalls();
    assertTrue(lock.tryLock());
    assertEquals(1, server.scriptCalls() - scripts, "re-entry");
    scripts = server.scriptCalls();
    lock.unlock();
    assertEquals(1, server.scriptCalls() - scripts, "inner unlock()");
    scripts = server.scriptCalls();
    lock.unlock();
    assertEquals(1, server.scriptCalls() - scripts, "final unlock()");

    assertEquals(0, server.waitCalls() - waits, "no WAIT without replicas");
    assertFalse(server.exists("unreplicated"));
  }

  @Test
  void none_withReplica_sendsNoWait() {
    LockClient client = warmedUp(client("none"));
    DistributedLock lock = client.getLock("unacked");
    long waits = master.waitCalls();
    long scripts = master.scriptCalls();

    lock.lock();
    assertTrue(lock.tryLock());
    lock.unlock();
    lock.unlock();

    assertEquals(0, master.waitCalls() - waits, "no WAIT with sync-replicas=none");
    assertEquals(4, master.scriptCalls() - scripts);
  }

  @Test
  void none_withSilentReplica_grantsAnyway() throws Exception {
    LockClient client = warmedUp(client("none"));
    DistributedLock lock = client.getLock("unacked");
    try (Suspension stopped = Suspension.of(replica)) {
      assertTrue(lock.tryLock(), "nothing is waited for");
      assertEquals("1", master.hget("unacked", RedisProbe.fieldOf(client)));
      lock.unlock();
    }
  }

  @Test
  void syncReplicasOne_waitsForOne_andGrants() {
    LockClient client = warmedUp(client("1"));
    DistributedLock lock = client.getLock("one");
    long waits = master.waitCalls();

    assertTrue(lock.tryLock());
    assertEquals("1", replicaState.hget("one", RedisProbe.fieldOf(client)));
    lock.unlock();
    assertFalse(replicaState.exists("one"));
    assertEquals(2, master.waitCalls() - waits);
  }

  @Test
  void syncReplicasTwo_withOneReplica_isNeverGranted_andLeavesNothingBehind() throws Exception {
    LockClient client = client("2"); // no warm-up: nothing can be granted here
    DistributedLock lock = client.getLock("two");

    assertFalse(lock.tryLock(), "only one replica can acknowledge, two are required");
    assertFalse(lock.isHeldByCurrentThread());
    assertNothingLeftBehind("two");

    assertFalse(lock.tryLock(500, TimeUnit.MILLISECONDS));
    assertFalse(lock.isHeldByCurrentThread());
    assertNothingLeftBehind("two");
  }

  // ---- Acquisitions that are not acknowledged ----

  @Test
  void unacknowledgedTryLock_isNotGranted_andRolledBack() throws Exception {
    LockClient client = warmedUp(client("auto"));
    DistributedLock lock = client.getLock("silent");
    try (Suspension stopped = Suspension.of(replica)) {
      assertEquals(1, master.connectedReplicas(),
          "the master still counts the stopped replica as connected");

      assertFalse(lock.tryLock());
      assertFalse(lock.isHeldByCurrentThread());
      assertNothingLeftBehind("silent");

      long start = System.nanoTime();
      assertFalse(lock.tryLock(1, SECONDS));
      long elapsed = millisSince(start);
      assertTrue(elapsed >= 1_000 && elapsed < 2_500,
          "tryLock(1 s) returned false at its deadline, not " + elapsed + " ms");
      assertFalse(lock.isHeldByCurrentThread());
      assertNothingLeftBehind("silent");
    }
    awaitReplicaCaughtUp();
    assertTrue(lock.tryLock(), "granted once the replica acknowledges again");
    lock.unlock();
  }

  @Test
  void unacknowledgedLock_keepsTrying_andAcquiresOnceTheReplicaIsBack() throws Exception {
    LockClient client = warmedUp(client("auto"));
    Future<Boolean> locked;
    try (Suspension stopped = Suspension.of(replica)) {
      locked = threads.submit(() -> {
        DistributedLock lock = client.getLock("patient");
        lock.lock();
        try {
          return lock.isHeldByCurrentThread();
        } finally {
          lock.unlock();
        }
      });
      assertThrows(TimeoutException.class, () -> locked.get(1_500, TimeUnit.MILLISECONDS),
          "lock() is still trying while the replica is silent");
    }
    assertTrue(locked.get(10, SECONDS), "lock() acquired once the replica was back");
    assertFalse(master.exists("patient"));
  }

  @Test
  void unacknowledgedLock_givesUpAfterOneWatchdogTimeout_likeInAnOutage() throws Exception {
    LockClient client = warmedUp(client("auto", LockClientConfig.WATCHDOG_TIMEOUT, "1500ms"));
    DistributedLock lock = client.getLock("outage-like");
    try (Suspension stopped = Suspension.of(replica)) {
      long start = System.nanoTime();
      LockException e = assertThrows(LockException.class, lock::lock);
      long elapsed = millisSince(start);
      assertTrue(e.getMessage().contains("not granted"), e.getMessage());
      assertTrue(elapsed >= 1_500 && elapsed < 4_000, "gave up after " + elapsed + " ms");
      assertFalse(lock.isHeldByCurrentThread());
      assertNothingLeftBehind("outage-like");
    }
  }

  @Test
  void unacknowledgedReentry_isRolledBack_andTheHoldCountStaysOne() throws Exception {
    LockClient client = warmedUp(client("auto"));
    DistributedLock lock = client.getLock("reentrant");
    String field = RedisProbe.fieldOf(client);
    lock.lock();
    try (Suspension stopped = Suspension.of(replica)) {
      assertFalse(lock.tryLock(), "the re-entry was not acknowledged");
      assertEquals("1", master.hget("reentrant", field), "the re-entry was rolled back");
      assertEquals(1, lock.getHoldCount());
      assertTrue(lock.isHeldByCurrentThread(), "the outer hold stands");
    }
    awaitReplicaCaughtUp();
    lock.unlock();
    assertFalse(master.exists("reentrant"));
    assertFalse(lock.isHeldByCurrentThread());
  }

  // ---- Releases and renewals that are not acknowledged ----

  @Test
  void unacknowledgedRelease_returnsNormally_freesTheLock_andWarns() throws Exception {
    LockClient client = warmedUp(client("auto"));
    DistributedLock lock = client.getLock("released");
    lock.lock();
    try (LogCapture log = LogCapture.of(RedisLock.class.getName());
        Suspension stopped = Suspension.of(replica)) {
      assertDoesNotThrow(lock::unlock);
      assertFalse(master.exists("released"), "the lock is free on the master");
      assertFalse(lock.isHeldByCurrentThread());
      List<String> warnings = log.messages(Level.WARNING);
      assertEquals(1, warnings.size(), warnings.toString());
      assertTrue(warnings.get(0).contains("unlock() of lock 'released'")
          && warnings.get(0).contains("0 of 1 replicas"), warnings.get(0));
    }
  }

  @Test
  void unacknowledgedRenewal_doesNotExtendTheLease_andTheHoldIsLostByItsDeadline()
      throws Exception {
    long watchdog = 900;
    LockClient client = warmedUp(client("auto", LockClientConfig.WATCHDOG_TIMEOUT,
        watchdog + "ms", LockClientConfig.SYNC_TIMEOUT, "200ms"));
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("renewed");
    lock.lock();
    Thread.sleep(2 * watchdog); // acknowledged renewals keep it well past one lease
    assertEquals(0, lost.count(), lost.toString());
    assertTrue(lock.isHeldByCurrentThread());

    long stoppedAt = System.nanoTime();
    long masterExpiresAt = stoppedAt;
    try (Suspension stopped = Suspension.of(replica)) {
      // Until the loss, follow how far the master's renewals push the key's expiry.
      long giveUp = stoppedAt + SECONDS.toNanos(3);
      while (lost.count() == 0 && System.nanoTime() - giveUp < 0) {
        long sampled = System.nanoTime();
        long pttl = master.pttl("renewed");
        if (pttl > 0) {
          masterExpiresAt = Math.max(masterExpiresAt,
              sampled + TimeUnit.MILLISECONDS.toNanos(pttl));
        }
        Thread.sleep(20);
      }
    }
    LossRecorder.Report report = lost.awaitFirst(Duration.ofSeconds(1), "the unconfirmed hold");
    long lostAfter = TimeUnit.NANOSECONDS.toMillis(report.heardAtNanos() - stoppedAt);
    assertTrue(lostAfter <= watchdog + 400, "lost " + lostAfter + " ms after the replica stopped "
        + "acknowledging; its confirmed lease ended within " + watchdog + " ms");
    long renewedBeyond = TimeUnit.NANOSECONDS.toMillis(masterExpiresAt - report.heardAtNanos());
    assertTrue(renewedBeyond > 0, "the master's own renewals kept the key beyond the loss ("
        + renewedBeyond + " ms): unacknowledged, they were not trusted");
    assertTrue(report.event().reason().contains("could not be confirmed"),
        report.event().reason());
    assertEquals(1, lost.count(), lost.toString());
    assertFalse(lock.isHeldByCurrentThread());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    Await.until(Duration.ofSeconds(3), () -> !master.exists("renewed"),
        "the lost hold is removed from the master");
  }

  // ---- Helpers ----

  /** Loads the scripts (so that no NOSCRIPT round trip is counted) and returns the client. */
  private static LockClient warmedUp(LockClient client) {
    DistributedLock warmUp = client.getLock("warm-up");
    warmUp.lock();
    warmUp.unlock();
    return client;
  }

  /** The lock key is gone from the master, and every key left there (markers) expires. */
  private void assertNothingLeftBehind(String key) {
    assertFalse(master.exists(key), "lock key '" + key + "' left on the master");
    redis.server().withAdmin(jedis -> {
      for (String k : jedis.keys("*")) {
        assertTrue(jedis.pttl(k) > 0, "key '" + k + "' left on the master without expiry");
      }
      return null;
    });
  }

  private void awaitReplicaCaughtUp() {
    Await.until(Duration.ofSeconds(10),
        () -> redis.server().withAdmin(jedis -> jedis.waitReplicas(1, 1_000)) == 1,
        "the replica acknowledges the master's writes");
  }

  private static long millisSince(long startNanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
  }

  /**
   * A server process stopped with SIGSTOP until {@link #close()} sends SIGCONT: its connections
   * stay open (the master keeps counting a stopped replica as connected) but it reads and
   * answers nothing; what was sent meanwhile waits in kernel buffers and is read on SIGCONT.
   */
  static final class Suspension implements AutoCloseable {
    private final RedisServer server;

    private Suspension(RedisServer server) {
      this.server = server;
    }

    static Suspension of(RedisServer server) {
      signal(server, "STOP");
      return new Suspension(server);
    }

    /** SIGCONT; harmless for a running process. */
    static void resume(RedisServer server) {
      if (server != null && server.isRunning()) {
        signal(server, "CONT");
      }
    }

    @Override
    public void close() {
      resume(server);
    }

    private static void signal(RedisServer server, String signal) {
      try {
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(server.pid()))
            .redirectErrorStream(true).start();
        if (!kill.waitFor(5, SECONDS) || kill.exitValue() != 0) {
          throw new IllegalStateException("kill -" + signal + " " + server + " failed: "
              + new String(kill.getInputStream().readAllBytes()));
        }
      } catch (IOException e) {
        throw new IllegalStateException("Cannot run kill -" + signal, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("Interrupted sending SIG" + signal, e);
      }
    }
  }
}
