package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockLostException;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisExtension;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code @Locked(onLoss = ...)}: a loss noticed by a renewal stops the running call — the thread
 * of a blocking one is interrupted (and returns to its pool without that interrupt), the result
 * of an asynchronous one is cancelled.
 */
class OnLossTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** Renewals every 200 ms: a forced unlock is noticed within about that. */
  private static final long WATCHDOG_MILLIS = 600;

  private static TestConfig config;
  private WeldContainer cdi;
  /** One thread, as a container's pool would reuse it. */
  private final ExecutorService pool = Executors.newSingleThreadExecutor();

  @BeforeAll
  static void configure() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", WATCHDOG_MILLIS + "ms",
        "holdfast.\"" + Worker.class.getName() + "/sleepByConfig\".locked.on-loss", "interrupt"));
  }

  @AfterAll
  static void unconfigure() {
    config.close();
  }

  @BeforeEach
  void start() {
    redis.flushAll();
    cdi = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Worker.class).initialize();
  }

  @AfterEach
  void stop() {
    pool.shutdownNow();
    cdi.close();
  }

  @Test
  void interrupt_stopsABlockedMethod_andTheThreadReturnsWithoutTheInterrupt() throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    Worker.started = new CountDownLatch(1);
    Future<String> call = pool.submit(worker::sleepLong);
    assertTrue(Worker.started.await(10, TimeUnit.SECONDS));
    long lostAt = System.nanoTime();
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "sleeper");
    ExecutionException thrown = assertThrows(ExecutionException.class,
        () -> call.get(20, TimeUnit.SECONDS));
    long stoppedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lostAt);
    assertEquals("interrupted", Worker.outcome, "the sleep was interrupted");
    // The method returned; the release then reports the loss.
    assertInstanceOf(IllegalMonitorStateException.class, thrown.getCause());
    // Within a renewal period or so (generous: the machine is shared).
    assertTrue(stoppedAfterMillis < 10 * WATCHDOG_MILLIS, "stopped after " + stoppedAfterMillis);
    assertFalse(pool.submit(() -> Thread.currentThread().isInterrupted()).get(10,
        TimeUnit.SECONDS), "the pool's thread has no pending interrupt");
  }

  @Test
  void interrupt_chosenByAConfigOverride_stopsTheMethodLikeTheAnnotationMember()
      throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    Worker.started = new CountDownLatch(1);
    Future<String> call = pool.submit(worker::sleepByConfig);
    assertTrue(Worker.started.await(10, TimeUnit.SECONDS));
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "by-config");
    ExecutionException thrown = assertThrows(ExecutionException.class,
        () -> call.get(20, TimeUnit.SECONDS), "the override made the loss interrupt the call");
    assertEquals("interrupted", Worker.outcome);
    assertInstanceOf(IllegalMonitorStateException.class, thrown.getCause());
    assertFalse(pool.submit(() -> Thread.currentThread().isInterrupted()).get(10,
        TimeUnit.SECONDS), "the pool's thread has no pending interrupt");
  }

  @Test
  void interrupt_leavesTheCallersOwnInterrupt() throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    assertTrue(pool.submit(() -> {
      worker.interruptItself();
      return Thread.interrupted();
    }).get(10, TimeUnit.SECONDS), "an interrupt Holdfast did not set stays");
  }

  @Test
  void interrupt_untouchedLock_runsToTheEnd() throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    assertEquals("done", pool.submit(() -> worker.sleepShort(3 * WATCHDOG_MILLIS))
        .get(20, TimeUnit.SECONDS), "renewals during the call do not interrupt it");
    assertFalse(pool.submit(() -> Thread.currentThread().isInterrupted()).get());
  }

  @Test
  void cancel_completionStage_cancelsTheWorkAndFailsTheCallerWithTheReason() throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    Worker.work = new CompletableFuture<>();
    CompletableFuture<String> result = worker.settle().toCompletableFuture();
    awaitHeld("settle");
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "settle");
    assertCancelledByLoss(result, "settle");
    assertTrue(Worker.work.isCancelled(), "the method's own future was cancelled");
  }

  @Test
  void cancel_uni_cancelsTheSubscriptionAndFailsTheSubscriberWithTheReason() throws Exception {
    Worker worker = cdi.select(Worker.class).get();
    Worker.terminated = new CountDownLatch(1);
    CompletableFuture<String> result = worker.settleUni().subscribeAsCompletionStage();
    awaitHeld("settle-uni");
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "settle-uni");
    assertCancelledByLoss(result, "settle-uni");
    assertTrue(Worker.terminated.await(10, TimeUnit.SECONDS), "the upstream was cancelled");
  }

  private void awaitHeld(String name) {
    dev.holdfast.testing.Await.until(java.time.Duration.ofSeconds(10),
        () -> cdi.select(dev.holdfast.LockClient.class).get().getLock(name).isLocked(),
        "the call holds " + name);
  }

  private static void assertCancelledByLoss(CompletableFuture<String> result, String lockName)
      throws Exception {
    // get() throws a CancellationException as it is (no ExecutionException around it).
    CancellationException cancelled = assertThrows(CancellationException.class,
        () -> result.get(20, TimeUnit.SECONDS));
    assertTrue(result.isCancelled());
    LockLostException lost = assertInstanceOf(LockLostException.class, cancelled.getCause());
    assertEquals(lockName, lost.lockName());
    assertTrue(lost.getMessage().contains(lockName), lost.getMessage());
  }

  @ApplicationScoped
  public static class Worker {
    static volatile CountDownLatch started;
    static volatile String outcome;
    static volatile CompletableFuture<String> work;
    static volatile CountDownLatch terminated;

    @Locked(value = "sleeper", onLoss = Locked.OnLoss.INTERRUPT)
    public String sleepLong() {
      return sleepUntilInterrupted();
    }

    private static String sleepUntilInterrupted() {
      outcome = null;
      started.countDown();
      try {
        Thread.sleep(60_000);
        outcome = "slept";
      } catch (InterruptedException e) {
        outcome = "interrupted";
        Thread.currentThread().interrupt(); // as it should: Holdfast takes it back
      }
      return outcome;
    }

    /** No onLoss member: {@code holdfast."…Worker/sleepByConfig".locked.on-loss} chooses it. */
    @Locked("by-config")
    public String sleepByConfig() {
      return sleepUntilInterrupted();
    }

    @Locked(value = "sleeper-short", onLoss = Locked.OnLoss.INTERRUPT)
    public String sleepShort(long millis) throws InterruptedException {
      Thread.sleep(millis);
      return "done";
    }

    @Locked(value = "self", onLoss = Locked.OnLoss.INTERRUPT)
    public void interruptItself() {
      Thread.currentThread().interrupt();
    }

    @Locked(value = "settle", onLoss = Locked.OnLoss.CANCEL)
    public CompletionStage<String> settle() {
      return work;
    }

    @Locked(value = "settle-uni", onLoss = Locked.OnLoss.CANCEL)
    public Uni<String> settleUni() {
      return Uni.createFrom().emitter(e -> e.onTermination(() -> terminated.countDown()));
    }
  }
}
