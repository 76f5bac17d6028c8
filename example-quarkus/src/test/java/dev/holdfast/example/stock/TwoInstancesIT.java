package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.RedisServer;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
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

  private static RedisServer redis;
  private static List<AppInstance> instances = List.of();
  private static List<URI> uris;
  private static final StockApi api = new StockApi();

  @BeforeAll
  static void startRedisAndTwoInstances() {
    redis = RedisServer.start();
    Path jar = Path.of(System.getProperty("app.jar", "target/quarkus-app/quarkus-run.jar"));
    instances = AppInstance.startAll(2, jar, redis.uri(), Path.of("target", "it-logs"),
        Duration.ofSeconds(60));
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
}
