package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * Issue 15 §1: lock {@code a} (slotted {@code {a}}) and lock {@code {a}} share Redisson's unlock
 * channel, yet are two locks: no local waiting structure, handoff, fair queue or reader timeout
 * key of one may serve the other. Also across clients whose key prefixes make the same pair
 * ({@code p:} + {@code a} against {@code {p:a}}).
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SharedChannelTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private RedisProbe redisState;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    redisState = new RedisProbe(redis.server());
  }

  @AfterEach
  void stopThreads() throws InterruptedException {
    threads.shutdownNow();
    threads.awaitTermination(10, TimeUnit.SECONDS);
  }

  private LockClient client(String... extra) {
    return clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()), extra);
  }

  /** Waits until {@code t} is parked waiting for a lock (as a waiter, after its first try). */
  private static void awaitParked(Thread t, String what) {
    Await.until(Duration.ofSeconds(10),
        () -> LockSupport.getBlocker(t) instanceof WaitEntry.Waiter, what + " parked");
  }

  /** Runs {@code task} on a pool thread and hands back that thread. */
  private <T> Future<T> onThread(java.util.concurrent.Callable<T> task, Thread[] thread)
      throws InterruptedException {
    CountDownLatch started = new CountDownLatch(1);
    Future<T> f = threads.submit(() -> {
      thread[0] = Thread.currentThread();
      started.countDown();
      return task.call();
    });
    assertTrue(started.await(10, TimeUnit.SECONDS));
    return f;
  }

  @Test
  void finalUnlockOfA_withAThreadWaitingForBracedA_neverHandsItTheOtherLock() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    LossRecorder lost = LossRecorder.on(ours);
    DistributedLock otherBraced = other.getLock("{a}");
    assertTrue(otherBraced.tryLock(), "another client holds {a}");

    CountDownLatch release = new CountDownLatch(1);
    Thread[] holder = new Thread[1];
    Future<Boolean> holding = onThread(() -> {
      DistributedLock a = ours.getLock("a");
      a.lock();
      release.await();
      a.unlock();
      return true;
    }, holder);
    Await.until(Duration.ofSeconds(10), () -> redisState.exists("a"), "a held");

    // First in line on the shared channel: a thread of ours waiting for {a}, then one for a.
    Thread[] bracedWaiter = new Thread[1];
    Future<Boolean> braced = onThread(() -> ours.getLock("{a}").tryLock(4, TimeUnit.SECONDS),
        bracedWaiter);
    awaitParked(bracedWaiter[0], "the waiter for {a}");
    Thread[] plainWaiter = new Thread[1];
    Future<Boolean> plain = onThread(() -> {
      DistributedLock a = ours.getLock("a");
      if (!a.tryLock(20, TimeUnit.SECONDS)) {
        return false;
      }
      boolean held = a.isHeldByCurrentThread();
      a.unlock();
      return held;
    }, plainWaiter);
    awaitParked(plainWaiter[0], "the waiter for a");

    release.countDown();
    assertTrue(holding.get(20, TimeUnit.SECONDS));
    assertTrue(plain.get(20, TimeUnit.SECONDS), "the waiter for a got a, and held it");
    assertFalse(braced.get(20, TimeUnit.SECONDS),
        "the waiter for {a} got it while another client holds {a}");
    assertFalse(redisState.exists("a"), "a is free: nobody holds it under an unrenewed field");
    assertTrue(otherBraced.isHeldByCurrentThread());
    otherBraced.unlock();
    assertEquals(0, lost.count(), lost.toString());
  }

  @Test
  void finalUnlockOfA_withOnlyAWaiterForBracedA_freesA() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    LossRecorder lost = LossRecorder.on(ours);
    DistributedLock otherBraced = other.getLock("{a}");
    assertTrue(otherBraced.tryLock());
    DistributedLock a = ours.getLock("a");
    a.lock();
    Thread[] waiter = new Thread[1];
    Future<Boolean> braced = onThread(() -> {
      DistributedLock b = ours.getLock("{a}");
      b.lock();
      b.unlock();
      return true;
    }, waiter);
    awaitParked(waiter[0], "the waiter for {a}");
    a.unlock();
    assertFalse(redisState.exists("a"), "the final unlock of a freed a");
    assertTrue(otherBraced.isHeldByCurrentThread());
    assertFalse(braced.isDone(), "the waiter for {a} got it while another client holds {a}");
    otherBraced.unlock();
    assertTrue(braced.get(20, TimeUnit.SECONDS), "the waiter for {a} gets it once it is free");
    assertEquals(0, lost.count(), lost.toString());
  }

  @Test
  void unlockMessageOnTheSharedChannel_wakesAWaiterOfEachLock() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedLock otherA = other.getLock("a");
    DistributedLock otherBraced = other.getLock("{a}");
    otherA.lock();
    otherBraced.lock(); // both with 30 s watchdog leases: a waiter's park lasts up to that
    Thread[] plainWaiter = new Thread[1];
    Future<Boolean> plain = onThread(() -> ours.getLock("a").tryLock(40, TimeUnit.SECONDS),
        plainWaiter);
    awaitParked(plainWaiter[0], "the waiter for a");
    Thread[] bracedWaiter = new Thread[1];
    Future<Long> braced = onThread(() -> {
      DistributedLock b = ours.getLock("{a}");
      b.lock();
      long at = System.nanoTime();
      b.unlock();
      return at;
    }, bracedWaiter);
    awaitParked(bracedWaiter[0], "the waiter for {a}");

    long releasedAt = System.nanoTime();
    otherBraced.unlock(); // one unlock message on the channel both locks share
    long millis = Waiters.millisUntilAcquired(braced, releasedAt);
    assertTrue(millis < 10_000, "the waiter for {a} slept through its unlock: " + millis + " ms");
    assertFalse(plain.isDone(), "a is still held by the other client");
    otherA.unlock();
    assertTrue(plain.get(20, TimeUnit.SECONDS));
  }

  @Test
  void fairA_andFairBracedA_haveSeparateQueues() throws Exception {
    assertFairLocksIndependent("", "a", "{a}");
  }

  @Test
  void fairLocks_ofClientsWithKeyPrefixes_thatMakeTheSamePair_haveSeparateQueues()
      throws Exception {
    // "p:" + "a" is key p:a (slotted {p:a}); "{p:a}" without a prefix is its braced twin.
    assertFairLocksIndependent("p:", "a", "{p:a}");
  }

  /**
   * A waiter queued for fair lock {@code plainName} (of clients with {@code plainPrefix})
   * neither blocks nor is granted fair lock {@code bracedName} (of clients without a prefix),
   * and the other way round.
   */
  private void assertFairLocksIndependent(String plainPrefix, String plainName,
      String bracedName) throws Exception {
    String[] prefixed = plainPrefix.isEmpty() ? new String[0]
        : new String[] {LockClientConfig.KEY_PREFIX, plainPrefix};
    LockClient plainClient = client(prefixed);
    LockClient plainOther = client(prefixed);
    LockClient bracedClient = client();
    DistributedLock plainHolder = plainClient.getFairLock(plainName);
    plainHolder.lock();
    Thread[] waiter = new Thread[1];
    CountDownLatch plainAcquired = new CountDownLatch(1);
    CountDownLatch waiterRelease = new CountDownLatch(1);
    Future<Boolean> plainWaiter = onThread(() -> {
      DistributedLock l = plainOther.getFairLock(plainName);
      l.lock();
      plainAcquired.countDown();
      waiterRelease.await();
      l.unlock();
      return true;
    }, waiter);
    awaitParked(waiter[0], "the waiter for fair " + plainName);

    // The braced lock is free: a waiter of the other lock must not stand ahead of its callers.
    CountDownLatch bracedTaken = new CountDownLatch(1);
    CountDownLatch bracedRelease = new CountDownLatch(1);
    Thread[] bracedHolder = new Thread[1];
    Future<Boolean> bracedFirst = onThread(() -> {
      DistributedLock l = bracedClient.getFairLock(bracedName);
      if (!l.tryLock()) {
        return false;
      }
      bracedTaken.countDown();
      bracedRelease.await();
      l.unlock();
      return true;
    }, bracedHolder);
    assertTrue(bracedTaken.await(20, TimeUnit.SECONDS) || bracedFirst.get(),
        "fair " + bracedName + " is free, yet refused");
    Thread[] bracedWaiter = new Thread[1];
    Future<Boolean> bracedSecond = onThread(() -> {
      DistributedLock l = bracedClient.getFairLock(bracedName);
      if (!l.tryLock(30, TimeUnit.SECONDS)) {
        return false;
      }
      l.unlock();
      return true;
    }, bracedWaiter);
    awaitParked(bracedWaiter[0], "a waiter for fair " + bracedName);

    // Releasing the plain lock grants its own waiter, not the braced lock's.
    plainHolder.unlock();
    assertTrue(plainAcquired.await(20, TimeUnit.SECONDS), "fair " + plainName
        + " granted to its own waiter");
    assertFalse(bracedSecond.isDone(), "fair " + bracedName + " is still held by its holder");
    waiterRelease.countDown();
    assertTrue(plainWaiter.get(20, TimeUnit.SECONDS));
    assertFalse(bracedSecond.isDone(), "fair " + bracedName + " is still held by its holder");
    // And the braced waiter gets its lock once its holder lets go.
    bracedRelease.countDown();
    assertTrue(bracedFirst.get(20, TimeUnit.SECONDS));
    assertTrue(bracedSecond.get(20, TimeUnit.SECONDS));
  }

  @Test
  void readHoldsOfAAndBracedA_bySameThread_doNotShareTimeoutKeys() throws Exception {
    LockClient ours = client(LockClientConfig.WATCHDOG_TIMEOUT, "900ms");
    LossRecorder lost = LossRecorder.on(ours);
    String field = RedisProbe.fieldOf(ours);
    DistributedReadWriteLock a = ours.getReadWriteLock("a");
    DistributedReadWriteLock braced = ours.getReadWriteLock("{a}");
    a.readLock().lock();
    braced.readLock().lock();
    String aTimeout = "{a}:" + field + ":rwlock_timeout:1"; // Redisson's name for lock a
    assertTrue(redisExists(aTimeout));
    braced.readLock().unlock();
    assertTrue(redisExists(aTimeout), "releasing {a} deleted the timeout key of a's read hold");
    // Three watchdog rounds: the hold of a stays renewed and is never reported lost.
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(2_700);
    while (System.nanoTime() < end) {
      assertEquals(0, lost.count(), lost.toString());
      Thread.sleep(100);
    }
    assertTrue(a.readLock().isHeldByCurrentThread());
    assertTrue(redisExists(aTimeout));
    a.readLock().unlock();
    assertFalse(redisState.exists("a"));
    assertFalse(redisState.exists("{a}"));
    assertEquals(0, lost.count(), lost.toString());
  }

  @Test
  void readHoldsOfAAndBracedA_haveDistinctTimeoutKeys_inEitherReleaseOrder() throws Exception {
    LockClient ours = client();
    String field = RedisProbe.fieldOf(ours);
    DistributedReadWriteLock a = ours.getReadWriteLock("a");
    DistributedReadWriteLock braced = ours.getReadWriteLock("{a}");
    braced.readLock().lock();
    a.readLock().lock();
    a.readLock().unlock();
    assertTrue(braced.readLock().isHeldByCurrentThread());
    try (Jedis jedis = redis.server().admin()) {
      long keys = jedis.keys("*rwlock_timeout*").size();
      assertEquals(1, keys, "{a}'s read hold keeps its own timeout key");
      assertNotEquals(-2, jedis.pttl("{a}"));
    }
    braced.readLock().unlock();
    assertFalse(redisState.exists("{a}"));
    assertFalse(redisExists("{a}:" + field + ":rwlock_timeout:1"));
  }

  private boolean redisExists(String key) {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.exists(key);
    }
  }
}
