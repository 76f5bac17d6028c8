package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.Locked;
import dev.holdfast.testing.LogCapture;
import dev.holdfast.testing.LoopbackPorts;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Dependent;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Mistakes fail the deployment with a message naming the class, the method or field, the member
 * and the value — never a surprise at the first call.
 */
class DeploymentValidationTest {

  /** These deployments have no Redis: they do not connect at startup unless a test says so. */
  private static final Map<String, String> NO_REDIS =
      Map.of("holdfast.redis.connect-at-startup", "false");

  private TestConfig config = TestConfig.of(NO_REDIS);

  @AfterEach
  void releaseConfig() {
    config.close();
  }

  @ApplicationScoped
  public static class UnknownPlaceholder {
    @Locked("inventory:{skuu}")
    public void reserve(String sku, int qty) {
    }
  }

  @ApplicationScoped
  public static class IndexOutOfRange {
    @Locked("inventory:{2}")
    public void reserve(String sku, int qty) {
    }
  }

  @ApplicationScoped
  public static class UnclosedBrace {
    @Locked("inventory:{sku")
    public void reserve(String sku) {
    }
  }

  @ApplicationScoped
  public static class BadWait {
    @Locked(value = "report", waitTime = "2 sec")
    public void report() {
    }
  }

  @ApplicationScoped
  public static class NegativeLease {
    @Locked(value = "report", leaseTime = "PT-5S")
    public void report() {
    }
  }

  @ApplicationScoped
  public static class PrivateMethod {
    public void run() {
      hidden();
    }

    @Locked("hidden")
    private void hidden() {
    }
  }

  @Dependent
  public static class StaticMethod {
    @Locked("static")
    public static void run() {
    }
  }

  @Dependent
  public static class FinalMethod {
    @Locked("final")
    public final void run() {
    }
  }

  @Locked
  @Dependent
  public static class ClassLevelWithFinalMethod {
    public void fine() {
    }

    public final void unlocked() {
    }
  }

  @Dependent
  public static class NamelessParameter {
    @Inject
    NamelessParameter(@Named DistributedLock lock) {
    }
  }

  @ApplicationScoped
  public static class SkipNonVoid {
    @Locked(value = "count", skipIfBusy = true)
    public int count() {
      return 1;
    }
  }

  @Locked(value = "jobs", skipIfBusy = true)
  @ApplicationScoped
  public static class ClassLevelSkipWithResult {
    public void fine() {
    }

    public String result() {
      return "";
    }
  }

  @ApplicationScoped
  public static class BadHoldAtLeast {
    @Locked(value = "report", holdAtLeast = "half a minute")
    public void report() {
    }
  }

  @ApplicationScoped
  public static class NegativeHoldAtLeast {
    @Locked(value = "report", holdAtLeast = "PT-1S")
    public void report() {
    }
  }

  @ApplicationScoped
  public static class LeaseShorterThanHold {
    @Locked(value = "report", leaseTime = "10s", holdAtLeast = "30s")
    public void report() {
    }
  }

  @ApplicationScoped
  public static class FencedRead {
    @Locked(value = "prices", fenced = true, mode = Locked.Mode.READ)
    public void read() {
    }
  }

  @ApplicationScoped
  public static class Job {
    @Locked(value = "job", skipIfBusy = true, holdAtLeast = "30s")
    public void run() {
    }

    @Locked(value = "job-count", fenced = true, leaseTime = "10s")
    public int count() {
      return 0;
    }
  }

  @ApplicationScoped
  public static class Valid {
    @Locked(value = "fine", waitTime = "1s")
    public void run() {
    }
  }

  @Test
  void placeholderNamingNoParameter() {
    assertFails("Invalid @Locked.value = \"inventory:{skuu}\" on "
        + UnknownPlaceholder.class.getName() + ".reserve(String, int): placeholder {skuu} "
        + "names no parameter; the parameters are [sku, qty]", UnknownPlaceholder.class);
  }

  @Test
  void placeholderIndexOutOfRange() {
    assertFails("placeholder {2} but the method has 2 parameter(s)", IndexOutOfRange.class);
  }

  @Test
  void unclosedBrace() {
    assertFails("unclosed '{' at position 10", UnclosedBrace.class);
  }

  @Test
  void unparseableDuration() {
    assertFails("Invalid @Locked.waitTime = \"2 sec\" on " + BadWait.class.getName()
        + ".report(): @Locked.waitTime='2 sec' is not a duration", BadWait.class);
  }

  @Test
  void negativeLease() {
    assertFails("@Locked.leaseTime='PT-5S' must be positive", NegativeLease.class);
  }

  @Test
  void privateMethod() {
    assertFails("private methods are not intercepted", PrivateMethod.class);
  }

  @Test
  void staticMethod() {
    assertFails("static methods are not intercepted", StaticMethod.class);
  }

  @Test
  void finalMethod() {
    assertFails(FinalMethod.class.getName() + ".run() has no effect: final methods",
        FinalMethod.class);
  }

  @Test
  void classLevelAnnotation_withFinalMethod() {
    assertFails("@Locked on class " + ClassLevelWithFinalMethod.class.getName()
        + " applies to " + ClassLevelWithFinalMethod.class.getName()
        + ".unlocked(), but final methods are not intercepted", ClassLevelWithFinalMethod.class);
  }

  @Test
  void namedParameterWithoutValue() {
    assertFails("has no name: @Named without a value means the field name only on fields",
        NamelessParameter.class);
  }

  @Test
  void invalidClientConfig_namesTheKey() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.redis.timeout", "soon");
    assertFails("holdfast.redis.timeout='soon' is not a duration", Valid.class);
  }

  @Test
  void misspelledClientKey_isReported() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.redis.adress", "redis://x:1");
    assertFails("Unknown configuration key 'holdfast.redis.adress': "
        + "did you mean 'holdfast.redis.address'?", Valid.class);
  }

  @Test
  void misspelledTopLevelKey_isReported() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.watchdog-timout", "10s");
    assertFails("Unknown configuration key 'holdfast.watchdog-timout': "
        + "did you mean 'holdfast.watchdog-timeout'?", Valid.class);
  }

  @Test
  void foreignKeyUnderHoldfast_deploysWithOneWarningNamingIt() {
    // As a build passing -Dholdfast.version=... (Maven's usual name for a dependency's version).
    System.setProperty("holdfast.version", "0.2.0-SNAPSHOT");
    try (LogCapture log = LogCapture.of(LockClientConfig.class.getName())) {
      config.close();
      config = TestConfig.of(NO_REDIS);
      try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
          .addBeanClasses(Valid.class).initialize()) {
        assertTrue(c.isRunning());
        c.select(LockClient.class).get().getClientId(); // the producer reads the config again
      }
      // Only this key's: the harness's own -Dholdfast.redis-server=... would be warned about too.
      List<String> warnings = log.messages(Level.WARNING).stream()
          .filter(w -> w.contains("'holdfast.version'")).toList();
      assertEquals(1, warnings.size(), "warned once, at deployment: " + log.messages(Level.WARNING));
    } finally {
      System.clearProperty("holdfast.version");
    }
  }

  @Test
  void invalidOverride_namesTheKey() {
    config.close();
    String key = "holdfast.\"" + Valid.class.getName() + "/run\".locked.wait-time";
    config = TestConfig.of(NO_REDIS, key, "forever");
    assertFails(key + "='forever' is not a duration", Valid.class);
  }

  @Test
  void overrideWithUnknownMember_isReported() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.wait", "2s");
    assertFails("Unknown configuration key 'holdfast.locked.wait'", Valid.class);
  }

  @Test
  void fencedOverride_isReported() {
    config.close();
    String key = "holdfast.\"" + Valid.class.getName() + "/run\".locked.fenced";
    config = TestConfig.of(Map.of(key, "true"));
    assertFails("Configuration key '" + key + "' cannot override @Locked.fenced", Valid.class);
  }

  @Test
  void negativeLeaseOverride_isReported() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.lease-time", "PT-1S");
    assertFails("holdfast.locked.lease-time='PT-1S' must be positive", Valid.class);
  }

  @Test
  void unreachableRedis_failsTheDeployment_namingTheAddress() {
    int port = LoopbackPorts.reserve(); // nothing listens there
    try {
      config.close();
      config = TestConfig.of(Map.of("holdfast.redis.address",
          "redis://app:cdi-secret@127.0.0.1:" + port, "holdfast.redis.timeout", "1s"));
      String message = assertFails("Cannot connect to Redis (standalone redis://app:***@127.0.0.1:"
          + port + "): connection refused", Valid.class);
      assertTrue(message.contains("holdfast.redis.connect-at-startup=false"), message);
      assertFalse(message.contains("cdi-secret"), message);
    } finally {
      LoopbackPorts.release(port);
    }
  }

  @Test
  void unreachableRedis_withConnectAtStartupFalse_deploys() {
    int port = LoopbackPorts.reserve();
    try {
      config.close();
      config = TestConfig.of(Map.of("holdfast.redis.address", "redis://127.0.0.1:" + port,
          "holdfast.redis.connect-at-startup", "false"));
      try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
          .addBeanClasses(Valid.class).initialize()) {
        assertTrue(c.isRunning());
        assertNotNull(c.select(LockClient.class).get().getClientId(), "created at first use");
      }
    } finally {
      LoopbackPorts.release(port);
    }
  }

  @Test
  void skipIfBusy_onANonVoidMethod() {
    assertFails("Invalid @Locked.skipIfBusy = true on " + SkipNonVoid.class.getName()
        + ".count(): only a void method can be skipped", SkipNonVoid.class);
  }

  @Test
  void classLevelSkipIfBusy_withANonVoidMethod() {
    assertFails("Invalid @Locked.skipIfBusy = true on class "
        + ClassLevelSkipWithResult.class.getName() + ", which applies to "
        + ClassLevelSkipWithResult.class.getName() + ".result(): only a void method can be "
        + "skipped", ClassLevelSkipWithResult.class);
  }

  @Test
  void unparseableHoldAtLeast() {
    assertFails("Invalid @Locked.holdAtLeast = \"half a minute\" on "
        + BadHoldAtLeast.class.getName() + ".report(): @Locked.holdAtLeast='half a minute' is "
        + "not a duration", BadHoldAtLeast.class);
  }

  @Test
  void negativeHoldAtLeast() {
    assertFails("@Locked.holdAtLeast='PT-1S' must not be negative", NegativeHoldAtLeast.class);
  }

  @Test
  void leaseShorterThanHoldAtLeast_namesBothMembers() {
    assertFails("Invalid @Locked.holdAtLeast = \"30s\" with @Locked.leaseTime = \"10s\" on "
        + LeaseShorterThanHold.class.getName() + ".report()", LeaseShorterThanHold.class);
  }

  @Test
  void fencedWithReadMode_namesBothMembers() {
    assertFails("Invalid @Locked.fenced = true with @Locked.mode = READ on "
        + FencedRead.class.getName() + ".read(): fencing tokens exist only for the EXCLUSIVE "
        + "lock", FencedRead.class);
  }

  @Test
  void newOverrideKeys_areAccepted() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.mode", "write",
        "holdfast.\"" + Valid.class.getName() + "\".locked.skip-if-busy", "TRUE",
        "holdfast.\"" + Valid.class.getName() + "/run\".locked.hold-at-least", "5m");
    try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Valid.class).initialize()) {
      assertTrue(c.isRunning());
    }
  }

  @Test
  void invalidModeOverride_namesTheKey() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.mode", "shared");
    assertFails("holdfast.locked.mode='shared' is not a mode: use one of [EXCLUSIVE, READ, "
        + "WRITE, FAIR]", Valid.class);
  }

  @Test
  void invalidSkipIfBusyOverride_namesTheKey_evenWhenNoMethodUsesIt() {
    config.close();
    String key = "holdfast.\"com.acme.Elsewhere\".locked.skip-if-busy";
    config = TestConfig.of(NO_REDIS, key, "yes");
    assertFails(key + "='yes' must be true or false", Valid.class);
  }

  @Test
  void invalidHoldAtLeastOverride_namesTheKey() {
    config.close();
    String key = "holdfast.\"" + Job.class.getName() + "/run\".locked.hold-at-least";
    config = TestConfig.of(NO_REDIS, key, "forever");
    assertFails("Invalid configuration for @Locked.holdAtLeast on " + Job.class.getName()
        + ".run(): " + key + "='forever' is not a duration", Job.class);
  }

  @Test
  void skipIfBusyOverride_onANonVoidMethod_namesTheKey() {
    config.close();
    String key = "holdfast.\"" + Job.class.getName() + "\".locked.skip-if-busy";
    config = TestConfig.of(NO_REDIS, key, "true");
    assertFails("Invalid " + key + "='true' on " + Job.class.getName() + ".count(): only a void "
        + "method can be skipped", Job.class);
  }

  @Test
  void modeOverride_onAFencedMethod_namesTheKey() {
    config.close();
    String key = "holdfast.\"" + Job.class.getName() + "/count\".locked.mode";
    config = TestConfig.of(NO_REDIS, key, "FAIR");
    assertFails("Invalid @Locked.fenced = true with " + key + "='FAIR' on " + Job.class.getName()
        + ".count()", Job.class);
  }

  @Test
  void holdAtLeastOverride_longerThanTheLease_namesBoth() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.hold-at-least", "1m");
    assertFails("Invalid holdfast.locked.hold-at-least='1m' with @Locked.leaseTime = \"10s\" on "
        + Job.class.getName() + ".count()", Job.class);
  }

  @Test
  void validDeployment_deploys() {
    try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Valid.class).initialize()) {
      assertTrue(c.isRunning());
    }
  }

  @ApplicationScoped
  public static class ReturnsMulti {
    @Locked("stream")
    public io.smallrye.mutiny.Multi<String> items() {
      return io.smallrye.mutiny.Multi.createFrom().empty();
    }
  }

  @ApplicationScoped
  public static class ReturnsPublisher {
    @Locked("stream")
    public org.reactivestreams.Publisher<String> items() {
      return null;
    }
  }

  @ApplicationScoped
  public static class ReturnsFlowPublisher {
    @Locked("stream")
    public java.util.concurrent.Flow.Publisher<String> items() {
      return null;
    }
  }

  @Locked("streams")
  @ApplicationScoped
  public static class ClassLevelWithMulti {
    public io.smallrye.mutiny.Multi<String> items() {
      return io.smallrye.mutiny.Multi.createFrom().empty();
    }
  }

  /** A future type Holdfast cannot create in its place. */
  public static class OwnFuture<T> extends java.util.concurrent.CompletableFuture<T> {
  }

  @ApplicationScoped
  public static class ReturnsOwnFuture {
    @Locked("own")
    public OwnFuture<String> work() {
      return new OwnFuture<>();
    }
  }

  @ApplicationScoped
  public static class AsyncSkippers {
    @Locked(value = "skip-stage", skipIfBusy = true)
    public java.util.concurrent.CompletionStage<String> stage() {
      return null;
    }

    @Locked(value = "skip-uni", skipIfBusy = true)
    public io.smallrye.mutiny.Uni<String> uni() {
      return null;
    }
  }

  @Test
  void lockedMethodReturningMulti_failsNamingTheMethod() {
    assertFails("@Locked on " + ReturnsMulti.class.getName() + ".items() cannot work: it "
        + "returns io.smallrye.mutiny.Multi, a stream of items", ReturnsMulti.class);
  }

  @Test
  void lockedMethodReturningAReactiveStreamsPublisher_fails() {
    assertFails("@Locked on " + ReturnsPublisher.class.getName() + ".items() cannot work: it "
        + "returns org.reactivestreams.Publisher, a stream of items", ReturnsPublisher.class);
  }

  @Test
  void lockedMethodReturningAFlowPublisher_fails() {
    assertFails("@Locked on " + ReturnsFlowPublisher.class.getName() + ".items() cannot work: "
        + "it returns java.util.concurrent.Flow.Publisher, a stream of items",
        ReturnsFlowPublisher.class);
  }

  @Test
  void classLevelLocked_withAMultiMethod_fails() {
    assertFails("@Locked on class " + ClassLevelWithMulti.class.getName() + " applies to "
        + ClassLevelWithMulti.class.getName() + ".items(), but it returns "
        + "io.smallrye.mutiny.Multi", ClassLevelWithMulti.class);
  }

  @Test
  void lockedMethodReturningItsOwnFutureType_fails() {
    assertFails("returns " + OwnFuture.class.getName().replace('$', '.') + ", an asynchronous "
        + "result Holdfast cannot hand back in its place; declare CompletionStage, "
        + "CompletableFuture or Uni", ReturnsOwnFuture.class);
  }

  @Test
  void lockedMethodReturningMulti_failsTheBuildCompatibleExtensionToo() {
    assertFailsBuildCompatible("@Locked on " + ReturnsMulti.class.getName() + ".items() cannot "
        + "work: it returns io.smallrye.mutiny.Multi, a stream of items", ReturnsMulti.class);
  }

  @Test
  void lockedMethodReturningAFlowPublisher_failsTheBuildCompatibleExtensionToo() {
    assertFailsBuildCompatible("@Locked on " + ReturnsFlowPublisher.class.getName()
        + ".items() cannot work: it returns java.util.concurrent.Flow.Publisher",
        ReturnsFlowPublisher.class);
  }

  @Test
  void lockedMethodReturningAReactiveStreamsPublisher_failsTheBuildCompatibleExtensionToo() {
    assertFailsBuildCompatible("@Locked on " + ReturnsPublisher.class.getName()
        + ".items() cannot work: it returns org.reactivestreams.Publisher",
        ReturnsPublisher.class);
  }

  @Test
  void skipIfBusy_onAsynchronousMethods_isValid() {
    try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(AsyncSkippers.class).initialize()) {
      assertTrue(c.isRunning());
    }
  }

  /** {@return every message of the deployment failure, which must contain {@code expected}} */
  @ApplicationScoped
  public static class InterruptAsync {
    @Locked(value = "async", onLoss = Locked.OnLoss.INTERRUPT)
    public java.util.concurrent.CompletionStage<String> run() {
      return null;
    }
  }

  @ApplicationScoped
  public static class CancelBlocking {
    @Locked(value = "blocking", onLoss = Locked.OnLoss.CANCEL)
    public void run() {
    }
  }

  @Test
  void interruptOnAnAsynchronousMethod_namesMethodAndMember() {
    assertFails("Invalid @Locked.onLoss = INTERRUPT on " + InterruptAsync.class.getName()
        + ".run(): INTERRUPT stops the thread that runs a blocking method", InterruptAsync.class);
    assertFailsBuildCompatible("Invalid @Locked.onLoss = INTERRUPT on "
        + InterruptAsync.class.getName() + ".run()", InterruptAsync.class);
  }

  @Test
  void cancelOnABlockingMethod_namesMethodAndMember() {
    assertFails("Invalid @Locked.onLoss = CANCEL on " + CancelBlocking.class.getName()
        + ".run(): CANCEL cancels the result of an asynchronous method", CancelBlocking.class);
  }

  @Test
  void onLossOverride_thatDoesNotFitTheMethod_namesTheKey() {
    config.close();
    String key = "holdfast.\"" + Valid.class.getName() + "/run\".locked.on-loss";
    config = TestConfig.of(NO_REDIS, key, "cancel");
    assertFails("Invalid " + key + "='cancel' on " + Valid.class.getName() + ".run(): CANCEL",
        Valid.class);
  }

  @Test
  void invalidOnLossOverride_namesTheKey() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.on-loss", "stop");
    assertFails("holdfast.locked.on-loss='stop' is not what a loss does: use one of nothing, "
        + "interrupt, cancel", Valid.class);
  }

  @Test
  void invalidVerifyBeforeCommit_namesTheKey_alsoWhenNoMethodUsesIt() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.verify-before-commit", "remote");
    assertFails("holdfast.locked.verify-before-commit='remote' is not a check before commit: "
        + "use local or redis", Valid.class);
    config.close();
    String key = "holdfast.\"com.acme.Absent\".locked.verify-before-commit";
    config = TestConfig.of(NO_REDIS, key, "sometimes");
    assertFails(key + "='sometimes' is not a check before commit", Valid.class);
  }

  @Test
  void onLossAndVerifyBeforeCommitKeys_areAccepted() {
    config.close();
    config = TestConfig.of(NO_REDIS, "holdfast.locked.on-loss", "interrupt",
        "holdfast.locked.verify-before-commit", "REDIS",
        "holdfast.\"" + Valid.class.getName() + "/run\".locked.verify-before-commit", "local");
    try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Valid.class).initialize()) {
      assertTrue(c.isRunning());
    }
  }

  private static String assertFails(String expected, Class<?>... beans) {
    try (WeldContainer c = WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(beans).initialize()) {
      return fail("deployment succeeded, expected a failure saying: " + expected);
    } catch (RuntimeException e) {
      String all = messages(e);
      assertTrue(all.contains(expected), "expected «" + expected + "» in:\n" + all);
      return all;
    }
  }

  /** {@link #assertFails} with the build-compatible extension as ArC runs it. */
  private static String assertFailsBuildCompatible(String expected, Class<?>... beans) {
    try (WeldContainer c = WeldInitiator.createWeld()
        .addBuildCompatibleExtensions(PreparedOperationsTest.BuildCompatibleOnly.class)
        .addBeanClasses(beans).initialize()) {
      return fail("deployment succeeded, expected a failure saying: " + expected);
    } catch (RuntimeException e) {
      String all = messages(e);
      assertTrue(all.contains(expected), "expected «" + expected + "» in:\n" + all);
      return all;
    }
  }

  private static String messages(Throwable t) {
    StringBuilder all = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause()) {
      all.append(c.getMessage()).append('\n');
      for (Throwable s : c.getSuppressed()) {
        all.append(messages(s));
      }
    }
    return all.toString();
  }
}
