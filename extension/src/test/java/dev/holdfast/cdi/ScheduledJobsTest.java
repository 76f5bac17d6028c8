package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.LogCapture;
import dev.holdfast.testing.RedisExtension;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Once-per-cluster jobs: {@code @Locked(skipIfBusy = true)} returns at once when another holder
 * has the lock (logged at debug, counted), and {@code holdAtLeast} keeps the lock after a quick
 * run, so that an instance whose scheduler fires a little later skips the same occurrence.
 */
class ScheduledJobsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static TestConfig config;

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private WeldContainer container;
  private LockClient otherInstance;

  /** The jobs, as an application writes them; each counts its runs. */
  @ApplicationScoped
  public static class Jobs {
    static final AtomicInteger NIGHTLY = new AtomicInteger();
    static final AtomicInteger PATIENT = new AtomicInteger();
    static final AtomicInteger REPORT = new AtomicInteger();
    static final AtomicInteger SLOW = new AtomicInteger();

    /** Runs while another thread says so (for the "both fire together" case). */
    private final CountDownLatch entered = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);

    public CountDownLatch entered() {
      return entered;
    }

    public CountDownLatch release() {
      return release;
    }

    @Locked(value = "nightly", skipIfBusy = true)
    public void nightly() {
      NIGHTLY.incrementAndGet();
    }

    @Locked(value = "patient", skipIfBusy = true, waitTime = "300ms")
    public void patient() {
      PATIENT.incrementAndGet();
    }

    @Locked(value = "report", skipIfBusy = true, holdAtLeast = "2s")
    public void report() {
      REPORT.incrementAndGet();
    }

    @Locked(value = "held-report", skipIfBusy = true, holdAtLeast = "2s")
    public void heldReport() throws InterruptedException {
      entered.countDown();
      release.await(20, TimeUnit.SECONDS);
    }

    @Locked(value = "failing-report", holdAtLeast = "2s")
    public void failingReport() {
      throw new IllegalStateException("the job's own failure");
    }

    @Locked(value = "slow-report", holdAtLeast = "100ms")
    public void slowReport() throws InterruptedException {
      SLOW.incrementAndGet();
      Thread.sleep(400); // a job that runs past its minimum hold
    }
  }

  /** What Quarkus and WildFly provide as a bean. */
  @ApplicationScoped
  public static class Meters {
    @Produces
    @Singleton
    MeterRegistry registry() {
      return new SimpleMeterRegistry();
    }
  }

  static Weld weld() {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Jobs.class, Meters.class);
  }

  @BeforeAll
  static void configure() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "900ms"));
  }

  @AfterAll
  static void unconfigure() {
    config.close();
  }

  @BeforeEach
  void start() {
    redis.flushAll();
    Jobs.NIGHTLY.set(0);
    Jobs.PATIENT.set(0);
    Jobs.REPORT.set(0);
    Jobs.SLOW.set(0);
    container = weld().containerId("first-instance").initialize();
    otherInstance = LockClient.create(Map.of("holdfast.redis.address", redis.server().uri()));
  }

  @AfterEach
  void stop() {
    threads.shutdownNow();
    otherInstance.close();
    container.close();
  }

  private Jobs jobs() {
    return container.select(Jobs.class).get();
  }

  private double skipped(String template) {
    Counter c = container.select(MeterRegistry.class).get().find("holdfast.lock.skipped")
        .tag("template", template).counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void skipIfBusy_whenAnotherInstanceHolds_returnsWithoutRunning_logsAndCounts() {
    DistributedLock elsewhere = otherInstance.getLock("nightly");
    elsewhere.lock();
    Logger logger = Logger.getLogger(LockedInterceptor.class.getName());
    Level before = logger.getLevel();
    logger.setLevel(Level.FINE); // System.Logger's DEBUG
    try (LogCapture log = LogCapture.of(LockedInterceptor.class.getName())) {
      jobs().nightly();
      jobs().nightly();

      assertEquals(0, Jobs.NIGHTLY.get(), "the method never ran");
      assertEquals(2, skipped("nightly"), "counted per skipped call");
      List<String> debug = log.messages(Level.FINE);
      assertEquals(2, debug.size(), () -> "logged at debug: " + debug);
      assertTrue(debug.get(0).contains("'nightly'")
          && debug.get(0).contains(Jobs.class.getName() + ".nightly()"), debug.get(0));
    } finally {
      logger.setLevel(before);
      elsewhere.unlock();
    }
  }

  @Test
  void skipIfBusy_whenFree_runsAndReleases() {
    jobs().nightly();
    assertEquals(1, Jobs.NIGHTLY.get());
    assertFalse(otherInstance.getLock("nightly").isLocked(), "released after the run");
    assertEquals(0, skipped("nightly"));
  }

  @Test
  void skipIfBusy_withWaitTime_waitsThatLongThenSkipsWithoutThrowing() {
    DistributedLock elsewhere = otherInstance.getLock("patient");
    elsewhere.lock();
    try {
      long start = System.nanoTime();
      jobs().patient(); // no LockNotAcquiredException
      long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertTrue(waitedMs >= 250, "waited up to waitTime first, only " + waitedMs + " ms");
      assertEquals(0, Jobs.PATIENT.get());
      assertEquals(1, skipped("patient"));
    } finally {
      elsewhere.unlock();
    }
  }

  @Test
  void twoInstancesFiringTogether_runTheOccurrenceOnce() throws Exception {
    try (WeldContainer second = weld().containerId("second-instance").initialize()) {
      Jobs here = jobs();
      Jobs there = second.select(Jobs.class).get();
      Future<?> running = threads.submit(() -> {
        here.heldReport();
        return null;
      });
      assertTrue(here.entered().await(10, TimeUnit.SECONDS));
      long start = System.nanoTime();
      there.heldReport(); // the other instance's scheduler fires while the first runs
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 1_500,
          "skipped at once instead of waiting");
      assertEquals(1, there.entered().getCount(), "the second instance did not run it");
      assertEquals(1, second.select(MeterRegistry.class).get().find("holdfast.lock.skipped")
          .tag("template", "held-report").counter().count());
      here.release().countDown();
      running.get(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void holdAtLeast_keepsTheLockAfterAQuickRun_soALateInstanceSkips_thenFreesIt()
      throws Exception {
    try (WeldContainer second = weld().containerId("second-instance").initialize()) {
      long start = System.nanoTime();
      jobs().report();
      assertEquals(1, Jobs.REPORT.get());
      DistributedLock probe = otherInstance.getLock("report");
      assertFalse(probe.tryLock(), "held for holdAtLeast (2s) after the method started");

      second.select(Jobs.class).get().report(); // fires a little later than the first
      assertEquals(1, Jobs.REPORT.get(), "the same occurrence ran once across both instances");

      Await.until(Duration.ofSeconds(15), probe::tryLock, "the lock to expire after holdAtLeast");
      long heldMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertTrue(heldMs >= 1_500, "free only after about holdAtLeast, but after " + heldMs);
      probe.unlock();
    }
  }

  @Test
  void holdAtLeast_appliesAfterAnException_too() {
    long start = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> jobs().failingReport());
    assertEquals("the job's own failure", e.getMessage());
    DistributedLock probe = otherInstance.getLock("failing-report");
    assertFalse(probe.tryLock(), "still held after the failed run");
    Await.until(Duration.ofSeconds(15), probe::tryLock, "the lock to expire after holdAtLeast");
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 1_500);
    probe.unlock();
  }

  @Test
  void holdAtLeast_shorterThanTheRun_releasesOnReturn() throws Exception {
    jobs().slowReport();
    assertEquals(1, Jobs.SLOW.get());
    assertFalse(otherInstance.getLock("slow-report").isLocked(), "released as usual");
  }
}
