package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.Fair;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Dependent;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.function.Supplier;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code @Locked(mode = READ | WRITE | FAIR)} and the injection of {@code @Named}
 * {@link DistributedReadWriteLock}s and {@code @Named @Fair} locks, with the portable extension
 * (Weld, as in WildFly) and the build-compatible one (as in Quarkus, run by Weld's translator).
 *
 * <p>Tests that take read-write or fair locks are skipped, saying so, while the engine does not
 * provide them yet ({@code UnsupportedOperationException}).
 */
class LockModesTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static TestConfig config;

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private WeldContainer container;

  /** Prices: read by many at once, written by one. */
  @ApplicationScoped
  public static class Prices {
    @Inject
    LockClient client;

    /** Whether {@code readers} callers were inside together. */
    @Locked(value = "prices:{region}", mode = Locked.Mode.READ)
    public boolean read(String region, CountDownLatch readers, CountDownLatch release)
        throws InterruptedException {
      readers.countDown();
      boolean together = readers.await(10, TimeUnit.SECONDS);
      release.await(20, TimeUnit.SECONDS);
      return together;
    }

    @Locked(value = "prices:{region}", mode = Locked.Mode.WRITE, waitTime = "200ms")
    public boolean write(String region) {
      return client.getReadWriteLock("prices:" + region).writeLock().isHeldByCurrentThread();
    }

    @Locked(value = "payouts", mode = Locked.Mode.FAIR)
    public boolean fair() {
      return client.getFairLock("payouts").isHeldByCurrentThread();
    }
  }

  /** Every kind of named lock, several on one name: each injection point gets its own kind. */
  @Dependent
  public static class NamedLockUser {
    @Inject
    @Named("payouts")
    DistributedLock plain;

    @Inject
    @Named("payouts")
    Lock plainAsLock;

    @Inject
    @Named("payouts")
    FencedLock fenced;

    @Inject
    @Named("payouts")
    @Fair
    DistributedLock fair;

    @Inject
    @Named("payouts")
    @Fair
    Lock fairAsLock;

    @Inject
    @Named
    @Fair
    DistributedLock queue; // the field's name

    @Inject
    @Named("prices")
    DistributedReadWriteLock prices;

    @Inject
    @Named("prices")
    ReadWriteLock pricesAsReadWriteLock;
  }

  /** Only plain handles: created without the engine's read-write and fair locks. */
  @Dependent
  public static class PlainUser {
    @Inject
    @Named("payouts")
    DistributedLock plain;
  }

  @Dependent
  public static class FairFencedLock {
    @Inject
    @Named("payouts")
    @Fair
    FencedLock wrong;
  }

  @Dependent
  public static class FairWithoutName {
    @Inject
    @Fair
    DistributedLock wrong;
  }

  private static Weld portable(Class<?>... beans) {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension()).addBeanClasses(beans);
  }

  private static Weld buildCompatible(Class<?>... beans) {
    return WeldInitiator.createWeld()
        .addBuildCompatibleExtensions(PreparedOperationsTest.BuildCompatibleOnly.class)
        .addBeanClasses(beans);
  }

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
  }

  @AfterEach
  void stop() {
    threads.shutdownNow();
    if (container != null) {
      container.close();
    }
  }

  /** Skips the test while the engine does not provide this kind of lock yet. */
  private void assumeEngineProvides(String kind, Supplier<?> factory) {
    try {
      factory.get();
    } catch (UnsupportedOperationException e) {
      Assumptions.abort("The engine does not provide " + kind + " yet: " + e.getMessage());
    }
  }

  private LockClient client() {
    return container.select(LockClient.class).get();
  }

  @Test
  void readMode_letsReadersInTogether_andExcludesAWriter() throws Exception {
    container = portable(Prices.class).initialize();
    assumeEngineProvides("read-write locks", () -> client().getReadWriteLock("probe"));
    Prices prices = container.select(Prices.class).get();
    CountDownLatch readers = new CountDownLatch(2);
    CountDownLatch release = new CountDownLatch(1);
    Future<Boolean> first = threads.submit(() -> prices.read("eu", readers, release));
    Future<Boolean> second = threads.submit(() -> prices.read("eu", readers, release));
    assertTrue(readers.await(10, TimeUnit.SECONDS), "both readers inside together");

    LockNotAcquiredException e = assertThrows(LockNotAcquiredException.class,
        () -> prices.write("eu"));
    assertEquals("prices:eu", e.lockName());
    assertTrue(prices.write("us"), "another region's write lock is free");

    release.countDown();
    assertTrue(first.get(10, TimeUnit.SECONDS));
    assertTrue(second.get(10, TimeUnit.SECONDS));
    assertTrue(prices.write("eu"), "the writer gets in once the readers are gone");
    assertFalse(client().getReadWriteLock("prices:eu").writeLock().isLocked());
  }

  @Test
  void fairMode_runsUnderTheFairLock_andReleasesIt() {
    container = portable(Prices.class).initialize();
    assumeEngineProvides("fair locks", () -> client().getFairLock("probe"));
    assertTrue(container.select(Prices.class).get().fair());
    assertFalse(client().getFairLock("payouts").isLocked());
  }

  @Test
  void everyKindOfNamedLock_resolvesWithoutAmbiguity_portable() {
    // Resolution is checked at deployment; the beans are created only when used.
    container = portable(NamedLockUser.class).initialize();
    assertTrue(container.isRunning());
  }

  @Test
  void everyKindOfNamedLock_resolvesWithoutAmbiguity_buildCompatible() {
    container = buildCompatible(NamedLockUser.class).initialize();
    assertTrue(container.isRunning());
  }

  @Test
  void plainInjectionPoint_getsThePlainLock_whenTheNameAlsoHasAFairOne() {
    container = portable(NamedLockUser.class, PlainUser.class).initialize();
    DistributedLock plain = container.select(PlainUser.class).get().plain;
    assertEquals(client().getLock("payouts").getClass(), plain.getClass());
    assertEquals("payouts", plain.getName());
  }

  @Test
  void namedLocksOfEveryKind_areInjected_portable() {
    container = portable(NamedLockUser.class).initialize();
    assertInjected();
  }

  @Test
  void namedLocksOfEveryKind_areInjected_buildCompatible() {
    container = buildCompatible(NamedLockUser.class).initialize();
    assertInjected();
  }

  private void assertInjected() {
    assumeEngineProvides("read-write locks", () -> client().getReadWriteLock("probe"));
    assumeEngineProvides("fair locks", () -> client().getFairLock("probe"));
    NamedLockUser user = container.select(NamedLockUser.class).get();
    assertEquals("payouts", user.plain.getName());
    assertEquals("payouts", user.fair.getName());
    assertEquals("queue", user.queue.getName(), "@Named on a field means its name");
    assertEquals(client().getFairLock("x").getClass(), user.fair.getClass());
    assertNotEquals(user.plain.getClass(), user.fair.getClass(), "a fair lock, not the plain one");
    assertTrue(user.plainAsLock instanceof DistributedLock d && d.getClass() == user.plain
        .getClass());
    assertTrue(user.fairAsLock instanceof DistributedLock d && d.getClass() == user.fair
        .getClass());
    assertEquals("payouts", user.fenced.getName());
    assertEquals("prices", user.prices.getName());
    assertTrue(user.pricesAsReadWriteLock instanceof DistributedReadWriteLock rw
        && rw.getName().equals("prices"));

    user.prices.readLock().lock();
    try {
      assertTrue(client().getReadWriteLock("prices").readLock().isHeldByCurrentThread(),
          "the injected read-write lock is the client's");
    } finally {
      user.prices.readLock().unlock();
    }
    user.fair.lock();
    try {
      assertTrue(client().getFairLock("payouts").isHeldByCurrentThread());
    } finally {
      user.fair.unlock();
    }
  }

  @Test
  void fairOnAFencedLock_failsTheDeployment_bothExtensions() {
    String expected = "has type " + FencedLock.class.getName() + ": a fair lock is injected as "
        + "DistributedLock or Lock";
    assertDeploymentFails(expected, portable(FairFencedLock.class));
    // Weld runs its own resolution check before it reports a build-compatible extension's
    // errors, so there the unsatisfied @Fair injection point is what fails the deployment.
    assertDeploymentFails("@Fair", buildCompatible(FairFencedLock.class));
  }

  @Test
  void fairWithoutNamed_failsTheDeployment_bothExtensions() {
    assertDeploymentFails("has no @Named: write @Named(\"<lock name>\") @Fair",
        portable(FairWithoutName.class));
    assertDeploymentFails("@Fair", buildCompatible(FairWithoutName.class)); // as above
  }

  private static void assertDeploymentFails(String expected, Weld weld) {
    RuntimeException e = assertThrows(RuntimeException.class, () -> weld.initialize().close());
    StringBuilder all = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.append(t).append('\n');
      for (Throwable s : t.getSuppressed()) {
        all.append(s).append('\n');
      }
    }
    assertTrue(all.toString().contains(expected), "expected «" + expected + "» in:\n" + all);
  }
}
