package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisServer;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Two processes of the packaged application ({@code target/quarkus-app}) on one Redis: the lock
 * has to hold across JVMs, not just threads.
 */
class TwoInstancesIT {
  private static final int STOCK = 20;
  private static final int REQUESTS = 4 * STOCK;

  /** The snapshot job's schedule here: every {@link #SNAPSHOT_PERIOD}, on both instances. */
  private static final String SNAPSHOT_CRON = "0/3 * * * * ?";
  private static final Duration SNAPSHOT_PERIOD = Duration.ofSeconds(3);
  /**
   * Each instance calls the job up to this long after the scheduled time, at random: the two
   * instances' calls are apart by up to that, much more than the job takes.
   */
  private static final String SNAPSHOT_MAX_DELAY = "500ms";
  /**
   * The job's {@code holdAtLeast} here, by configuration (the annotation's 5 s suits a
   * once-a-minute job): longer than the instances' calls are apart (with a second to spare for a
   * busy machine), shorter than the period (likewise).
   */
  private static final String SNAPSHOT_HOLD = "1500ms";
  /** How many consecutive occurrences the snapshot test judges. */
  private static final int OCCURRENCES = 5;

  private static RedisServer redis;
  private static List<AppInstance> instances = List.of();
  private static List<URI> uris;
  private static final StockApi api = new StockApi();

  @BeforeAll
  static void startRedisAndTwoInstances() {
    redis = RedisServer.start();
    Path jar = Path.of(System.getProperty("app.jar", "target/quarkus-app/quarkus-run.jar"));
    instances = AppInstance.startAll(2, jar, redis.uri(), Path.of("target", "it-logs"),
        Duration.ofSeconds(60),
        "stock.snapshot.cron=" + SNAPSHOT_CRON,
        "stock.snapshot.max-delay=" + SNAPSHOT_MAX_DELAY,
        "holdfast.\"" + StockSnapshotJob.class.getName() + "/takeSnapshot\".locked.hold-at-least="
            + SNAPSHOT_HOLD,
        // Skipped @Locked(skipIfBusy) calls are logged at debug.
        "quarkus.log.category.\"dev.holdfast.cdi\".level=DEBUG");
    uris = instances.stream().map(AppInstance::uri).toList();
  }

  @AfterAll
  static void stopEverything() {
    try {
      AppInstance.closeAll(instances);
    } finally {
      if (redis != null) {
        redis.close();
      }
    }
  }

  @Test
  void lockedReservations_fromTwoInstances_sellExactlyTheStock() {
    api.setStock(uris.get(0), "locked", STOCK);

    StockApi.Burst burst = api.reserveAll(uris, "locked", "reserve", REQUESTS);

    assertEquals(0, burst.errors(), "failed requests");
    assertEquals(STOCK, burst.reserved(), () -> "units reserved, by instance: "
        + Arrays.toString(burst.reservedPerInstance()));
    for (URI instance : uris) {
      assertEquals(0, api.units(instance, "locked"), "stock left, as " + instance + " sees it");
    }
  }

  /**
   * A {@code Uni} endpoint over a {@code @Locked} method returning {@code Uni} whose
   * read-modify-write runs after the method returned: the lock is held until the {@code Uni}'s
   * item, on both instances (proves the asynchronous path under ArC).
   */
  @Test
  void lockedUniReservations_fromTwoInstances_sellExactlyTheStock() {
    api.setStock(uris.get(0), "uni", STOCK);

    StockApi.Burst burst = api.reserveAll(uris, "uni", "reserve-uni", REQUESTS);

    assertEquals(0, burst.errors(), "failed requests");
    assertEquals(STOCK, burst.reserved(), () -> "units reserved, by instance: "
        + Arrays.toString(burst.reservedPerInstance()));
    for (URI instance : uris) {
      assertEquals(0, api.units(instance, "uni"), "stock left, as " + instance + " sees it");
    }
  }

  /**
   * A {@code @RunOnVirtualThread} endpoint that is itself {@code @Locked}: the lock's owner is a
   * virtual thread. Runs on JDK 21+ (the instances run on the test's JDK).
   */
  @Test
  void lockedVirtualThreadReservations_fromTwoInstances_sellExactlyTheStock() {
    assumeTrue(Runtime.version().feature() >= 21,
        "the endpoint is built on JDK 21+ only (Quarkus refuses it before)");
    api.setStock(uris.get(0), "virtual", STOCK);

    StockApi.Burst burst = api.reserveAll(uris, "virtual", "reserve-virtual", REQUESTS);

    assertEquals(0, burst.errors(), "failed requests");
    assertEquals(STOCK, burst.reserved(), () -> "units reserved, by instance: "
        + Arrays.toString(burst.reservedPerInstance()));
    for (URI instance : uris) {
      assertEquals(0, api.units(instance, "virtual"), "stock left, as " + instance + " sees it");
    }
    assertEquals(REQUESTS, burst.onVirtualThreads(), "answers from a virtual thread");
  }

  /** The control: the same load without the lock must go wrong, or the test above proves nothing. */
  @Test
  void unprotectedReservations_fromTwoInstances_oversell() {
    api.setStock(uris.get(0), "unprotected", STOCK);

    StockApi.Burst burst = api.reserveAll(uris, "unprotected", "reserve-unprotected", REQUESTS);

    assertEquals(0, burst.errors(), "failed requests");
    int left = api.units(uris.get(1), "unprotected");
    assertTrue(burst.reserved() > STOCK || burst.reserved() + left != STOCK,
        () -> "expected overselling without a lock, but " + burst.reserved() + " of " + STOCK
            + " units were reserved and " + left + " are left");
  }

  @Test
  void namedReportLock_letsOneInstanceAtATimeRunTheReport() {
    List<CompletableFuture<Integer>> runs = new ArrayList<>();
    for (URI instance : uris) {
      runs.add(api.report(instance));
    }
    List<Integer> statuses = runs.stream().map(CompletableFuture::join).sorted().toList();
    assertEquals(List.of(200, 409), statuses, "one ran the report, the other found it taken");
  }

  /**
   * Both instances' schedulers fire every occurrence of the snapshot job, up to
   * {@value #SNAPSHOT_MAX_DELAY} apart; {@code @Locked(skipIfBusy = true, holdAtLeast = …)} lets
   * exactly one of them run it: every occurrence since the test began appears once in the shared
   * list, none twice, and none is missing in between; the other instance counted a skip.
   */
  @Test
  void snapshotJob_onTwoInstances_runsEachOccurrenceExactlyOnce() throws Exception {
    Instant testStart = Instant.now();
    List<String> instanceIds = uris.stream().map(uri -> api.snapshots(uri).instance()).toList();
    assertEquals(2, Set.copyOf(instanceIds).size(), "the two instances' names: " + instanceIds);
    List<Double> skippedBefore = uris.stream().map(TwoInstancesIT::snapshotsSkipped).toList();

    // Wait for one occurrence beyond those judged: a late second run of the last judged one
    // would have had a whole period to show up.
    Map<Instant, List<String>> byOccurrence = Await.value(
        SNAPSHOT_PERIOD.multipliedBy(OCCURRENCES + 1).plusSeconds(60), () -> {
          Map<Instant, List<String>> runs = runnersByOccurrence(testStart);
          return runs.size() > OCCURRENCES ? runs : null;
        }, "more than " + OCCURRENCES + " occurrences of the snapshot job since " + testStart);

    List<Instant> judged = byOccurrence.keySet().stream().limit(OCCURRENCES).toList();
    for (Instant occurrence : judged) {
      List<String> runners = byOccurrence.get(occurrence);
      assertEquals(1, runners.size(), "runs of the occurrence " + occurrence + ", by instance: "
          + runners + "; all: " + byOccurrence);
      assertTrue(instanceIds.contains(runners.get(0)), "unknown runner " + runners.get(0));
    }
    assertTrue(!judged.get(0).isAfter(testStart.plus(SNAPSHOT_PERIOD)), "the first occurrence after "
        + testStart + " ran (none missed); all: " + byOccurrence);
    for (int i = 1; i < judged.size(); i++) {
      assertEquals(SNAPSHOT_PERIOD, Duration.between(judged.get(i - 1), judged.get(i)),
          "occurrences " + judged.get(i - 1) + " and " + judged.get(i) + " are one period apart "
              + "(none missed); all: " + byOccurrence);
    }
    // Each instance's scheduler fired every judged occurrence too, so it skipped (and counted)
    // each one that the other instance ran.
    for (int i = 0; i < 2; i++) {
      String other = instanceIds.get(1 - i);
      long ranByOther = judged.stream()
          .filter(o -> byOccurrence.get(o).get(0).equals(other)).count();
      double skipped = snapshotsSkipped(uris.get(i)) - skippedBefore.get(i);
      assertTrue(skipped >= ranByOther, instanceIds.get(i) + " counted " + skipped
          + " skipped snapshots; the other instance ran " + ranByOther + " of " + judged);
      if (ranByOther > 0) {
        String log = Files.readString(instances.get(i).log(), StandardCharsets.UTF_8);
        assertTrue(log.contains("lock 'stock-snapshot' is held elsewhere"),
            "a skip at debug level in " + instances.get(i).log());
      }
    }
  }

  /** How many snapshot calls the instance skipped because the lock was busy, so far. */
  private static double snapshotsSkipped(URI instance) {
    return api.metric(instance, "holdfast_lock_skipped_total", "template=\"stock-snapshot\"");
  }

  /** The snapshot job's runs scheduled after {@code since}: who ran each occurrence, in order. */
  private static Map<Instant, List<String>> runnersByOccurrence(Instant since) {
    Map<Instant, List<String>> runners = new TreeMap<>();
    for (StockApi.SnapshotRun run : api.snapshots(uris.get(0)).runs()) {
      if (run.occurrence().isAfter(since)) {
        runners.computeIfAbsent(run.occurrence(), o -> new ArrayList<>()).add(run.instance());
      }
    }
    return runners;
  }
}
