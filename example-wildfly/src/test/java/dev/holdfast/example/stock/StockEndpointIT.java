package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.example.stock.StockClient.Reservation;
import dev.holdfast.example.stock.StockServers.Servers;
import dev.holdfast.testing.Await;
import jakarta.json.JsonObject;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;

/**
 * The endpoints on one WildFly server, and its locks against a holder in another process (this
 * test JVM, through its own {@link LockClient} on the same Redis).
 */
@ExtendWith(StockServers.class)
class StockEndpointIT {

  /** How long the test holds a SKU's lock while a server waits for it. */
  private static final long HOLD_MILLIS = 300;

  private static LockClient otherProcess;

  private final Servers servers;
  private final StockClient server;

  StockEndpointIT(Servers servers) {
    this.servers = servers;
    this.server = new StockClient(servers.a());
  }

  @BeforeAll
  static void connectOtherProcess(Servers servers) {
    otherProcess = LockClient.create(Map.of("holdfast.redis.address", servers.redis().uri()));
  }

  @AfterAll
  static void closeOtherProcess() {
    if (otherProcess != null) {
      otherProcess.close();
    }
  }

  @Test
  void put_thenGet_returnsTheLevel(TestInfo test) {
    String sku = sku(test);
    server.setStock(sku, 7);

    assertEquals(7, server.stock(sku));
    assertEquals(7, new StockClient(servers.b()).stock(sku), "the other instance sees it");
  }

  @Test
  void get_unknownSku_is404(TestInfo test) {
    assertEquals(404, server.get("stock/" + sku(test)).statusCode());
  }

  @Test
  void put_negativeOrMissingUnits_is400(TestInfo test) {
    assertEquals(400, server.put("stock/" + sku(test), "{\"units\":-1}").statusCode());
    assertEquals(400, server.put("stock/" + sku(test), "{}").statusCode());
    assertEquals(404, server.get("stock/" + sku(test)).statusCode(), "nothing was stored");
  }

  @Test
  void fencedWrites_areTakenWithGrowingTokens_badOnesAre400(TestInfo test) {
    String sku = sku(test);
    StockClient.Write first = server.writeAsync(sku, true, 5, 0).join();
    StockClient.Write second = server.writeAsync(sku, true, 6, 0).join();
    assertEquals(200, first.status());
    assertTrue(first.accepted() && !first.lockLost(), first.toString());
    assertTrue(second.token() > first.token(), first + " then " + second);
    assertEquals(6, server.stock(sku));
    assertEquals(400, server.put("stock/" + sku + "/fenced?holdMs=-1", "{\"units\":1}")
        .statusCode());
    assertEquals(400, server.put("stock/" + sku + "/unfenced", "{\"units\":-1}").statusCode());
  }

  @Test
  void reserve_untilSoldOut_thenReportsNotReserved(TestInfo test) {
    String sku = sku(test);
    server.setStock(sku, 2);

    List<Boolean> reserved = List.of(server.reserve(sku, true).reserved(),
        server.reserve(sku, true).reserved(), server.reserve(sku, true).reserved());

    assertEquals(List.of(true, true, false), reserved);
    assertEquals(0, server.stock(sku));
  }

  /**
   * {@code reserve} is a blocking {@code @Locked} method; {@code reserve-async} returns a
   * {@code CompletionStage}, holds the lock until it completes, and runs with the caller's
   * context on a Holdfast thread (its {@code java:comp} lookup fails the call otherwise).
   */
  @ParameterizedTest
  @ValueSource(strings = {"reserve", "reserve-async"})
  void reserve_whileAnotherProcessHoldsTheSkuLock_waitsForIt(String endpoint, TestInfo test)
      throws Exception {
    String sku = sku(test) + "-" + endpoint;
    server.setStock(sku, 1);
    DistributedLock lock = otherProcess.getLock("stock:" + sku);
    CompletableFuture<Reservation> reservation;
    long heldSinceWaiterSeen;
    lock.lock();
    try {
      reservation = server.reserveAsync(sku, endpoint);
      // The server's waiter subscribes to the lock's unlock channel: proof that it is waiting.
      CompletableFuture<Reservation> call = reservation;
      Await.until(Duration.ofSeconds(30), () -> {
        if (call.isDone()) {
          throw new AssertionError("Reserved while another process held the lock: " + call.join());
        }
        return unlockChannelSubscribers(sku) > 0;
      }, "the server waits for lock stock:" + sku);
      long waiterSeen = System.nanoTime();
      Thread.sleep(HOLD_MILLIS); // not to synchronise: a known hold the server must report
      assertFalse(reservation.isDone(), "reserved while another process held the lock");
      heldSinceWaiterSeen = System.nanoTime() - waiterSeen;
    } finally {
      lock.unlock();
    }

    Reservation result = reservation.get(30, TimeUnit.SECONDS);
    assertTrue(result.reserved());
    assertTrue(result.waitedMs() >= TimeUnit.NANOSECONDS.toMillis(heldSinceWaiterSeen),
        "waitedMs " + result.waitedMs() + " covers the time the lock was held");
    assertEquals(0, server.stock(sku));
  }

  @Test
  void report_whileAnotherProcessRunsIt_is409_andRunsOnceFree(TestInfo test) {
    server.setStock(sku(test), 3);
    DistributedLock reportLock = otherProcess.getLock("report");
    HttpResponse<String> busy;
    reportLock.lock();
    try {
      busy = server.post("report");
    } finally {
      reportLock.unlock();
    }
    HttpResponse<String> done = server.post("report");

    assertEquals(409, busy.statusCode(), busy.body());
    assertEquals(200, done.statusCode(), done.body());
    JsonObject report = StockClient.json(done.body());
    assertTrue(report.getInt("skus") >= 1, done.body());
    assertTrue(report.getJsonNumber("units").longValue() >= 3, done.body());
  }

  private long unlockChannelSubscribers(String sku) {
    String channel = "redisson_lock__channel:{stock:" + sku + "}";
    try (Jedis redis = servers.redis().admin()) {
      return redis.pubsubNumSub(channel).getOrDefault(channel, 0L);
    }
  }

  /** A SKU of the test's own, so that tests never share stock or locks. */
  static String sku(TestInfo test) {
    return test.getTestClass().orElseThrow().getSimpleName() + "-"
        + test.getTestMethod().orElseThrow().getName();
  }
}
