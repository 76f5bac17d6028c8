package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.LockLost;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;

/**
 * {@link LockHold}: a hold owned by an object, not a thread — its own owner in Redis, released
 * from any thread once, excluding every other owner (the acquiring thread's holds included), for
 * every kind of lock, with loss, fencing, timeouts, interrupts, asynchronous acquisition and
 * garbage collection handled like a thread's hold.
 */
class LockHoldTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private LockClient client;
  private LockClient other;
  private LossRecorder losses;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri());
    client = clients.create(config);
    other = clients.create(config);
    losses = LossRecorder.on(client);
  }

  @AfterEach
  void tearDown() {
    if (redis.server().isPaused()) {
      redis.server().resume();
    }
    threads.shutdownNow();
  }

  /** The lock of every kind under test, by name. */
  private static Function<LockClient, DistributedLock> kind(String kind, String name) {
    return switch (kind) {
      case "exclusive" -> c -> c.getLock(name);
      case "fair" -> c -> c.getFairLock(name);
      case "write" -> c -> c.getReadWriteLock(name).writeLock();
      case "fenced" -> c -> c.getFencedLock(name);
      default -> throw new IllegalArgumentException(kind);
    };
  }

  private <T> T onOtherThread(java.util.concurrent.Callable<T> call) throws Exception {
    return threads.submit(call).get(20, TimeUnit.SECONDS);
  }

  @ParameterizedTest
  @ValueSource(strings = {"exclusive", "fair", "write", "fenced"})
  void hold_excludesOtherClientsAndTheAcquiringThread_andIsReleasedFromAnotherThread(String kind)
      throws Exception {
    Function<LockClient, DistributedLock> lockOf = kind(kind, "orders-" + kind);
    DistributedLock lock = lockOf.apply(client);
    LockHold hold = lock.acquire(Duration.ofSeconds(5), null);

    assertTrue(hold.isHeld());
    assertEquals("orders-" + kind, hold.lockName());
    assertTrue(lock.isLocked());
    assertFalse(lock.tryLock(), "the acquiring thread must not take it beside its hold");
    assertFalse(lock.isHeldByCurrentThread(), "the hold is not the thread's");
    assertFalse(onOtherThread(() -> lockOf.apply(client).tryLock()), "another thread");
    assertFalse(onOtherThread(() -> lockOf.apply(other).tryLock()), "another client");
    assertThrows(LockNotAcquiredException.class,
        () -> lock.acquire(Duration.ZERO, null), "not reentrant: a second hold is refused");

    onOtherThread(() -> {
      hold.release();
      return null;
    });
    assertFalse(hold.isHeld());
    assertFalse(lock.isLocked(), "released from another thread");
    hold.release(); // a second release does nothing
    hold.close();
    assertTrue(lock.tryLock(), "free for the thread again");
    lock.unlock();
    assertEquals(0, losses.count(), losses.toString());
  }

  @Test
  void threadHold_excludesAHoldOfTheSameThread() throws Exception {
    DistributedLock lock = client.getLock("mine");
    lock.lock();
    LockNotAcquiredException e = assertThrows(LockNotAcquiredException.class,
        () -> lock.acquire(Duration.ofMillis(200), null));
    assertEquals("mine", e.lockName());
    assertEquals(Duration.ofMillis(200), e.waitTime());
    lock.unlock();
    try (LockHold hold = lock.acquire(Duration.ZERO, null)) {
      assertTrue(hold.isHeld());
    }
    assertFalse(lock.isLocked());
  }

  @Test
  void hold_isAnOrdinaryHashFieldOfItsOwnOwner_negativeNeverAThread() throws Exception {
    DistributedLock lock = client.getLock("layout");
    OwnedLockHold a = (OwnedLockHold) lock.acquire(null, null);
    String clientId = Clients.engine(client).clientId();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(Map.of(clientId + ":" + a.ownerId, "1"), jedis.hgetAll("layout"));
    }
    assertTrue(a.ownerId < 0, "owner id " + a.ownerId);
    a.release();
    OwnedLockHold b = (OwnedLockHold) lock.acquire(null, null);
    assertTrue(b.ownerId < a.ownerId, "owner ids are never reused");
    b.release();
  }

  @Test
  void readHolds_shareWithReaders_excludeWriters_includingTheAcquiringThread() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("report");
    LockHold r1 = rw.readLock().acquire(Duration.ZERO, null);
    LockHold r2 = rw.readLock().acquire(Duration.ZERO, Duration.ofSeconds(30));
    assertTrue(rw.readLock().tryLock(), "readers share");
    rw.readLock().unlock();
    assertFalse(rw.writeLock().tryLock(), "no writer while a read hold is held");
    assertThrows(LockNotAcquiredException.class,
        () -> rw.writeLock().acquire(Duration.ofMillis(100), null));
    assertFalse(onOtherThread(() -> other.getReadWriteLock("report").writeLock().tryLock()));
    r1.release();
    assertFalse(rw.writeLock().tryLock());
    onOtherThread(() -> {
      r2.release();
      return null;
    });
    assertTrue(rw.writeLock().tryLock(), "writable once every read hold is released");
    assertThrows(LockNotAcquiredException.class,
        () -> rw.readLock().acquire(Duration.ZERO, null),
        "a read hold is another owner: it does not share the thread's write lock");
    rw.writeLock().unlock();
  }

  @Test
  void threadReadHold_makesAWriteHoldWait_notRefuseAsAnUpgrade() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("upgrade");
    rw.readLock().lock();
    CompletableFuture<LockHold> write = rw.writeLock().acquireAsync(null, null)
        .toCompletableFuture();
    // It waits for the thread's read hold as for another owner's, instead of refusing to wait
    // for itself as a thread's upgrade does.
    assertThrows(java.util.concurrent.TimeoutException.class,
        () -> write.get(300, TimeUnit.MILLISECONDS));
    rw.readLock().unlock();
    LockHold hold = write.get(20, TimeUnit.SECONDS);
    assertTrue(hold.isHeld());
    assertFalse(rw.readLock().tryLock(), "the write hold excludes the thread's readers");
    hold.release();
    assertTrue(rw.readLock().tryLock());
    rw.readLock().unlock();
  }

  @Test
  void fencedHolds_getIncreasingTokens_plainHoldsNone() throws Exception {
    FencedLock fenced = client.getFencedLock("fenced");
    LockHold first = fenced.acquire(null, null);
    Long token = first.token();
    assertNotNull(token);
    first.release();
    assertEquals(token, first.token(), "a released hold keeps its token");
    LockHold second = fenced.acquire(null, Duration.ofSeconds(10));
    assertTrue(second.token() > token, second.token() + " after " + token);
    Long thread = onOtherThread(() -> other.getFencedLock("fenced").tryLockAndGetToken(5,
        TimeUnit.SECONDS));
    assertNull(thread, "the hold excludes fenced thread holds too");
    second.release();
    Long third = onOtherThread(() -> other.getFencedLock("fenced").tryLockAndGetToken());
    assertTrue(third > second.token());
    try (LockHold plain = client.getLock("plain").acquire(null, null)) {
      assertNull(plain.token());
    }
  }

  @Test
  void acquire_timesOut_withLockNotAcquired_andHoldsNothing() throws Exception {
    DistributedLock lock = client.getLock("busy");
    assertTrue(onOtherThread(() -> other.getLock("busy").tryLock()));
    long start = System.nanoTime();
    LockNotAcquiredException e = assertThrows(LockNotAcquiredException.class,
        () -> lock.acquire(Duration.ofMillis(300), Duration.ofSeconds(5)));
    assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(300));
    assertEquals(Duration.ofMillis(300), e.waitTime());
    assertThrows(LockNotAcquiredException.class, () -> lock.acquire(Duration.ofMillis(-1), null));
    assertEquals(0, Clients.engine(client).activeHolds());
  }

  @Test
  void acquire_validatesTheLease() {
    DistributedLock lock = client.getLock("lease");
    assertThrows(IllegalArgumentException.class, () -> lock.acquire(null, Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> lock.acquire(null, Duration.ofDays(366)));
    assertThrows(IllegalArgumentException.class, () -> lock.acquireAsync(null, Duration.ZERO));
  }

  @Test
  void fixedLease_expiresWithoutRenewal_andIsReportedLost() throws Exception {
    DistributedLock lock = client.getLock("short");
    LockHold hold = lock.acquire(null, Duration.ofMillis(300));
    assertTrue(lock.isLocked());
    Await.until(Duration.ofSeconds(10), () -> !hold.isHeld(), "the lease ran out");
    // Believed lost a little before Redis lets it go (the clock-drift margin).
    assertTrue(onOtherThread(() -> other.getLock("short").tryLock(5, TimeUnit.SECONDS)));
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        hold::release);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    hold.release(); // a second release does nothing
  }

  @Test
  void acquire_interrupted_throwsAndHoldsNothing() throws Exception {
    assertTrue(onOtherThread(() -> other.getLock("held").tryLock()));
    DistributedLock lock = client.getLock("held");
    AtomicReference<Throwable> thrown = new AtomicReference<>();
    CountDownLatch started = new CountDownLatch(1);
    Thread waiter = new Thread(() -> {
      started.countDown();
      try {
        lock.acquire(null, null);
      } catch (Throwable t) {
        thrown.set(t);
      }
    });
    waiter.start();
    started.await();
    Await.until(Duration.ofSeconds(10), () -> waiter.getState() == Thread.State.TIMED_WAITING
        || waiter.getState() == Thread.State.WAITING, "the waiter parks");
    waiter.interrupt();
    waiter.join(20_000);
    assertInstanceOf(InterruptedException.class, thrown.get());
    assertEquals(0, Clients.engine(client).activeHolds());
  }

  @Test
  void lostHold_isReportedWithItsOwnerId_andReleaseSaysLost() throws Exception {
    DistributedLock lock = client.getLock("lost");
    OwnedLockHold hold = (OwnedLockHold) lock.acquire(null, null);
    assertTrue(onOtherThread(() -> other.getLock("lost").forceUnlock()));
    assertTrue(lock.tryLock(5, TimeUnit.SECONDS)); // the thread holds it now
    // The watchdog's next renewal finds the hold's field gone.
    LockLost lost = losses.awaitFirst(Duration.ofSeconds(30), "the hold's renewal").event();
    assertEquals(hold.ownerId, lost.threadId(), "reported under the hold's owner id");
    assertEquals("lost", lost.lockName());
    assertTrue(lost.reason().contains("no longer held by this LockHold"), lost.reason());
    assertFalse(hold.isHeld());
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        hold::release);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
    hold.release(); // a second release does nothing
    assertTrue(lock.isHeldByCurrentThread(), "the failed release did not touch the thread's");
    lock.unlock();
  }

  @Test
  void forceUnlock_onThisClient_losesTheHoldAtOnce() throws Exception {
    DistributedLock lock = client.getLock("forced");
    LockHold hold = lock.acquire(null, null);
    assertTrue(lock.forceUnlock());
    assertFalse(hold.isHeld());
    assertTrue(hold.toString().contains("lost"), hold.toString());
    assertThrows(IllegalMonitorStateException.class, hold::release);
  }

  @Test
  void acquireAsync_completesOnAClientThread_andReleaseAsyncReleases() throws Exception {
    DistributedLock lock = client.getLock("async");
    lock.lock(); // so that the stage is still pending when the callbacks are attached
    AtomicReference<Thread> acquiredOn = new AtomicReference<>();
    CompletableFuture<LockHold> f = lock.acquireAsync(Duration.ofSeconds(20), null)
        .whenComplete((h, t) -> acquiredOn.set(Thread.currentThread())).toCompletableFuture();
    lock.unlock();
    LockHold hold = f.get(20, TimeUnit.SECONDS);
    assertTrue(hold.isHeld());
    assertTrue(acquiredOn.get().getName().startsWith("holdfast-async-"),
        "completed on " + acquiredOn.get());
    assertTrue(acquiredOn.get().isDaemon(), "never keeps the JVM alive");
    if (Runtime.version().feature() >= 21) {
      assertTrue((Boolean) Thread.class.getMethod("isVirtual").invoke(acquiredOn.get()),
          "a virtual thread per acquisition where the JVM has them: " + acquiredOn.get());
    }
    assertFalse(onOtherThread(() -> other.getLock("async").tryLock()));
    AtomicReference<Thread> releasedOn = new AtomicReference<>();
    redis.server().pause(); // so that the release is still pending when the callback is attached
    CompletableFuture<Void> released;
    try {
      released = hold.releaseAsync().toCompletableFuture()
          .whenComplete((v, t) -> releasedOn.set(Thread.currentThread()));
      assertFalse(released.isDone(), "releaseAsync does not wait for Redis");
    } finally {
      redis.server().resume();
    }
    released.get(20, TimeUnit.SECONDS);
    assertTrue(releasedOn.get().getName().startsWith("holdfast-async-"),
        "released on " + releasedOn.get());
    assertFalse(hold.isHeld());
    assertFalse(lock.isLocked());
    hold.releaseAsync().toCompletableFuture().get(20, TimeUnit.SECONDS); // second: nothing
  }

  @Test
  void concurrentReleases_releaseOnce() throws Exception {
    DistributedLock lock = client.getLock("twice");
    for (int round = 0; round < 20; round++) {
      LockHold hold = lock.acquire(null, null);
      CountDownLatch go = new CountDownLatch(1);
      Future<?> a = threads.submit(() -> {
        go.await();
        hold.release();
        return null;
      });
      Future<?> b = threads.submit(() -> {
        go.await();
        hold.releaseAsync().toCompletableFuture().join();
        return null;
      });
      go.countDown();
      a.get(20, TimeUnit.SECONDS);
      b.get(20, TimeUnit.SECONDS);
      assertFalse(hold.isHeld());
      assertFalse(lock.isLocked(), "round " + round);
    }
    assertEquals(0, losses.count(), losses.toString());
  }

  @Test
  void releaseInDoubt_endsTheHold_andCompletesInTheBackground() throws Exception {
    LockClient quick = clients.create(config, "holdfast.redis.timeout", "300ms");
    DistributedLock lock = quick.getLock("doubt");
    LockHold hold = lock.acquire(null, null);
    redis.server().pause();
    try {
      RuntimeException e = assertThrows(RuntimeException.class, hold::release);
      assertInstanceOf(dev.holdfast.LockException.class, e, String.valueOf(e));
      assertTrue(e.getMessage().contains("LockHold"), e.getMessage());
      assertFalse(hold.isHeld(), "over for its owner, whatever Redis did");
    } finally {
      redis.server().resume();
    }
    hold.release(); // nothing: it ended
    Await.until(Duration.ofSeconds(30), () -> !lock.isLocked(), "released in the background");
    assertTrue(onOtherThread(() -> other.getLock("doubt").tryLock()));
  }

  @Test
  void acquireAsync_timesOut_completingWithLockNotAcquired() throws Exception {
    assertTrue(onOtherThread(() -> other.getLock("slow").tryLock()));
    CompletableFuture<LockHold> f = client.getLock("slow")
        .acquireAsync(Duration.ofMillis(200), null).toCompletableFuture();
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> f.get(20, TimeUnit.SECONDS));
    assertInstanceOf(LockNotAcquiredException.class, e.getCause());
  }

  @Test
  void acquireAsync_doesNotBlockTheCaller_evenWhenRedisDoesNotAnswer() throws Exception {
    DistributedLock lock = client.getLock("paused");
    assertFalse(lock.isLocked()); // connected
    redis.server().pause();
    CompletableFuture<LockHold> f = CompletableFuture.supplyAsync(
        () -> lock.acquireAsync(null, null), threads)
        .thenCompose(stage -> CompletableFuture.completedFuture(stage.toCompletableFuture()))
        .get(5, TimeUnit.SECONDS); // returned while Redis answers nothing
    assertFalse(f.isDone(), "no answer from Redis yet");
    redis.server().resume();
    LockHold hold = f.get(30, TimeUnit.SECONDS);
    assertTrue(hold.isHeld());
    hold.release();
  }

  @Test
  void cancellingAPendingAcquireAsync_leavesNothingHeld() throws Exception {
    assertTrue(onOtherThread(() -> other.getLock("queue").tryLock()));
    DistributedLock lock = client.getLock("queue");
    CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
    Await.until(Duration.ofSeconds(10),
        () -> Clients.engine(client).waitedChannels().size() == 1, "the acquisition waits");
    assertTrue(f.cancel(true));
    assertThrows(CancellationException.class, f::join);
    Await.until(Duration.ofSeconds(10), () -> Clients.engine(client).waitedChannels().isEmpty(),
        "the cancelled acquisition gives up waiting");
    onOtherThread(() -> {
      other.getLock("queue").forceUnlock();
      return null;
    });
    assertFalse(lock.isLocked());
    assertEquals(0, Clients.engine(client).activeHolds());
    assertTrue(lock.tryLock(), "nothing of the cancelled acquisition is left");
    lock.unlock();
  }

  @Test
  void cancelRacingTheGrant_releasesWhatWasGranted() throws Exception {
    DistributedLock lock = client.getLock("race");
    for (int i = 0; i < 50; i++) {
      CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
      boolean cancelled = f.cancel(true);
      if (!cancelled) {
        f.join().release();
      }
      Await.until(Duration.ofSeconds(10), () -> !lock.isLocked(),
          "round " + i + ": nothing left held");
    }
    assertEquals(0, losses.count(), losses.toString());
  }

  @Test
  void redissonWaiter_wakesOnRelease() throws Exception {
    org.redisson.config.Config rc = new org.redisson.config.Config();
    rc.useSingleServer().setAddress(redis.server().uri());
    org.redisson.api.RedissonClient redisson = org.redisson.Redisson.create(rc);
    try {
      LockHold hold = client.getLock("interop").acquire(null, null);
      org.redisson.api.RLock rlock = redisson.getLock("interop");
      assertFalse(rlock.tryLock(), "Redisson sees the hold as a holder");
      CountDownLatch waiting = new CountDownLatch(1);
      Future<Long> waited = threads.submit(() -> {
        waiting.countDown();
        long start = System.nanoTime();
        // Waits on the unlock message: the hold's watchdog lease (30 s) would take far longer.
        boolean got = rlock.tryLock(20, TimeUnit.SECONDS);
        long took = System.nanoTime() - start;
        if (got) {
          rlock.unlock();
        }
        return got ? took : -1;
      });
      waiting.await();
      try (Jedis jedis = redis.server().admin()) {
        Await.until(Duration.ofSeconds(10), () -> jedis.pubsubNumSub(
            "redisson_lock__channel:{interop}").values().stream().mapToLong(Long::longValue)
            .sum() > 0, "the Redisson waiter subscribed");
      }
      hold.release();
      long took = waited.get(30, TimeUnit.SECONDS);
      assertTrue(took > 0 && took < TimeUnit.SECONDS.toNanos(10),
          "Redisson woke after " + TimeUnit.NANOSECONDS.toMillis(took) + "ms");
    } finally {
      redisson.shutdown();
    }
  }

  @Test
  void localWaiterHold_receivesAHandoff_andAThreadReceivesOneFromAHold() throws Exception {
    DistributedLock lock = client.getLock("handoff");
    lock.lock();
    CompletableFuture<LockHold> f = lock.acquireAsync(null, null).toCompletableFuture();
    awaitCandidates("handoff", 1);
    lock.unlock();
    LockHold hold = f.get(20, TimeUnit.SECONDS);
    assertTrue(hold.isHeld());
    assertEquals(1, Clients.engine(client).localHandoffs(), "handed from the thread to the hold");
    assertFalse(lock.tryLock());
    Future<Boolean> thread = threads.submit(() -> lock.tryLock(20, TimeUnit.SECONDS));
    awaitCandidates("handoff", 1);
    hold.release();
    assertTrue(thread.get(30, TimeUnit.SECONDS));
    assertEquals(2, Clients.engine(client).localHandoffs(), "handed from the hold to a thread");
    assertFalse(hold.isHeld());
    assertEquals(0, losses.count(), losses.toString());
  }

  /** Waits until {@code n} acquisitions of {@link #client} are parked as handoff candidates. */
  private void awaitCandidates(String name, int n) {
    LockEngine engine = Clients.engine(client);
    LockNames names = LockNames.of("", name);
    Await.until(Duration.ofSeconds(10), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == n;
    }, n + " handoff candidate(s) parked on " + name);
  }

  @Test
  void garbageCollectedHold_isGivenUpAndReported() throws Exception {
    LockClient quick = clients.create(config, "holdfast.watchdog-timeout", "3s");
    LossRecorder quickLosses = LossRecorder.on(quick);
    long owner = acquireAndDrop(quick.getLock("forgotten"));
    Await.until(Duration.ofSeconds(60), () -> {
      System.gc();
      return quickLosses.count() > 0;
    }, "the collected hold is given up");
    LockLost lost = quickLosses.reports().get(0).event();
    assertEquals(owner, lost.threadId());
    assertTrue(lost.reason().contains("garbage collected"), lost.reason());
    Await.until(Duration.ofSeconds(30), () -> !quick.getLock("forgotten").isLocked(),
        "released in the background");
  }

  private static long acquireAndDrop(DistributedLock lock) throws InterruptedException {
    return ((OwnedLockHold) lock.acquire(null, null)).ownerId;
  }

  @Test
  void compositeLocks_haveNoHolds() {
    DistributedLock multi = client.getMultiLock(client.getLock("m1"), client.getLock("m2"));
    UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
        () -> multi.acquire(null, null));
    assertTrue(e.getMessage().contains("LockHold"), e.getMessage());
    assertThrows(UnsupportedOperationException.class, () -> multi.acquireAsync(null, null));
  }

  @Test
  void releaseAfter_keepsTheLockForTheTimeLeft_withoutLoss() throws Exception {
    DistributedLock lock = client.getLock("kept");
    LockHold hold = lock.acquire(null, null);
    long kept = System.nanoTime();
    EngineAccess.releaseAfter(hold, 1_000).toCompletableFuture().get(20, TimeUnit.SECONDS);
    assertFalse(hold.isHeld());
    assertTrue(lock.isLocked(), "kept in Redis");
    hold.release(); // already ended: nothing
    assertTrue(lock.tryLock(20, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - kept >= TimeUnit.MILLISECONDS.toNanos(900));
    lock.unlock();
    LockHold now = lock.acquire(null, null);
    EngineAccess.releaseAfter(now, 0).toCompletableFuture().get(20, TimeUnit.SECONDS);
    assertFalse(lock.isLocked(), "nothing left: released at once");
    assertEquals(0, losses.count(), losses.toString());
  }

  @Test
  void closingTheClient_failsPendingAsyncAcquisitions() throws Exception {
    LockClient closing = clients.create(config);
    assertTrue(onOtherThread(() -> other.getLock("closing").tryLock()));
    CompletableFuture<LockHold> f = closing.getLock("closing").acquireAsync(null, null)
        .toCompletableFuture();
    Await.until(Duration.ofSeconds(10),
        () -> Clients.engine(closing).waitedChannels().size() == 1, "it waits");
    closing.close();
    CompletionException e = assertThrows(CompletionException.class, f::join);
    assertInstanceOf(IllegalStateException.class, e.getCause());
    assertTrue(closing.getLock("closing").acquireAsync(null, null).toCompletableFuture()
        .isCompletedExceptionally(), "nothing runs on a closed client");
  }
}
