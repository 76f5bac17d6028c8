package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attacks on {@code @Locked(onLoss = INTERRUPT)} (issue 17, part 2): an interrupt must hit only
 * the call whose hold was lost, and never leak into the pool thread's next task.
 */
class OnLossAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private TestConfig config;
  private WeldContainer cdi;
  /** One thread, reused as a container's pool reuses it. */
  private final ExecutorService pool = Executors.newSingleThreadExecutor();

  @BeforeEach
  void start() {
    redis.flushAll();
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "600ms"));
    cdi = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Job.class).initialize();
    Job.lossSeen = new CountDownLatch(1);
    Job.delivered = new CountDownLatch(1);
    Job.outcome = null;
  }

  @AfterEach
  void stop() {
    pool.shutdownNow();
    cdi.close();
    config.close();
  }

  /**
   * Call 1 on a pool thread loses its hold of "job"; the report waits on the client's event
   * thread behind a slow listener of the application. Call 1 returns (its release reports the
   * loss); call 2, the thread's next task, takes "job" afresh and is running when the old report
   * is delivered: it must leave call 2, whose hold is fine, alone. (Was: the report matched call
   * 2's watch by lock name and thread id, and interrupted the wrong call.)
   */
  @Test
  void interrupt_lateReportOfAnEarlierCallsLoss_leavesTheNextCallAlone() throws Exception {
    LockClient client = cdi.select(LockClient.class).get();
    Job job = cdi.select(Job.class).get();
    CountDownLatch gate = firstCallLosesJob_reportHeldBack(client, job);
    Future<String> second = pool.submit(job::untilDelivered);
    assertTrue(Job.secondStarted.await(20, TimeUnit.SECONDS));
    assertTrue(client.getLock("job").isLocked(), "call 2 holds the lock afresh");
    gate.countDown(); // the old report reaches LossActions now
    assertEquals("not interrupted", second.get(20, TimeUnit.SECONDS),
        "call 2's hold was never lost");
    assertFalse(pool.submit(() -> Thread.currentThread().isInterrupted()).get(10,
        TimeUnit.SECONDS));
  }

  /**
   * The same late report, but the thread's next task is no {@code @Locked} call: the report finds
   * no watch (call 1's ended with it) and the task runs without an interrupt.
   */
  @Test
  void interrupt_lateReportAfterTheCallReturned_doesNotLeakIntoTheNextTask() throws Exception {
    CountDownLatch gate = firstCallLosesJob_reportHeldBack(cdi.select(LockClient.class).get(),
        cdi.select(Job.class).get());
    CountDownLatch nextStarted = new CountDownLatch(1);
    Future<String> next = pool.submit(() -> {
      nextStarted.countDown();
      try {
        assertTrue(Job.delivered.await(20, TimeUnit.SECONDS), "the report was delivered");
        return "not interrupted";
      } catch (InterruptedException e) {
        return "interrupted";
      }
    });
    assertTrue(nextStarted.await(20, TimeUnit.SECONDS));
    gate.countDown();
    assertEquals("not interrupted", next.get(20, TimeUnit.SECONDS));
  }

  /**
   * A reentrant {@code INTERRUPT} call of the same lock on the same thread: one hold, one watch
   * (the outer call's). The loss interrupts the inner call's sleep; the outer call takes the
   * interrupt back, so the pool's thread is clean afterwards.
   */
  @Test
  void interrupt_reentrantCallsOfOneLock_interruptOnce_andTheThreadReturnsClean()
      throws Exception {
    Job job = cdi.select(Job.class).get();
    Job.innerStarted = new CountDownLatch(1);
    Future<String> call = pool.submit(job::outer);
    assertTrue(Job.innerStarted.await(20, TimeUnit.SECONDS));
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "nest");
    ExecutionException thrown = assertThrows(ExecutionException.class,
        () -> call.get(20, TimeUnit.SECONDS));
    assertInstanceOf(IllegalMonitorStateException.class, thrown.getCause(), "the loss");
    assertEquals("interrupted", Job.outcome, "the inner call's sleep was interrupted");
    assertFalse(pool.submit(() -> Thread.currentThread().isInterrupted()).get(10,
        TimeUnit.SECONDS), "the pool's thread has no pending interrupt");
  }

  /**
   * Call 1 on the pool's thread loses its hold of "job"; the report is held back on the client's
   * event thread by a slow application listener (registered first) until the returned gate
   * opens, after call 1 has returned. {@link Job#delivered} counts down once the report has
   * passed every listener (one registered after the call's LossActions listener).
   */
  private CountDownLatch firstCallLosesJob_reportHeldBack(LockClient client, Job job)
      throws Exception {
    CountDownLatch gate = new CountDownLatch(1);
    client.onLockLost(lost -> {
      if (lost.lockName().equals("job")) {
        Job.lossSeen.countDown();
        awaitQuietly(gate);
      }
    });
    Future<String> first = pool.submit(job::untilLossSeen);
    awaitHeld(client);
    client.onLockLost(lost -> {
      if (lost.lockName().equals("job")) {
        Job.delivered.countDown();
      }
    });
    CommitGuardTest.forceUnlockElsewhere(redis.server().uri(), "job");
    ExecutionException thrown = assertThrows(ExecutionException.class,
        () -> first.get(20, TimeUnit.SECONDS));
    assertInstanceOf(IllegalMonitorStateException.class, thrown.getCause(), "call 1 lost it");
    return gate;
  }

  private void awaitHeld(LockClient client) {
    dev.holdfast.testing.Await.until(java.time.Duration.ofSeconds(10),
        () -> client.getLock("job").isLocked(), "the call holds job");
  }

  static void awaitQuietly(CountDownLatch latch) {
    try {
      latch.await(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @ApplicationScoped
  public static class Job {
    static volatile CountDownLatch lossSeen;
    static volatile CountDownLatch delivered;
    static final CountDownLatch secondStarted = new CountDownLatch(1);
    static volatile String outcome;
    static volatile CountDownLatch innerStarted;
    @jakarta.inject.Inject
    Job self;

    @Locked(value = "nest", onLoss = Locked.OnLoss.INTERRUPT)
    public String outer() {
      return self.inner();
    }

    /** Sleeps until interrupted; keeps the interrupt, as well-behaved code does. */
    @Locked(value = "nest", onLoss = Locked.OnLoss.INTERRUPT)
    public String inner() {
      innerStarted.countDown();
      try {
        Thread.sleep(60_000);
        outcome = "slept";
      } catch (InterruptedException e) {
        outcome = "interrupted";
        Thread.currentThread().interrupt();
      }
      return outcome;
    }

    /** Runs until the loss of its hold has reached the application's listener. */
    @Locked(value = "job", onLoss = Locked.OnLoss.INTERRUPT)
    public String untilLossSeen() throws InterruptedException {
      assertTrue(lossSeen.await(20, TimeUnit.SECONDS), "the loss was reported");
      return "seen";
    }

    /** Runs until the old report has been delivered to every listener. */
    @Locked(value = "job", onLoss = Locked.OnLoss.INTERRUPT)
    public String untilDelivered() {
      secondStarted.countDown();
      try {
        assertTrue(delivered.await(20, TimeUnit.SECONDS), "the old report was delivered");
        return "not interrupted";
      } catch (InterruptedException e) {
        return "interrupted";
      }
    }
  }
}
