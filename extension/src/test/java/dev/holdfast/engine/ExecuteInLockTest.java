package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@code LockClient.executeInLock}: acquire, run, release, and every way that can go. */
class ExecuteInLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private LockClient client;
  private LockClient other;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    client = clients.create(redis.config());
    other = clients.create(redis.config());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void returnsTheResult_heldDuringTheAction_andReleasedAfter() {
    DistributedLock lock = client.getLock("job");
    String result = client.executeInLock("job", Duration.ofSeconds(1), null, () -> {
      assertTrue(lock.isHeldByCurrentThread());
      long ttl = lock.remainTimeToLive();
      assertTrue(ttl > 20_000, "watchdog lease without leaseTime: " + ttl);
      return "done";
    });
    assertEquals("done", result);
    assertFalse(lock.isLocked());
    assertTrue(Clients.engine(client).holds().isEmpty());
  }

  @Test
  void runnableForm_runsAndReleases() {
    AtomicBoolean ran = new AtomicBoolean();
    client.executeInLock("job", null, Duration.ofSeconds(5), () -> {
      long ttl = client.getLock("job").remainTimeToLive();
      assertTrue(ttl > 3_000 && ttl <= 5_000, "the lease asked for: " + ttl);
      ran.set(true);
    });
    assertTrue(ran.get());
    assertFalse(client.getLock("job").isLocked());
  }

  @Test
  void actionThrows_exceptionPropagatesUnchanged_andTheLockIsReleased() {
    IllegalStateException failure = new IllegalStateException("boom");
    IllegalStateException thrown = assertThrows(IllegalStateException.class,
        () -> client.executeInLock("job", Duration.ZERO, null, () -> {
          throw failure;
        }));
    assertSame(failure, thrown);
    assertEquals(0, thrown.getSuppressed().length);
    assertFalse(client.getLock("job").isLocked());

    StackOverflowError error = new StackOverflowError("deep");
    assertSame(error, assertThrows(StackOverflowError.class,
        () -> client.executeInLock(client.getLock("job"), null, null, (Runnable) () -> {
          throw error;
        })));
    assertFalse(client.getLock("job").isLocked());
  }

  @Test
  void actionThrows_andReleaseFails_releaseFailureIsSuppressed() {
    IllegalStateException failure = new IllegalStateException("boom");
    IllegalStateException thrown = assertThrows(IllegalStateException.class,
        () -> client.executeInLock("job", null, null, () -> {
          other.getLock("job").forceUnlock(); // the release will find the lock gone
          throw failure;
        }));
    assertSame(failure, thrown);
    assertEquals(1, thrown.getSuppressed().length);
    assertInstanceOf(IllegalMonitorStateException.class, thrown.getSuppressed()[0]);
  }

  @Test
  void actionReturns_andReleaseFails_releaseFailureIsThrown() {
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        () -> client.executeInLock("job", null, null, () -> other.getLock("job").forceUnlock()));
    assertTrue(e.getMessage().contains("'job'"), e.getMessage());
  }

  @Test
  void lockBusyForTheWholeWait_throwsLockNotAcquired_andDoesNotRun() {
    other.getLock("job").lock();
    AtomicBoolean ran = new AtomicBoolean();
    long start = System.nanoTime();
    LockNotAcquiredException e = assertThrows(LockNotAcquiredException.class,
        () -> client.executeInLock("job", Duration.ofMillis(300), null, () -> ran.set(true)));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(waited >= 290 && waited < 5_000, "waited " + waited + "ms");
    assertFalse(ran.get());
    assertEquals("job", e.lockName());
    assertEquals(Duration.ofMillis(300), e.waitTime());
    assertNull(e.getCause());
    assertTrue(e.getMessage().contains("'job'") && e.getMessage().contains("300ms"),
        e.getMessage());
  }

  @Test
  void zeroOrNegativeWait_triesOnce() {
    other.getLock("job").lock();
    for (Duration wait : new Duration[] {Duration.ZERO, Duration.ofSeconds(-5)}) {
      long start = System.nanoTime();
      assertThrows(LockNotAcquiredException.class,
          () -> client.executeInLock("job", wait, null, () -> "never"));
      long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertTrue(took < 1_000, "did not wait: " + took + "ms");
    }
  }

  @Test
  void nullWait_waitsUntilTheLockIsFree() throws Exception {
    DistributedLock held = other.getLock("job");
    held.lock();
    Future<String> waiter = threads.submit(
        () -> client.executeInLock("job", null, null, () -> "ran"));
    Await.until(Duration.ofSeconds(5), () -> !Clients.engine(client).waitedChannels().isEmpty(),
        "waiting");
    assertFalse(waiter.isDone());
    held.unlock();
    assertEquals("ran", waiter.get(10, TimeUnit.SECONDS));
    assertFalse(held.isLocked());
  }

  @Test
  void interruptedWhileWaiting_throwsLockNotAcquired_withTheCause_andFlagSet() throws Exception {
    other.getLock("job").lock();
    CompletableFuture<Throwable> outcome = new CompletableFuture<>();
    CompletableFuture<Boolean> flag = new CompletableFuture<>();
    Thread waiter = new Thread(() -> {
      try {
        client.executeInLock("job", null, null, () -> "never");
        outcome.complete(null);
      } catch (Throwable t) {
        outcome.complete(t);
      }
      flag.complete(Thread.currentThread().isInterrupted());
    });
    waiter.start();
    Await.until(Duration.ofSeconds(5), () -> !Clients.engine(client).waitedChannels().isEmpty(),
        "waiting");
    waiter.interrupt();
    LockNotAcquiredException e = assertInstanceOf(LockNotAcquiredException.class,
        outcome.get(5, TimeUnit.SECONDS));
    assertInstanceOf(InterruptedException.class, e.getCause());
    assertNull(e.waitTime());
    assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
    assertTrue(flag.get(5, TimeUnit.SECONDS), "interrupt flag set again");
  }

  @Test
  void nonPositiveLease_isRejectedNamingLeaseTime_beforeAcquiring() {
    for (Duration lease : new Duration[] {Duration.ZERO, Duration.ofMillis(-1)}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> client.executeInLock("job", null, lease, () -> "never"));
      assertTrue(e.getMessage().contains("leaseTime"), e.getMessage());
    }
    IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
        () -> client.executeInLock("job", null, Duration.ofDays(400), () -> "never"));
    assertTrue(tooLong.getMessage().contains("leaseTime"), tooLong.getMessage());
    assertFalse(client.getLock("job").isLocked());
  }

  @Test
  void anyLock_multiLockToo() {
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"));
    boolean[] held = client.executeInLock(multi, Duration.ofSeconds(1), Duration.ofSeconds(10),
        () -> new boolean[] {client.getLock("a").isHeldByCurrentThread(),
            client.getLock("b").isHeldByCurrentThread()});
    assertArrayEquals(new boolean[] {true, true}, held);
    assertFalse(multi.isLocked());
    other.getLock("b").lock();
    LockNotAcquiredException e = assertThrows(LockNotAcquiredException.class,
        () -> client.executeInLock(multi, Duration.ofMillis(200), null, () -> "never"));
    assertEquals("multi[a, b]", e.lockName());
    assertFalse(client.getLock("a").isLocked());
  }
}
