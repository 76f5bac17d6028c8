package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisExtension;
import jakarta.annotation.Priority;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Alternative;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import java.time.Duration;
import java.util.Map;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Config overrides of {@code @Locked} values, most specific first — method key, class key,
 * global key, annotation — and an application's own {@code LockClient} replacing ours.
 */
class ConfigOverridesTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static LockClient holder;

  @ApplicationScoped
  public static class Jobs {
    @Locked(value = "job-a", waitTime = "10s")
    public void methodOverride() {
    }

    @Locked(value = "job-b", waitTime = "10s")
    public void classOverride() {
    }

    @Locked(value = "job-c", waitTime = "10s")
    public void globalOverride() {
    }

    @Locked(value = "job-e", waitTime = "10s")
    public java.util.concurrent.CompletionStage<String> asyncOverride() {
      return java.util.concurrent.CompletableFuture.completedFuture("ran");
    }

    @Locked("job-d")
    public long leaseOverride(LockClient client) {
      return client.getLock("job-d").remainTimeToLive();
    }
  }

  @Alternative
  @Priority(1)
  @ApplicationScoped
  public static class OwnClient {
    static LockClient produced;

    @Produces
    @Singleton
    LockClient client() {
      produced = LockClient.create(Map.of("holdfast.redis.address", redis.server().uri()));
      return produced;
    }
  }

  private TestConfig config;

  @BeforeAll
  static void holdLocks() {
    holder = LockClient.create(Map.of("holdfast.redis.address", redis.server().uri()));
    for (String name : new String[] {"job-a", "job-b", "job-c", "job-e"}) {
      holder.getLock(name).lock();
    }
  }

  @AfterAll
  static void release() {
    holder.close();
  }

  @AfterEach
  void releaseConfig() {
    config.close();
  }

  @Test
  void overrides_applyMostSpecificFirst() {
    String jobs = Jobs.class.getName();
    config = TestConfig.of(Map.of(
        "holdfast.redis.address", redis.server().uri(),
        "holdfast.\"" + jobs + "/methodOverride\".locked.wait-time", "0s",
        "holdfast.\"" + jobs + "\".locked.wait-time", "150ms",
        "holdfast.locked.wait-time", "300ms",
        "holdfast.\"" + jobs + "/leaseOverride\".locked.lease-time", "7s"));
    try (WeldContainer weld = deploy(Jobs.class)) {
      Jobs jobsBean = weld.select(Jobs.class).get();
      assertEquals(Duration.ZERO, waitOf(jobsBean::methodOverride), "method key wins");
      assertEquals(Duration.ofMillis(150), waitOf(jobsBean::classOverride), "then class key");
      // the class key also covers globalOverride: the global key only applies where nothing
      // more specific is set
      assertEquals(Duration.ofMillis(150), waitOf(jobsBean::globalOverride));
      long ttl = jobsBean.leaseOverride(weld.select(LockClient.class).get());
      assertTrue(ttl > 6_000 && ttl <= 7_000, "lease override of 7s, was " + ttl);
    }
  }

  /** Issue 16: config overrides work on an asynchronous {@code @Locked} method too. */
  @Test
  void overrides_applyToAsynchronousMethods() {
    String jobs = Jobs.class.getName();
    config = TestConfig.of(Map.of(
        "holdfast.redis.address", redis.server().uri(),
        "holdfast.\"" + jobs + "/asyncOverride\".locked.wait-time", "200ms"));
    try (WeldContainer weld = deploy(Jobs.class)) {
      java.util.concurrent.CompletableFuture<String> result =
          weld.select(Jobs.class).get().asyncOverride().toCompletableFuture();
      java.util.concurrent.ExecutionException e = assertThrows(
          java.util.concurrent.ExecutionException.class,
          () -> result.get(20, java.util.concurrent.TimeUnit.SECONDS),
          "failed within 20 s: the overridden wait, not the annotation's 10 s");
      LockNotAcquiredException notAcquired =
          assertInstanceOf(LockNotAcquiredException.class, e.getCause());
      assertEquals(Duration.ofMillis(200), notAcquired.waitTime());
    }
  }

  @Test
  void globalOverride_beatsTheAnnotation() {
    config = TestConfig.of(Map.of(
        "holdfast.redis.address", redis.server().uri(),
        "holdfast.locked.wait-time", "200ms"));
    try (WeldContainer weld = deploy(Jobs.class)) {
      assertEquals(Duration.ofMillis(200), waitOf(weld.select(Jobs.class).get()::globalOverride));
    }
  }

  @Test
  void applicationsOwnClient_replacesTheDefault() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
    try (WeldContainer weld = deploy(Jobs.class, OwnClient.class)) {
      LockClient injected = weld.select(LockClient.class).get();
      injected.getClientId(); // resolve now
      assertSame(OwnClient.produced, injected, "the alternative's client is injected");
    }
  }

  private static WeldContainer deploy(Class<?>... beans) {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(beans).initialize();
  }

  private static Duration waitOf(Runnable lockedCall) {
    return assertThrows(LockNotAcquiredException.class, lockedCall::run).waitTime();
  }
}
