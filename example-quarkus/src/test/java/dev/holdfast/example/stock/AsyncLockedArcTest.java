package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

/**
 * Issue 16 under ArC: {@code @Locked} on a {@code CompletionStage} method is acquired without
 * blocking the caller, runs the method once held and holds until the stage completes;
 * {@code skipIfBusy} on a {@code Uni} completes with {@code null}; a fenced method sees its token
 * through {@code FencingToken.current()} in its synchronous part; the method runs on a Holdfast
 * thread with the caller's request context (Quarkus's context propagation, through Mutiny).
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class AsyncLockedArcTest {
  private static final Duration LONG = Duration.ofSeconds(30);

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  @Inject
  ArcAsyncJobs jobs;

  @Inject
  TaggedCaller caller;

  private LockClient otherClient() {
    return LockClient.create(Map.of("holdfast.redis.address", redisAddress));
  }

  @Test
  void completionStage_callerNotBlocked_methodRunsOnceHeld_releasedWhenItCompletes()
      throws Exception {
    ArcAsyncJobs.started = new CountDownLatch(1);
    CompletableFuture<String> work = new CompletableFuture<>();
    CompletableFuture<String> result;
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("arc:stage");
      held.lock();
      try {
        // Returns although the lock is held elsewhere until after the call.
        result = jobs.stage("stage", work).toCompletableFuture();
        assertFalse(ArcAsyncJobs.started.await(500, TimeUnit.MILLISECONDS),
            "the method ran while the lock was held elsewhere");
        assertFalse(result.isDone());
      } finally {
        held.unlock();
      }
      assertTrue(ArcAsyncJobs.started.await(LONG.toSeconds(), TimeUnit.SECONDS), "runs once held");
      DistributedLock seen = other.getLock("arc:stage");
      assertTrue(seen.isLocked(), "held while the stage is pending");
      work.complete("done");
      assertEquals("done", result.get(LONG.toSeconds(), TimeUnit.SECONDS));
      Await.until(LONG, () -> !seen.isLocked(), "released when the stage completed");
    }
  }

  @Test
  void skipIfBusy_uni_completesWithNull() {
    try (LockClient other = otherClient()) {
      DistributedLock held = other.getLock("arc:skip");
      held.lock();
      try {
        assertNull(jobs.skipping("skip").await().atMost(LONG));
      } finally {
        held.unlock();
      }
    }
    assertEquals("ran", jobs.skipping("skip").await().atMost(LONG));
  }

  @Test
  void fenced_tokenIsCurrentInTheSynchronousPart() throws Exception {
    long first = jobs.fenced("fence").toCompletableFuture().get(LONG.toSeconds(),
        TimeUnit.SECONDS);
    long second = jobs.fenced("fence").toCompletableFuture().get(LONG.toSeconds(),
        TimeUnit.SECONDS);
    assertTrue(first > 0, "token " + first);
    assertTrue(second > first, first + " then " + second);
  }

  @Test
  void requestContext_isTheCallersInTheMethod_completionStageAndUni() throws Exception {
    try (LockClient other = otherClient()) {
      // Held elsewhere first: the method surely runs later, on the acquisition's thread.
      DistributedLock held = other.getLock("arc:tagged");
      held.lock();
      CompletionStage<String> stage;
      CompletionStage<String> uni;
      try {
        stage = caller.stage("request-1", "tagged");
        uni = caller.uni("request-2", "tagged");
      } finally {
        held.unlock();
      }
      assertEquals("request-1", stage.toCompletableFuture().get(LONG.toSeconds(),
          TimeUnit.SECONDS), "the CompletionStage method saw its caller's request");
      assertEquals("request-2", uni.toCompletableFuture().get(LONG.toSeconds(),
          TimeUnit.SECONDS), "the Uni method saw its subscriber's request");
    }
  }
}
