package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import redis.clients.jedis.Jedis;

/**
 * The JFR events, read back from a real recording as {@code jfr print} would: who waited for
 * which lock and how long, who held it, which holds were lost and which renewals failed.
 */
class LockEventsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private LockClient client;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    client = clients.create(LockClientConfig.builder().address(redis.server().uri())
        .watchdogTimeout(Duration.ofMillis(900)).build());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void recording_showsWhoWaitedForWhichLockAndForHowLong(@TempDir Path dir) throws Exception {
    DistributedLock lock = client.getLock("orders");
    long[] waiterId = new long[1];
    List<RecordedEvent> events = record(dir, () -> {
      lock.lock();
      CountDownLatch waiting = new CountDownLatch(1);
      Future<Boolean> waiter = threads.submit(() -> {
        waiterId[0] = Thread.currentThread().getId();
        waiting.countDown();
        DistributedLock mine = client.getLock("orders");
        mine.lock();
        mine.unlock();
        return true;
      });
      waiting.await();
      Await.until(Duration.ofSeconds(5),
          () -> Clients.engine(client).waitedChannels().contains("redisson_lock__channel:{orders}"),
          "the other thread waits");
      Thread.sleep(200);
      lock.unlock();
      assertTrue(waiter.get(10, TimeUnit.SECONDS));
    });

    List<RecordedEvent> waits = named(events, "dev.holdfast.LockWait");
    RecordedEvent waited = waits.stream()
        .filter(e -> e.getThread().getJavaThreadId() == waiterId[0]).findFirst().orElseThrow();
    assertEquals("orders", waited.getString("name"));
    assertEquals("orders", waited.getString("template"));
    assertEquals("acquired", waited.getString("outcome"));
    assertTrue(waited.getDuration().toMillis() >= 200, () -> "waited " + waited.getDuration());
    assertNotNull(waited.getStackTrace(), "the waiter's stack says who waited");

    List<RecordedEvent> helds = named(events, "dev.holdfast.LockHeld");
    assertTrue(helds.size() >= 2, () -> "holds: " + helds);
    RecordedEvent first = helds.stream()
        .filter(e -> e.getThread().getJavaThreadId() == Thread.currentThread().getId())
        .findFirst().orElseThrow();
    assertEquals("orders", first.getString("name"));
    assertTrue(first.getDuration().toMillis() >= 200, () -> "held " + first.getDuration());
  }

  @Test
  void recording_showsTimedOutWaitsUnderTheirTemplate(@TempDir Path dir) throws Exception {
    DistributedLock held = client.getLock("stock:42");
    List<RecordedEvent> events = record(dir, () -> {
      held.lock();
      try {
        DistributedLock other = Clients.engine(client).lock("stock:42", "stock:{sku}");
        assertFalse(threads.submit(() -> other.tryLock(100, TimeUnit.MILLISECONDS))
            .get(10, TimeUnit.SECONDS));
      } finally {
        held.unlock();
      }
    });

    RecordedEvent timedOut = named(events, "dev.holdfast.LockWait").stream()
        .filter(e -> "timed_out".equals(e.getString("outcome"))).findFirst().orElseThrow();
    assertEquals("stock:42", timedOut.getString("name"));
    assertEquals("stock:{sku}", timedOut.getString("template"));
    // The event begins before the wait is measured; JFR and System.nanoTime may differ by a tick.
    assertTrue(timedOut.getDuration().toNanos() >= 99_000_000L, () -> "" + timedOut.getDuration());
  }

  @Test
  void recording_showsLostHoldsAndFailedRenewals(@TempDir Path dir) throws Exception {
    long[] holderId = new long[1];
    CountDownLatch lostReported = new CountDownLatch(1);
    client.onLockLost(lost -> lostReported.countDown());
    List<RecordedEvent> events = record(dir, () -> {
      threads.submit(() -> {
        holderId[0] = Thread.currentThread().getId();
        DistributedLock lock = client.getLock("report");
        lock.lock();
        try (Jedis admin = redis.server().admin()) {
          admin.del("report"); // gone from Redis: the next renewal finds out
        }
        return null;
      }).get(10, TimeUnit.SECONDS);
      assertTrue(lostReported.await(10, TimeUnit.SECONDS), "the watchdog finds the hold gone");
    });

    RecordedEvent failed = named(events, "dev.holdfast.LockRenewalFailed").stream()
        .findFirst().orElseThrow(() -> new AssertionError("no LockRenewalFailed in " + events));
    assertEquals("report", failed.getString("name"));
    assertEquals(holderId[0], failed.getThread("holder").getJavaThreadId());
    assertEquals(redis.server().hostAndPort().toString(), failed.getString("node"));
    assertTrue(failed.getString("error").contains("no longer held"), failed.getString("error"));

    RecordedEvent lost = named(events, "dev.holdfast.LockLost").stream().findFirst()
        .orElseThrow(() -> new AssertionError("no LockLost in " + events));
    assertEquals("report", lost.getString("name"));
    assertEquals("gone", lost.getString("cause"));
    assertEquals(holderId[0], lost.getThread("holder").getJavaThreadId());
    assertTrue(lost.getString("reason").contains("renewal"), lost.getString("reason"));
    assertTrue(lost.getDuration("heldFor").toNanos() > 0);
  }

  @Test
  void recording_showsHoldsAtRiskAndRecovered(@TempDir Path dir) throws Exception {
    CountDownLatch recovered = new CountDownLatch(1);
    List<RecordedEvent> events;
    try (FaultProxy proxy = new FaultProxy(redis.server().port())) {
      LockClient proxied = clients.create(LockClientConfig.builder().address(proxy.uri())
          .watchdogTimeout(Duration.ofSeconds(6)).timeout(Duration.ofMillis(500)).build());
      proxied.onLockRecovered(r -> recovered.countDown());
      CountDownLatch atRisk = new CountDownLatch(1);
      proxied.onLockAtRisk(r -> atRisk.countDown());
      DistributedLock lock = proxied.getLock("shaky");
      events = record(dir, () -> {
        lock.lock();
        proxy.blackHole(true);
        try {
          assertTrue(atRisk.await(10, TimeUnit.SECONDS), "at risk in the outage");
        } finally {
          proxy.blackHole(false);
        }
        assertTrue(recovered.await(10, TimeUnit.SECONDS), "recovered within the lease");
        lock.unlock();
      });
    }

    RecordedEvent risk = named(events, "dev.holdfast.LockAtRisk").stream().findFirst()
        .orElseThrow(() -> new AssertionError("no LockAtRisk in " + events));
    assertEquals("shaky", risk.getString("name"));
    assertEquals("shaky", risk.getString("template"));
    assertEquals(Thread.currentThread().getId(), risk.getThread("holder").getJavaThreadId());
    assertTrue(risk.getDuration("timeLeft").toNanos() > 0);
    assertFalse(risk.getString("error").isBlank());
    RecordedEvent back = named(events, "dev.holdfast.LockRecovered").stream().findFirst()
        .orElseThrow(() -> new AssertionError("no LockRecovered in " + events));
    assertEquals("shaky", back.getString("name"));
    assertEquals(Thread.currentThread().getId(), back.getLong("holderId"));
    assertTrue(back.getDuration("atRiskFor").toNanos() > 0);
    assertTrue(named(events, "dev.holdfast.LockLost").isEmpty(), "recovered, not lost");
  }

  @Test
  void recording_showsForceUnlockedHolds(@TempDir Path dir) throws Exception {
    DistributedLock lock = client.getLock("nightly");
    List<RecordedEvent> events = record(dir, () -> {
      lock.lock();
      assertTrue(client.getLock("nightly").forceUnlock());
      try {
        lock.unlock();
      } catch (IllegalMonitorStateException expected) {
        // lost
      }
    });

    RecordedEvent lost = named(events, "dev.holdfast.LockLost").get(0);
    assertEquals("force_unlocked", lost.getString("cause"));
    assertEquals(Thread.currentThread().getId(), lost.getThread("holder").getJavaThreadId());
    assertTrue(named(events, "dev.holdfast.LockHeld").isEmpty(), "a lost hold never ended well");
  }

  @Test
  void withoutThresholdSettings_shortWaitsAndHoldsAreLeftOut(@TempDir Path dir) throws Exception {
    DistributedLock lock = client.getLock("quick");
    Path file = dir.resolve("default.jfr");
    try (Recording recording = new Recording()) {
      for (String name : List.of("LockWait", "LockHeld")) {
        recording.enable("dev.holdfast." + name); // the events' own threshold: 10 ms
      }
      recording.start();
      lock.lock();
      lock.unlock();
      recording.stop();
      recording.dump(file);
    }
    // Quick on a quiet machine, so nothing is recorded; a loaded one may stretch the call past
    // the threshold, and then what is recorded must be at least that long.
    assertTrue(RecordingFile.readAllEvents(file).stream()
        .filter(e -> e.getEventType().getName().startsWith("dev.holdfast."))
        .allMatch(e -> e.getDuration().toMillis() >= 10),
        "only waits and holds of at least the events' 10 ms threshold are recorded");
  }

  /** Runs {@code action} while recording every Holdfast event without threshold. */
  private static List<RecordedEvent> record(Path dir, ThrowingRunnable action) throws Exception {
    Path file = dir.resolve("holdfast.jfr");
    try (Recording recording = new Recording()) {
      for (String name : List.of("LockWait", "LockHeld", "LockLost", "LockRenewalFailed",
          "LockAtRisk", "LockRecovered")) {
        recording.enable("dev.holdfast." + name).withoutThreshold().withStackTrace();
      }
      recording.start();
      action.run();
      // Events of the renewal and event threads may still be on their way.
      Thread.sleep(100);
      recording.stop();
      recording.dump(file);
    }
    assertTrue(Files.size(file) > 0);
    return RecordingFile.readAllEvents(file);
  }

  private static List<RecordedEvent> named(List<RecordedEvent> events, String name) {
    return events.stream().filter(e -> e.getEventType().getName().equals(name))
        .collect(Collectors.toList());
  }

  @FunctionalInterface
  interface ThrowingRunnable {
    void run() throws Exception;
  }
}
