package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.example.stock.StockClient.Reservation;
import dev.holdfast.example.stock.StockServers.Servers;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Two WildFly servers on one Redis, under concurrent load: with {@code @Locked} the stock is
 * sold exactly once; without it, the same load oversells (the control proving this test can
 * fail). And the snapshot job, scheduled on both, runs each occurrence exactly once.
 */
@ExtendWith(StockServers.class)
class TwoInstancesIT {

  private static final System.Logger LOG = System.getLogger(TwoInstancesIT.class.getName());
  private static final int STOCK = 20;
  private static final int REQUESTS = 4 * STOCK;
  /** How many consecutive occurrences the snapshot test judges. */
  private static final int OCCURRENCES = 5;

  private final StockClient a;
  private final StockClient b;

  TwoInstancesIT(Servers servers) {
    this.a = new StockClient(servers.a());
    this.b = new StockClient(servers.b());
  }

  /**
   * Through the blocking {@code @Locked} method ({@code reserve}) and through the one that
   * returns a {@code CompletionStage} and holds the lock until it completes
   * ({@code reserve-async}).
   */
  @ParameterizedTest
  @ValueSource(strings = {"reserve", "reserve-async"})
  void lockedReservations_acrossTwoInstances_sellExactlyTheStock(String endpoint,
      TestInfo test) {
    String sku = StockEndpointIT.sku(test) + "-" + endpoint;
    warmUp(sku, endpoint);
    a.setStock(sku, STOCK);

    List<Reservation> results = reserveConcurrently(sku, endpoint);

    long sold = results.stream().filter(Reservation::reserved).count();
    long longestWait = results.stream().mapToLong(Reservation::waitedMs).max().orElseThrow();
    LOG.log(System.Logger.Level.INFO, "@Locked ({5}): {0} of {1} reservations succeeded with "
        + "{2} units in stock; final stock {3}; longest wait {4} ms",
        sold, REQUESTS, STOCK, a.stock(sku), longestWait, endpoint);
    assertEquals(STOCK, sold, "successful reservations of " + STOCK + " units");
    assertEquals(0, a.stock(sku));
    assertEquals(0, b.stock(sku));
    assertTrue(longestWait >= StockServers.WORK_MILLIS,
        "someone waited for a holder's work; longest wait " + longestWait + " ms");
  }

  @Test
  void unprotectedReservations_acrossTwoInstances_oversell(TestInfo test) {
    String sku = StockEndpointIT.sku(test);
    warmUp(sku, "reserve-unprotected");
    a.setStock(sku, STOCK);

    List<Reservation> results = reserveConcurrently(sku, "reserve-unprotected");

    long sold = results.stream().filter(Reservation::reserved).count();
    LOG.log(System.Logger.Level.INFO, "unprotected: {0} of {1} reservations succeeded with {2} "
        + "units in stock (oversold by {3}); final stock {4}",
        sold, REQUESTS, STOCK, sold - STOCK, a.stock(sku));
    assertTrue(sold > STOCK, "without the lock " + sold + " reservations of " + STOCK
        + " units succeeded; expected overselling (final stock " + a.stock(sku) + ")");
  }

  /** {@value #REQUESTS} reservations at once, alternating between the two servers. */
  private List<Reservation> reserveConcurrently(String sku, String endpoint) {
    List<CompletableFuture<Reservation>> calls = new ArrayList<>();
    for (int i = 0; i < REQUESTS; i++) {
      calls.add((i % 2 == 0 ? a : b).reserveAsync(sku, endpoint));
    }
    return calls.stream().map(CompletableFuture::join).toList();
  }

  /** A first call on each server, so that one-time set-up does not skew the run. */
  private void warmUp(String sku, String endpoint) {
    String warmUpSku = sku + "-warm-up";
    a.setStock(warmUpSku, 2);
    assertTrue(a.reserveAsync(warmUpSku, endpoint).join().reserved());
    assertTrue(b.reserveAsync(warmUpSku, endpoint).join().reserved());
  }

  /**
   * Both servers' schedules fire every occurrence of the snapshot job, up to
   * {@value StockServers#SNAPSHOT_MAX_DELAY_MILLIS} ms apart; {@code @Locked(skipIfBusy = true,
   * holdAtLeast = …)} lets exactly one of them run it: every occurrence since the test began
   * appears once in the shared list, none twice, and none is missing in between. (The skips are
   * counted only in Micrometer and logged at debug, neither of which this WildFly setup exposes;
   * the Quarkus example's test checks them.)
   */
  @Test
  void snapshotJob_onTwoInstances_runsEachOccurrenceExactlyOnce() {
    Instant testStart = Instant.now();
    Set<String> instanceIds = Set.of(a.snapshots().instance(), b.snapshots().instance());
    assertEquals(2, instanceIds.size(), "the two servers' instance names: " + instanceIds);
    Duration period = StockServers.SNAPSHOT_PERIOD;

    // Wait for one occurrence beyond those judged: a late second run of the last judged one
    // would have had a whole period to show up.
    Map<Instant, List<String>> byOccurrence = Await.value(
        period.multipliedBy(OCCURRENCES + 1).plusSeconds(60), () -> {
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
    assertTrue(!judged.get(0).isAfter(testStart.plus(period)), "the first occurrence after "
        + testStart + " ran (none missed); all: " + byOccurrence);
    for (int i = 1; i < judged.size(); i++) {
      assertEquals(period, Duration.between(judged.get(i - 1), judged.get(i)),
          "occurrences " + judged.get(i - 1) + " and " + judged.get(i) + " are one period apart "
              + "(none missed); all: " + byOccurrence);
    }
  }

  /** The snapshot job's runs scheduled after {@code since}: who ran each occurrence, in order. */
  private Map<Instant, List<String>> runnersByOccurrence(Instant since) {
    Map<Instant, List<String>> runners = new TreeMap<>();
    for (StockClient.SnapshotRun run : a.snapshots().runs()) {
      if (run.occurrence().isAfter(since)) {
        runners.computeIfAbsent(run.occurrence(), o -> new ArrayList<>()).add(run.instance());
      }
    }
    return runners;
  }
}
