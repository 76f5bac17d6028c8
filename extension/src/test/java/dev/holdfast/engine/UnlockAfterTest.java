package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link LockEngine#unlockAfter}: the hold ends here (no renewal, no loss reported) while the lock
 * stays taken in Redis for the time left, against everyone — the releasing thread included — and
 * then frees itself. What {@code @Locked(holdAtLeast = …)} is built on.
 */
class UnlockAfterTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private LockClient client;
  private LockClient other;
  private LossRecorder losses;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    Map<String, String> config = Map.of("holdfast.redis.address", redis.server().uri());
    client = clients.create(config);
    other = clients.create(config);
    losses = LossRecorder.on(client);
  }

  /**
   * A kept read lock excludes writers, the keeping thread's own write lock included (found by the
   * widened model test: the kept section kept the thread's field, so the thread's write lock took
   * it for its own read section and its unlock deleted the kept lock).
   */
  @Test
  void keptReadLock_excludesWritersIncludingItsOwnThread_untilTheTimeIsUp() throws Exception {
    dev.holdfast.DistributedReadWriteLock rw = client.getReadWriteLock("report");
    rw.readLock().lock();
    long kept = System.nanoTime();
    Clients.engine(client).unlockAfter(rw.readLock(), Duration.ofMillis(1_500));

    assertFalse(rw.readLock().isHeldByCurrentThread(), "the read hold ended here");
    assertFalse(rw.writeLock().tryLock(), "the keeping thread must not write under its kept read");
    assertFalse(CompletableFuture.supplyAsync(() -> other.getReadWriteLock("report").writeLock()
        .tryLock()).get(5, TimeUnit.SECONDS), "another client must not write either");
    assertTrue(rw.writeLock().tryLock(10, TimeUnit.SECONDS), "written once the time is up");
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - kept);
    rw.writeLock().unlock();
    assertTrue(waited >= 1_400, "writable after " + waited + "ms, before the 1500ms kept");
    assertEquals(0, losses.count(), "keeping the lock is not losing it: " + losses);
  }

  @Test
  void keptLock_excludesEveryoneIncludingItsThread_untilTheTimeIsUp() throws Exception {
    DistributedLock lock = client.getLock("nightly");
    lock.lock();
    long kept = System.nanoTime();
    Clients.engine(client).unlockAfter(lock, Duration.ofMillis(1_500));

    assertFalse(lock.isHeldByCurrentThread(), "the hold ended here");
    assertEquals(0, lock.getHoldCount());
    assertTrue(lock.isLocked(), "but the lock stays taken in Redis");
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertFalse(lock.tryLock(), "the same thread must not re-enter a kept lock");
    assertFalse(CompletableFuture.supplyAsync(() -> other.getLock("nightly").tryLock())
        .get(5, TimeUnit.SECONDS), "another client must not take a kept lock");

    assertTrue(CompletableFuture.supplyAsync(() -> {
      try {
        return other.getLock("nightly").tryLock(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    }).get(15, TimeUnit.SECONDS));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - kept);
    assertTrue(waited >= 1_400, "freed after " + waited + "ms, before the 1500ms kept");
    assertEquals(0, losses.count(), "keeping the lock is not losing it: " + losses);
  }

  @Test
  void nestedHold_unlocksPlainly_andTheOuterHoldStays() {
    DistributedLock lock = client.getLock("nested");
    lock.lock();
    lock.lock();
    Clients.engine(client).unlockAfter(lock, Duration.ofSeconds(30));
    assertEquals(1, lock.getHoldCount());
    lock.unlock();
    assertFalse(lock.isLocked(), "the final plain unlock released it");
  }

  @Test
  void nothingLeftToKeep_unlocksPlainly() {
    DistributedLock lock = client.getLock("late");
    lock.lock();
    Clients.engine(client).unlockAfter(lock, Duration.ZERO);
    assertFalse(lock.isLocked());
  }

  @Test
  void keepingALockNotHeld_throwsLikeUnlock() {
    DistributedLock lock = client.getLock("never");
    assertThrows(IllegalMonitorStateException.class,
        () -> Clients.engine(client).unlockAfter(lock, Duration.ofSeconds(1)));
  }

  @Test
  void keptLock_isNotRenewed() throws Exception {
    LockClient fast = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms"));
    DistributedLock lock = fast.getLock("unrenewed");
    lock.lock();
    Clients.engine(fast).unlockAfter(lock, Duration.ofMillis(300));
    Await.until(Duration.ofSeconds(5), () -> !lock.isLocked(), "the kept lock expires");
  }
}
