package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.Cancellable;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.jboss.weld.junit5.EnableWeld;
import org.jboss.weld.junit5.WeldInitiator;
import org.jboss.weld.junit5.WeldSetup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code @Locked} on methods returning {@code CompletionStage}, {@code CompletableFuture} and
 * Mutiny {@code Uni}, in a real Weld container against real Redis: the lock is held from before
 * the method starts until the result it returns completes, and the caller is never blocked.
 */
@EnableWeld
class AsyncLockedTest {

  private static final Duration LONG = Duration.ofSeconds(20);
  /** How long a call that must not start is watched not to start. */
  private static final long QUIET_MS = 500;

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static TestConfig config;

  @WeldSetup
  WeldInitiator weld = WeldInitiator.from(WeldInitiator.createWeld()
      .addExtension(new HoldfastExtension())
      .addBeanClasses(Jobs.class, ContainerContextService.class)).build();

  @BeforeAll
  static void configure() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
  }

  @AfterAll
  static void unconfigure() {
    config.close();
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
    Jobs.STARTED.clear();
    CallerContextDecorator.CALLER.remove();
    ContainerContextService.CONTEXT.remove();
  }

  /** The methods' work is the stage the test passes in and completes. */
  @ApplicationScoped
  public static class Jobs {
    static final Map<String, CountDownLatch> STARTED = new ConcurrentHashMap<>();
    static final AtomicInteger RUNS = new AtomicInteger();

    static CountDownLatch started(String call) {
      return STARTED.computeIfAbsent(call, c -> new CountDownLatch(1));
    }

    @Locked("async:{name}")
    public CompletionStage<String> stage(String name, String call,
        CompletableFuture<String> work) {
      started(call).countDown();
      return work;
    }

    @Locked("async:{name}")
    public CompletableFuture<String> future(String name, String call,
        CompletableFuture<String> work) {
      started(call).countDown();
      return work;
    }

    @Locked("async:{name}")
    public Uni<String> uni(String name, String call, CompletableFuture<String> work) {
      RUNS.incrementAndGet();
      started(call).countDown();
      return Uni.createFrom().completionStage(work);
    }

    @Locked("async:{name}")
    public CompletionStage<String> throwing(String name) {
      throw new IllegalStateException("failed before returning a stage");
    }

    @Locked(value = "async:{name}", skipIfBusy = true)
    public CompletionStage<String> skipping(String name, String call) {
      started(call).countDown();
      return CompletableFuture.completedFuture("ran");
    }

    @Locked(value = "async:{name}", skipIfBusy = true)
    public Uni<String> skippingUni(String name, String call) {
      started(call).countDown();
      return Uni.createFrom().item("ran");
    }

    @Locked(value = "async:{name}", waitTime = "300ms")
    public CompletableFuture<String> briefWait(String name, String call) {
      started(call).countDown();
      return CompletableFuture.completedFuture("ran");
    }

    @Locked(value = "async:{name}", fenced = true)
    public CompletionStage<Long> fenced(String name) {
      return CompletableFuture.completedFuture(FencingToken.current());
    }

    @Locked(value = "async:{name}", fenced = true)
    public Uni<Long> fencedUni(String name) {
      long token = FencingToken.current(); // the synchronous part, at subscription
      return Uni.createFrom().item(token);
    }

    @Locked("async:{name}")
    public CompletionStage<Seen> seen(String name) {
      return CompletableFuture.completedFuture(Seen.now());
    }

    @Locked("async:{name}")
    public Uni<Seen> seenUni(String name) {
      Seen seen = Seen.now();
      return Uni.createFrom().item(seen);
    }

    @Locked(value = "async:{name}", holdAtLeast = "3s")
    public CompletionStage<String> minimumHold(String name) {
      return CompletableFuture.completedFuture("quick");
    }
  }

  private Jobs jobs() {
    return weld.select(Jobs.class).get();
  }

  private DistributedLock lock(String name) {
    return weld.select(LockClient.class).get().getLock("async:" + name);
  }

  private static LockClient otherClient() {
    return LockClient.create(Map.of("holdfast.redis.address", redis.server().uri()));
  }

  private static void awaitStart(String call) throws InterruptedException {
    assertTrue(Jobs.started(call).await(LONG.toSeconds(), TimeUnit.SECONDS), call + " started");
  }

  private static void assertNotStarted(String call) throws InterruptedException {
    assertFalse(Jobs.started(call).await(QUIET_MS, TimeUnit.MILLISECONDS),
        call + " started while the lock was held");
  }

  private static Throwable failureOf(CompletionStage<?> stage) {
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> stage.toCompletableFuture().get(LONG.toSeconds(), TimeUnit.SECONDS));
    return e.getCause();
  }

  private static <T> T valueOf(CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(LONG.toSeconds(), TimeUnit.SECONDS);
  }

  @Test
  void completionStage_secondCallStartsOnlyAfterTheFirstsWorkCompletes() throws Exception {
    CompletableFuture<String> workA = new CompletableFuture<>();
    CompletableFuture<String> workB = new CompletableFuture<>();
    CompletionStage<String> a = jobs().stage("x", "a", workA);
    awaitStart("a");
    CompletionStage<String> b = jobs().stage("x", "b", workB);
    assertNotStarted("b");
    assertTrue(lock("x").isLocked(), "held while a's work runs, after its method returned");
    assertFalse(a.toCompletableFuture().isDone(), "a's result waits for its work");

    workA.complete("A");
    assertEquals("A", valueOf(a));
    awaitStart("b");
    assertFalse(b.toCompletableFuture().isDone());
    workB.complete("B");
    assertEquals("B", valueOf(b));
    Await.until(LONG, () -> !lock("x").isLocked(), "released after b's work");
  }

  @Test
  void completableFuture_exclusionDuringTheWork_andTheResultIsAFreshFuture() throws Exception {
    CompletableFuture<String> workA = new CompletableFuture<>();
    CompletableFuture<String> a = jobs().future("y", "a", workA);
    assertNotSame(workA, a, "the caller gets Holdfast's future, completed after the release");
    awaitStart("a");
    CompletableFuture<String> b = jobs().future("y", "b", CompletableFuture.completedFuture("B"));
    assertNotStarted("b");
    workA.complete("A");
    assertEquals("A", valueOf(a));
    assertEquals("B", valueOf(b));
    Await.until(LONG, () -> !lock("y").isLocked(), "released");
  }

  /** Runs {@code call} on another thread, failing if it does not return promptly. */
  private static <T> T returnsPromptly(java.util.concurrent.Callable<T> call) throws Exception {
    java.util.concurrent.ExecutorService caller = Executors.newSingleThreadExecutor();
    try {
      return caller.submit(call).get(LONG.toSeconds(), TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      return fail("the call blocked its caller while the lock was held elsewhere");
    } finally {
      caller.shutdownNow();
    }
  }

  @Test
  void callerIsNotBlocked_whileAnotherClientHoldsTheLock() throws Exception {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("async:busy");
      held.lock();
      try {
        CompletableFuture<String> work = CompletableFuture.completedFuture("done");
        CompletionStage<String> stage = returnsPromptly(() -> jobs().stage("busy", "s", work));
        CompletableFuture<String> future = returnsPromptly(
            () -> jobs().future("busy", "f", work));
        Uni<String> uni = jobs().uni("busy", "u", work);
        CompletableFuture<String> subscribed = returnsPromptly(uni::subscribeAsCompletionStage);
        assertNotStarted("s");
        assertFalse(stage.toCompletableFuture().isDone());
        assertFalse(future.isDone());
        assertFalse(subscribed.isDone());
      } finally {
        held.unlock();
      }
      // The calls above returned although the lock was busy; they run now.
      awaitStart("s");
      awaitStart("f");
      awaitStart("u");
    }
  }

  @Test
  void workFails_releases_andTheResultFailsWithTheWorksError() throws Exception {
    CompletableFuture<String> work = new CompletableFuture<>();
    CompletableFuture<String> result = jobs().future("fail", "a", work);
    awaitStart("a");
    IllegalArgumentException boom = new IllegalArgumentException("boom");
    work.completeExceptionally(boom);
    assertEquals(boom, failureOf(result));
    assertFalse(lock("fail").isLocked(), "released before the result completed");
    assertEquals("B", valueOf(jobs().stage("fail", "b", CompletableFuture.completedFuture("B"))));
  }

  @Test
  void methodThrows_releases_andTheResultFails() throws Exception {
    Throwable failure = failureOf(jobs().throwing("throws"));
    assertInstanceOf(IllegalStateException.class, failure);
    assertFalse(lock("throws").isLocked(), "released");
  }

  @Test
  void cancellingTheResult_cancelsTheWork_andReleases() throws Exception {
    CompletableFuture<String> work = new CompletableFuture<>();
    CompletableFuture<String> result = jobs().future("cancel", "a", work);
    awaitStart("a");
    assertTrue(result.cancel(true));
    Await.until(LONG, work::isCancelled, "the method's work cancelled");
    Await.until(LONG, () -> !lock("cancel").isLocked(), "released after the cancellation");
    assertEquals("B", valueOf(jobs().future("cancel", "b",
        CompletableFuture.completedFuture("B"))));
  }

  @Test
  void cancellingWhileWaiting_givesUpTheWait_andTheMethodNeverRuns() throws Exception {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("async:cancel-wait");
      held.lock();
      CompletableFuture<String> result = jobs().future("cancel-wait", "a",
          CompletableFuture.completedFuture("A"));
      assertTrue(result.cancel(true));
      held.unlock();
      assertNotStarted("a");
      Await.until(LONG, () -> !lock("cancel-wait").isLocked(), "nobody holds it");
    }
  }

  @Test
  void skipIfBusy_completesWithNull_withoutRunningTheMethod() throws Exception {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("async:skip");
      held.lock();
      try {
        assertNull(valueOf(jobs().skipping("skip", "s")));
        assertNull(jobs().skippingUni("skip", "u").await().atMost(LONG));
        assertEquals(1, Jobs.started("s").getCount(), "the stage method did not run");
        assertEquals(1, Jobs.started("u").getCount(), "the Uni method did not run");
      } finally {
        held.unlock();
      }
    }
    assertEquals("ran", valueOf(jobs().skipping("skip", "free")), "a free lock runs it");
  }

  @Test
  void waitElapses_completesWithLockNotAcquired() throws Exception {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("async:wait");
      held.lock();
      try {
        LockNotAcquiredException e = assertInstanceOf(LockNotAcquiredException.class,
            failureOf(jobs().briefWait("wait", "a")));
        assertTrue(e.getMessage().contains("async:wait"), e.getMessage());
        assertEquals(1, Jobs.started("a").getCount(), "the method did not run");
      } finally {
        held.unlock();
      }
    }
  }

  @Test
  void fenced_theTokenIsCurrentInTheSynchronousPart() throws Exception {
    long first = valueOf(jobs().fenced("fence"));
    long second = jobs().fencedUni("fence").await().atMost(LONG);
    assertTrue(first > 0, "token " + first);
    assertTrue(second > first, first + " then " + second);
    assertThrows(IllegalStateException.class, FencingToken::current, "none on the caller");
  }

  @Test
  void holdAtLeast_keepsTheLockAfterTheResultCompleted() throws Exception {
    assertEquals("quick", valueOf(jobs().minimumHold("min")));
    assertTrue(lock("min").isLocked(), "still held: the minimum hold is not over");
    Await.until(LONG, () -> !lock("min").isLocked(), "freed when the minimum hold is over");
  }

  @Test
  void uni_methodRunsAtEachSubscription_underTheLock() throws Exception {
    Jobs.RUNS.set(0);
    CompletableFuture<String> workA = new CompletableFuture<>();
    Uni<String> uniA = jobs().uni("u", "a", workA);
    assertEquals(0, Jobs.RUNS.get(), "nothing runs before a subscription");
    CompletableFuture<String> a = uniA.subscribeAsCompletionStage();
    awaitStart("a");
    CompletableFuture<String> b = jobs().uni("u", "b", CompletableFuture.completedFuture("B"))
        .subscribeAsCompletionStage();
    assertNotStarted("b");
    assertTrue(lock("u").isLocked(), "held while a's Uni is pending");
    workA.complete("A");
    assertEquals("A", valueOf(a));
    assertEquals("B", valueOf(b));
    assertEquals("A", uniA.await().atMost(LONG), "a second subscription runs it again");
    assertEquals(3, Jobs.RUNS.get());
    Await.until(LONG, () -> !lock("u").isLocked(), "released");
  }

  @Test
  void uni_failure_releases() throws Exception {
    CompletableFuture<String> work = new CompletableFuture<>();
    CompletableFuture<String> a = jobs().uni("uf", "a", work).subscribeAsCompletionStage();
    awaitStart("a");
    work.completeExceptionally(new IllegalArgumentException("boom"));
    assertInstanceOf(IllegalArgumentException.class, failureOf(a));
    assertFalse(lock("uf").isLocked(), "released");
  }

  @Test
  void uni_cancellation_cancelsTheWork_andReleases() throws Exception {
    CompletableFuture<String> work = new CompletableFuture<>();
    Cancellable subscription = jobs().uni("uc", "a", work).subscribe()
        .with(item -> { }, failure -> { });
    awaitStart("a");
    assertTrue(lock("uc").isLocked());
    subscription.cancel();
    Await.until(LONG, work::isCancelled, "the method's Uni cancelled");
    Await.until(LONG, () -> !lock("uc").isLocked(), "released after the cancellation");
  }

  @Test
  void cancelledResult_isACancellation() {
    CompletableFuture<String> result = jobs().future("c2", "a", new CompletableFuture<>());
    result.cancel(false);
    assertThrows(CancellationException.class, result::join);
  }

  /**
   * What a method saw: the caller's context as Mutiny's decorators carry it
   * ({@link CallerContextDecorator}) and as the container's context service carries it
   * ({@link ContainerContextService}), and its thread.
   */
  record Seen(String caller, String container, Thread thread) {
    static Seen now() {
      return new Seen(CallerContextDecorator.CALLER.get(), ContainerContextService.CONTEXT.get(),
          Thread.currentThread());
    }
  }

  /** {@code call}'s outcome, called while another client holds {@code async:name}. */
  private static Seen whileHeldElsewhere(String name,
      java.util.function.Supplier<CompletionStage<Seen>> call) throws Exception {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("async:" + name);
      held.lock();
      CompletionStage<Seen> result;
      try {
        result = call.get(); // the method surely runs later, on the acquisition's thread
      } finally {
        held.unlock();
      }
      return valueOf(result);
    }
  }

  /**
   * The method runs on the thread that completes the acquisition with the caller's context
   * where the container's context service carries it (WildFly; here the test's
   * {@link ContainerContextService}) and where Mutiny's callback decorators carry it (Quarkus's
   * context propagation; here the test's {@link CallerContextDecorator}), as Mutiny's own
   * callbacks do.
   */
  @Test
  void completionStage_runsElsewhereWithTheCallersContext() throws Exception {
    CallerContextDecorator.CALLER.set("request-7");
    ContainerContextService.CONTEXT.set("component-7");
    Seen seen = whileHeldElsewhere("ctx-a", () -> jobs().seen("ctx-a"));
    assertNotSame(Thread.currentThread(), seen.thread(), "ran on the acquisition's thread");
    assertEquals("request-7", seen.caller(), "the caller's context, carried by Mutiny");
    assertEquals("component-7", seen.container(), "the caller's context, carried by the "
        + "container's context service");
  }

  @Test
  void uni_runsElsewhereWithTheSubscribersContext() throws Exception {
    Uni<Seen> uni = jobs().seenUni("ctx-b");
    CallerContextDecorator.CALLER.set("request-8"); // the context at subscription counts
    ContainerContextService.CONTEXT.set("component-8");
    Seen seen = whileHeldElsewhere("ctx-b", uni::subscribeAsCompletionStage);
    assertNotSame(Thread.currentThread(), seen.thread(), "ran on the acquisition's thread");
    assertEquals("request-8", seen.caller(), "the subscriber's context, carried");
    assertEquals("component-8", seen.container(), "the subscriber's context, carried");
  }

  @Test
  void callersContext_isNotLeftOnTheThreadsThatRanTheMethod() throws Exception {
    CallerContextDecorator.CALLER.set("request-9");
    ContainerContextService.CONTEXT.set("component-9");
    Seen first = whileHeldElsewhere("ctx-c", () -> jobs().seen("ctx-c"));
    assertEquals("request-9", first.caller());
    assertEquals("component-9", first.container());
    CallerContextDecorator.CALLER.remove();
    ContainerContextService.CONTEXT.remove();
    // Later calls without a context, on the same few Holdfast threads, see none; at least one
    // of them runs on the first call's thread, or this would prove nothing.
    boolean firstThreadAgain = false;
    for (int i = 0; i < 40 && !(firstThreadAgain && i >= 10); i++) {
      Seen next = whileHeldElsewhere("ctx-c", () -> jobs().seen("ctx-c"));
      firstThreadAgain |= next.thread() == first.thread();
      String where = next.thread() + (next.thread() == first.thread()
          ? ", the thread that ran the first call" : "");
      assertNull(next.caller(), "a context left behind on " + where);
      assertNull(next.container(), "a container context left behind on " + where);
    }
    assertTrue(firstThreadAgain, "no later call ran on " + first.thread());
  }
}
