package dev.holdfast.example.stock;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.Jedis;

/**
 * The stock endpoints on Quarkus with a real Redis. The lock comes from Holdfast's
 * build-compatible extension, the only kind of extension ArC runs: these tests prove that path.
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class StockResourceTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(10);

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  /** The application's own client: its id starts the hash fields of the locks it holds. */
  @Inject
  LockClient appLocks;

  @Inject
  StockStore store;

  /* One name as both kinds of named lock: two synthetic beans of Holdfast's BCE (ArC). */
  @Inject
  @Named("inventory:named-probe")
  FencedLock fencedProbe;

  @Inject
  @Named("inventory:named-probe")
  DistributedLock plainProbe;

  @TestHTTPResource("/")
  URI base;

  private String sku;

  @BeforeEach
  void uniqueSku(TestInfo test) {
    sku = test.getTestMethod().orElseThrow().getName();
  }

  @Test
  void setAndGet_keepTheLevelInRedis() {
    given().get("/stock/{sku}", sku).then().statusCode(404);
    setUnits(7).then().statusCode(200).body("units", equalTo(7));
    given().get("/stock/{sku}", sku).then().statusCode(200)
        .body("sku", equalTo(sku)).body("units", equalTo(7));
    try (Jedis redis = redis()) {
      assertEquals("7", redis.get("stock-level:" + sku));
    }
  }

  @Test
  void set_withoutANonNegativeNumberOfUnits_isRejected() {
    setUnits(-1).then().statusCode(400);
    given().contentType("application/json").body("{}").put("/stock/{sku}", sku)
        .then().statusCode(400);
    given().get("/stock/{sku}", sku).then().statusCode(404);
  }

  @Test
  void reserve_sellsEachUnitOnceThenAnswersSoldOut() {
    setUnits(2);
    reserve().then().statusCode(200).body("reserved", equalTo(true));
    reserve().then().statusCode(200).body("reserved", equalTo(true));
    reserve().then().statusCode(200).body("reserved", equalTo(false));
    given().get("/stock/{sku}", sku).then().body("units", equalTo(0));
  }

  @Test
  void reserve_holdsItsLockInRedisOnceWhileItRuns() throws Exception {
    setUnits(1);
    String lockKey = "stock:" + sku;
    try (Jedis redis = redis()) {
      CompletableFuture<Boolean> call = CompletableFuture.supplyAsync(
          () -> reserve().then().statusCode(200).extract().<Boolean>path("reserved"));

      Map<String, String> holds = Await.value(TIMEOUT, () -> {
        Map<String, String> fields = redis.hgetAll(lockKey);
        return fields.isEmpty() ? null : fields;
      }, "the reservation's lock " + lockKey + " exists in Redis");
      // One field: one holder. Count 1: the interceptor ran once (twice would reenter: 2).
      assertEquals(1, holds.size(), () -> "holders: " + holds);
      Map.Entry<String, String> hold = holds.entrySet().iterator().next();
      assertTrue(hold.getKey().startsWith(appLocks.getClientId() + ":"),
          () -> "held by the application's client, not " + hold.getKey());
      assertEquals("1", hold.getValue(), "hold count");

      assertTrue(call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
      assertFalse(redis.exists(lockKey), "released before the answer was sent");
    }
  }

  @Test
  void reserve_waitsWhileAnotherInstanceHoldsTheLock_andReportsTheWait() throws Exception {
    setUnits(1);
    long heldMillis = 300;
    try (LockClient otherInstance = LockClient.create(Map.of("holdfast.redis.address",
        redisAddress)); Jedis redis = redis()) {
      DistributedLock lock = otherInstance.getLock("stock:" + sku);
      CompletableFuture<Integer> call;
      lock.lock();
      try {
        call = CompletableFuture.supplyAsync(() -> reserve().then()
            .statusCode(200).body("reserved", equalTo(true)).extract().<Integer>path("waitedMs"));
        String channel = "redisson_lock__channel:{stock:" + sku + "}";
        Await.until(TIMEOUT, () -> redis.pubsubNumSub(channel).get(channel) > 0,
            "the application waits on " + channel);
        Thread.sleep(heldMillis); // the other instance's work, for a wait worth measuring
        assertFalse(call.isDone(), "the reservation ran while another instance held the lock");
      } finally {
        lock.unlock();
      }
      int waitedMs = call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      assertTrue(waitedMs >= heldMillis, () -> "waitedMs " + waitedMs + " < " + heldMillis);
    }
  }

  @Test
  void concurrentReservations_neverSellMoreThanTheStock() {
    int units = 4;
    setUnits(units);
    StockApi.Burst burst = new StockApi().reserveAll(List.of(base), sku, "reserve", 4 * units);
    assertEquals(0, burst.errors(), "failed requests");
    assertEquals(units, burst.reserved(), "units reserved");
    given().get("/stock/{sku}", sku).then().body("units", equalTo(0));
  }

  @Test
  void restock_holdsTheLockFromBeforeTheTransactionUntilAfterItsCommit() {
    setUnits(1);
    given().post("/stock/{sku}/restock?units=5", sku).then().statusCode(200)
        .body("units", equalTo(6))
        .body("inTransaction", equalTo(true))
        .body("lockHeldInTransaction", equalTo(true))
        .body("lockHoldCount", equalTo(1))
        .body("lockHeldBeforeCommit", equalTo(true))
        .body("committed", equalTo(true))
        .body("lockHeldAfterCommit", equalTo(true));
    try (Jedis redis = redis()) {
      assertFalse(redis.exists("stock:" + sku), "released once the call returned");
    }
  }

  @Test
  void fencedWrites_areTakenWithGrowingTokens_andAStaleTokenIsRefused() {
    long first = setUnitsFenced(5).then().statusCode(200).body("accepted", equalTo(true))
        .body("lockLost", equalTo(false)).extract().jsonPath().getLong("token");
    long second = setUnitsFenced(6).then().statusCode(200).extract().jsonPath().getLong("token");
    assertTrue(second > first, first + " then " + second);

    assertFalse(store.setUnitsFenced(sku, 99, first), "an older token is refused");
    assertFalse(store.setUnitsFenced(sku, 99, second), "so is the same token again");
    given().get("/stock/{sku}", sku).then().body("units", equalTo(6));
    assertTrue(store.setUnitsFenced(sku, 7, second + 1), "a newer token is taken");
    given().get("/stock/{sku}", sku).then().body("units", equalTo(7));
  }

  @Test
  void fencedWrite_holdsTheInventoryLockWhileItWaits() throws Exception {
    setUnits(1);
    try (Jedis redis = redis()) {
      CompletableFuture<Integer> call = CompletableFuture.supplyAsync(() -> given()
          .contentType("application/json").body(Map.of("units", 3))
          .put("/stock/{sku}/fenced?holdMs=300", sku).statusCode());
      Await.until(TIMEOUT, () -> redis.exists("inventory:" + sku), "the write holds its lock");
      assertEquals(200, call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
      assertFalse(redis.exists("inventory:" + sku), "released before the answer was sent");
    }
    given().get("/stock/{sku}", sku).then().body("units", equalTo(3));
  }

  @Test
  void writes_withABadHoldOrLevel_areRejected() {
    given().contentType("application/json").body(Map.of("units", 1))
        .put("/stock/{sku}/fenced?holdMs=-1", sku).then().statusCode(400);
    given().contentType("application/json").body(Map.of("units", -1))
        .put("/stock/{sku}/unfenced", sku).then().statusCode(400);
  }

  @Test
  void namedFencedLock_andPlainLock_ofOneName_areInjected_andExcludeEachOther()
      throws Exception {
    long token = fencedProbe.lockAndGetToken();
    try {
      assertTrue(token > 0);
      assertFalse(CompletableFuture.supplyAsync(plainProbe::tryLock)
          .get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), "the plain handle is excluded");
    } finally {
      fencedProbe.unlock();
    }
    assertEquals("inventory:named-probe", plainProbe.getName());
  }

  @Test
  void restock_withoutPositiveUnits_isRejected() {
    given().post("/stock/{sku}/restock?units=0", sku).then().statusCode(400);
  }

  private Response setUnits(int units) {
    return given().contentType("application/json").body(Map.of("units", units))
        .put("/stock/{sku}", sku);
  }

  private Response setUnitsFenced(int units) {
    return given().contentType("application/json").body(Map.of("units", units))
        .put("/stock/{sku}/fenced", sku);
  }

  private Response reserve() {
    return given().post("/stock/{sku}/reserve", sku);
  }

  /** A plain connection for looking at keys. */
  private Jedis redis() {
    return new Jedis(URI.create(redisAddress),
        DefaultJedisClientConfig.builder().serverDefaultProtocol().build());
  }
}
