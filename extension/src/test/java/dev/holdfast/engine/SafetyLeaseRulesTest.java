package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.DAYS;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.NANOSECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
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
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;
import redis.clients.jedis.Jedis;

/**
 * Issue 7 (engine part), lease rules: nested and mixed sections, lease and wait ranges. Each test
 * names the item it reproduces; all fail on the 0.1 engine and pass under the 0.2 contract
 * (docs/lock-kinds.md and docs/safety.md). Times are scaled down: leases and watchdog timeouts of 1-3 s.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SafetyLeaseRulesTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private RedisProbe redisState;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of(LockClientConfig.ADDRESS, redis.server().uri());
    redisState = new RedisProbe(redis.server());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  // Item 1 (contract consequence: the 60 s forget-grace of 0.1 cannot be waited out here). The
  // client's idea of a hold's expiry follows every script that sets the TTL: an inner unlock of
  // nested explicit leases leaves the key to the OUTER section's deadline, and when that passes
  // the hold is lost (reported once, unlock says so) instead of living on in Redis.
  @Test
  void innerUnlock_ofNestedExplicitLeases_keepsTheOuterDeadline() throws Exception {
    LockClient client = clients.create(config);
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("nested");
    long start = System.nanoTime();
    lock.lock(3, SECONDS);
    lock.lock(3, SECONDS);
    sleepUntil(start + SECONDS.toNanos(2));
    lock.unlock();
    long pttl = redisState.pttl("nested");
    assertTrue(pttl > 0 && pttl <= 1_100, "after the inner unlock at 2 s the key must live until"
        + " the outer section's deadline (~1000 ms left), not a fresh 3 s lease; PTTL " + pttl);
    assertEquals("1", redisState.hget("nested", RedisProbe.fieldOf(client)));

    Await.until(Duration.ofMillis(1_500), () -> !redisState.exists("nested"),
        "key gone at the outer section's deadline (3 s after the outer lock)");
    LossRecorder.Report report = lost.awaitFirst(Duration.ofSeconds(2), "outer lease ran out");
    assertEquals("nested", report.event().lockName());
    assertTrue(report.event().reason().contains("ran out"), report.event().reason());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    assertReportedOnce(lost);
  }

  // Item 1: after an inner unlock of nested explicit leases, a re-entry is counted as a re-entry
  // (never answered as a replay), never shortens the TTL, and no unlock re-extends it: the key
  // keeps following the outer section's deadline.
  @Test
  void reentry_afterInnerUnlockOfExplicitLeases_countsAndKeepsTheOuterDeadline()
      throws Exception {
    LockClient client = clients.create(config);
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("nested");
    String field = RedisProbe.fieldOf(client);
    long start = System.nanoTime();
    lock.lock(3, SECONDS);
    lock.lock(3, SECONDS);
    sleepUntil(start + SECONDS.toNanos(1));
    lock.unlock();
    assertEquals("1", redisState.hget("nested", field));
    assertOuterDeadline("after the inner unlock");

    lock.lock(500, MILLISECONDS);
    assertEquals("2", redisState.hget("nested", field), "a re-entry adds one hold");
    assertOuterDeadline("after a re-entry with a shorter lease");
    lock.unlock();
    assertEquals("1", redisState.hget("nested", field));
    assertOuterDeadline("after the re-entry's unlock");
    lock.unlock();
    assertFalse(redisState.exists("nested"), "the last unlock frees the lock");
    assertEquals(0, lost.count(), lost.toString());
  }

  /** The key of lock "nested" expires with its outer 3 s section, 1 s in: ~2000 ms left. */
  private void assertOuterDeadline(String when) {
    long pttl = redisState.pttl("nested");
    assertTrue(pttl > 1_500 && pttl <= 2_050, when + ": the key must expire with the outer"
        + " section (~2000 ms left), PTTL " + pttl);
  }

  // Item 2: `lock(); lock(1, SECONDS); unlock();` keeps the watchdog section renewed: the inner
  // fixed lease never shortens the TTL, and its unlock does not leave a 1 s TTL behind.
  @Test
  void innerFixedLease_insideWatchdogSection_neverShortensTheLease() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("mixed");
    lock.lock();
    lock.lock(1, SECONDS);
    long reentered = redisState.pttl("mixed");
    assertTrue(reentered > 2_000, "a re-entry never shortens the TTL, PTTL " + reentered);
    lock.unlock();
    long afterUnlock = redisState.pttl("mixed");
    assertTrue(afterUnlock > 1_500, "the watchdog section's lease, PTTL " + afterUnlock);

    DistributedLock other = clients.create(config).getLock("mixed");
    assertFalse(other.tryLock(2, SECONDS), "still held (watchdog) after the inner 1 s lease");
    assertEquals("1", redisState.hget("mixed", RedisProbe.fieldOf(client)));
    lock.unlock();
    assertFalse(redisState.exists("mixed"));
    assertEquals(0, lost.count(), lost.toString());
  }

  // LockModelTest seed -5863772910925733781: lock(2058ms); lock(); lock(2556ms). A renewal set
  // the key's TTL to the watchdog lease, below what the fixed re-entry had been granted, while the
  // holder kept believing the longer lease: another client acquired before the holder stopped
  // believing. A renewal extends; it never shortens.
  @Test
  void renewal_neverShortensTheLeaseOfAnOpenFixedSection() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "600ms");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("renewed");
    lock.lock();
    lock.lock(5, SECONDS);
    Thread.sleep(900); // the watchdog renews every 200 ms
    long pttl = redisState.pttl("renewed");
    assertTrue(pttl > 3_500, "the fixed section needs ~4.1 s more; PTTL " + pttl);
    assertTrue(lock.isHeldByCurrentThread());
    assertFalse(clients.create(config).getLock("renewed").tryLock(), "held, as its holder believes");
    lock.unlock();
    lock.unlock();
    assertFalse(redisState.exists("renewed"));
    assertEquals(0, lost.count(), lost.toString());
  }

  // Contract 4: an unlock that leaves a watchdog section and a longer fixed section open sets the
  // TTL to the larger of the two, not to the watchdog lease below the fixed deadline.
  @Test
  void innerUnlock_leavingWatchdogAndLongerFixedSections_keepsTheFixedDeadline() {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "1s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("layered");
    lock.lock(5, SECONDS);
    lock.lock();
    lock.lock(200, MILLISECONDS);
    lock.unlock(); // the watchdog section and the 5 s one remain
    long pttl = redisState.pttl("layered");
    assertTrue(pttl > 4_000, "the outer fixed section needs ~5 s; PTTL " + pttl);
    lock.unlock(); // only the 5 s section remains: its own deadline
    pttl = redisState.pttl("layered");
    assertTrue(pttl > 3_500 && pttl <= 5_000, "PTTL " + pttl);
    lock.unlock();
    assertFalse(redisState.exists("layered"));
    assertEquals(0, lost.count(), lost.toString());
  }

  // Item 2: `lock(1, SECONDS); lock(); unlock();` does not turn the fixed lease into a renewed
  // one: the lock is free ~1 s after the outer lock(), and the outer section is lost.
  @Test
  void innerWatchdogSection_insideFixedLease_endsAtTheOuterDeadline() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("mixed");
    long start = System.nanoTime();
    lock.lock(1, SECONDS);
    lock.lock();
    lock.unlock();
    long pttl = redisState.pttl("mixed");
    assertTrue(pttl > 0 && pttl <= 1_000, "back to the outer 1 s lease, PTTL " + pttl);

    DistributedLock other = clients.create(config).getLock("mixed");
    assertTrue(other.tryLock(3, SECONDS), "free once the outer 1 s lease ran out (not renewed)");
    long freeAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(freeAfter <= 1_600, "acquired by another client " + freeAfter + " ms after the"
        + " outer lock(1 s)");
    LossRecorder.Report report = lost.awaitFirst(Duration.ofSeconds(2), "outer lease ran out");
    assertTrue(report.event().reason().contains("ran out"), report.event().reason());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    other.unlock();
  }

  // Item 6: a wait of Long.MAX_VALUE (any unit) saturates and waits; it must not overflow into
  // "return false at once". 0.1 overflowed when its first wait round took under 1 ms, so the
  // waiters start one by one on a warm connection pool and an existing subscription.
  @Test
  void tryLock_withLongMaxWait_waitsForTheRelease() throws Exception {
    DistributedLock held = clients.create(config).getLock("saturated");
    CountDownLatch locked = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Future<?> holding = threads.submit(() -> {
      held.lock();
      locked.countDown();
      release.await(10, SECONDS);
      held.unlock();
      return null;
    });
    assertTrue(locked.await(5, SECONDS));
    DistributedLock lock = clients.create(config).getLock("saturated");
    assertFalse(lock.tryLock()); // a pooled connection and the scripts are ready
    Future<Boolean> first = threads.submit(() -> acquireAndRelease(lock, 10, SECONDS));
    Await.until(Duration.ofSeconds(5), () -> redisState.subscribers(
        "redisson_lock__channel:{saturated}") == 1, "first waiter subscribed");
    List<Map.Entry<TimeUnit, Future<Boolean>>> waiters = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      for (TimeUnit unit : List.of(NANOSECONDS, MILLISECONDS, SECONDS, DAYS)) {
        waiters.add(Map.entry(unit,
            threads.submit(() -> acquireAndRelease(lock, Long.MAX_VALUE, unit))));
        Thread.sleep(20);
      }
    }
    release.countDown();
    List<TimeUnit> gaveUp = new ArrayList<>();
    for (Map.Entry<TimeUnit, Future<Boolean>> waiter : waiters) {
      if (!waiter.getValue().get(10, SECONDS)) {
        gaveUp.add(waiter.getKey());
      }
    }
    assertEquals(List.of(), gaveUp, "tryLock(Long.MAX_VALUE, unit) returned false for these units");
    assertTrue(first.get(10, SECONDS));
    holding.get(5, SECONDS);
  }

  private static boolean acquireAndRelease(DistributedLock lock, long wait, TimeUnit unit)
      throws InterruptedException {
    boolean acquired = lock.tryLock(wait, unit);
    if (acquired) {
      lock.unlock();
    }
    return acquired;
  }

  // Item 7: an out-of-range lease is refused with IllegalArgumentException before any I/O (no
  // script runs, no key appears), naming the value and the allowed range (1 ms .. 365 days).
  @Test
  void lease_outOfRange_isRejectedBeforeAnyIo() throws Exception {
    DistributedLock lock = clients.create(config).getLock("huge");
    Map<String, Executable> calls = new LinkedHashMap<>();
    calls.put("9223372036854775807", () -> lock.lock(Long.MAX_VALUE, MILLISECONDS));
    calls.put("366", () -> lock.lock(366, DAYS));
    calls.put(Long.toString(Long.MAX_VALUE / 2), () -> lock.lock(Long.MAX_VALUE / 2, DAYS));
    calls.put("9223372036854775806", () -> lock.tryLock(0, Long.MAX_VALUE - 1, MILLISECONDS));
    calls.put("31622400", () -> lock.tryLock(1, 31_622_400, SECONDS)); // 366 days
    calls.put("9223372036854775805",
        () -> lock.lockInterruptibly(Long.MAX_VALUE - 2, MILLISECONDS));
    calls.put("-5", () -> lock.lock(-5, SECONDS));
    long scriptsBefore = redisState.scriptCalls();
    List<String> failures = new ArrayList<>();
    for (Map.Entry<String, Executable> call : calls.entrySet()) {
      String value = call.getKey();
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call.getValue(),
          "lease " + value);
      if (!e.getMessage().contains(value) || !e.getMessage().contains("365")) {
        failures.add(value + ": " + e.getMessage());
      }
    }
    assertEquals(List.of(), failures, "messages must name the value and the range up to 365 days");
    assertEquals(scriptsBefore, redisState.scriptCalls(), "no script ran");
    assertFalse(redisState.exists("huge"), "nothing created in Redis");

    lock.lock(365, DAYS); // the upper bound itself is allowed
    long pttl = redisState.pttl("huge");
    assertTrue(pttl > DAYS.toMillis(364), "PTTL " + pttl);
    lock.unlock();
  }

  // Item 12: a re-entry after the outer explicit lease ran out (key gone) is refused and reports
  // the loss; it is never granted as a fresh count-1 hold.
  @Test
  void reentry_afterOuterLeaseExpired_reportsLossAndNeverStartsNewHold() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock lock = client.getLock("expired");
    lock.lock(1, SECONDS);
    Await.until(Duration.ofSeconds(3), () -> !redisState.exists("expired"),
        "the 1 s lease ran out in Redis");
    LockException refused = assertThrows(LockException.class, lock::lock,
        "a re-entry into a hold whose lease ran out");
    assertTrue(refused.getMessage().contains("lost"), refused.getMessage());
    assertFalse(redisState.exists("expired"), "the refused re-entry created nothing in Redis");
    LossRecorder.Report report = lost.awaitFirst(Duration.ofSeconds(2), "explicit lease ran out");
    assertTrue(report.event().reason().contains("ran out"), report.event().reason());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    assertReportedOnce(lost);

    lock.lock(); // all lost sections closed: the thread acquires afresh
    assertEquals("1", redisState.hget("expired", RedisProbe.fieldOf(client)));
    lock.unlock();
    assertFalse(redisState.exists("expired"));
  }

  // Item 13c: a renewal planned before unlock() must not stretch the thread's next explicit-lease
  // hold to the watchdog timeout. Ballast: 4000 other watchdog holds make each renewal round span
  // ~16 batches, so a round plans with a watchdog hold and sends after the thread swapped it for
  // an explicit one (0.1 stretched 1-5 of ~340 iterations per run here).
  @Test
  void staleRenewal_neverExtendsTheNextExplicitLease() throws Exception {
    LockClient client = clients.create(config, LockClientConfig.WATCHDOG_TIMEOUT, "600ms");
    LossRecorder lost = LossRecorder.on(client);
    threads.submit(() -> {
      for (int i = 0; i < 4_000; i++) {
        client.getLock("ballast-" + i).lock();
      }
      return null;
    }).get(20, SECONDS);
    DistributedLock lock = client.getLock("stale");
    long maxPttl = 0;
    int rounds = 0;
    int stretched = 0;
    long end = System.nanoTime() + SECONDS.toNanos(3);
    try (Jedis jedis = redis.server().admin()) {
      while (System.nanoTime() < end) {
        lock.lock();
        Thread.sleep(4);
        lock.unlock();
        lock.lock(200, MILLISECONDS);
        long pttl = 0;
        long explicitEnd = System.nanoTime() + MILLISECONDS.toNanos(4);
        while (System.nanoTime() < explicitEnd) {
          pttl = Math.max(pttl, jedis.pttl("stale"));
        }
        lock.unlock();
        stretched += pttl > 200 ? 1 : 0;
        maxPttl = Math.max(maxPttl, pttl);
        rounds++;
      }
    }
    assertTrue(maxPttl <= 200, "an explicit 200 ms lease was stretched to PTTL " + maxPttl
        + " (in " + stretched + " of " + rounds + " iterations)");
    assertEquals(0, lost.count(), lost.toString());
  }

  // Item 13d: tryLock with a wait that is already over after the first attempt makes one round
  // trip and never subscribes.
  @Test
  void tryLock_withWaitAlreadyOver_makesOneRoundTripAndNeverSubscribes() throws Exception {
    clients.create(config).getLock("brief").lock(30, SECONDS);
    LockClient waiting = clients.create(config);
    DistributedLock lock = waiting.getLock("brief");
    assertFalse(lock.tryLock()); // loads the scripts this client uses
    long scripts = redisState.scriptCalls();
    long subscribes = redisState.subscribeCalls();
    assertFalse(lock.tryLock(1, NANOSECONDS));
    Thread.sleep(300); // a subscription is made asynchronously: give one time to show up
    assertEquals(1, redisState.scriptCalls() - scripts, "script calls for tryLock(1 ns)");
    assertEquals(0, redisState.subscribeCalls() - subscribes, "subscriptions for tryLock(1 ns)");
    assertTrue(Clients.engine(waiting).waitedChannels().isEmpty());
  }

  private static void sleepUntil(long nanoTime) throws InterruptedException {
    long left = nanoTime - System.nanoTime();
    if (left > 0) {
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  /** No second report for the same loss shows up after a while. */
  static void assertReportedOnce(LossRecorder lost) throws InterruptedException {
    Thread.sleep(500);
    assertEquals(1, lost.count(), "each loss is reported exactly once: " + lost);
  }
}
