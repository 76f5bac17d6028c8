package dev.holdfast.example.stock;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

/**
 * The {@code Uni} and {@code @RunOnVirtualThread} reservation endpoints under ArC: both wait for
 * a holder elsewhere, then reserve under the SKU's lock.
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class AsyncEndpointsTest {

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  @Inject
  Inventory inventory;

  @Test
  void uniMethod_doesNothingBeforeSubscription_andReleasesWithItsItem() throws Exception {
    given().contentType("application/json").body(Map.of("units", 1))
        .put("/stock/{sku}", "uni-sub").then().statusCode(200);
    Uni<Inventory.Reservation> uni = inventory.reserveUni("uni-sub");
    try (LockClient other = LockClient.create(Map.of("holdfast.redis.address", redisAddress))) {
      DistributedLock lock = other.getLock("stock:uni-sub");
      assertFalse(lock.isLocked(), "no subscription, no lock");
      assertTrue(uni.await().atMost(java.time.Duration.ofSeconds(30)).reserved());
      assertFalse(lock.isLocked(), "released with the item");
    }
    assertFalse(inventory.reserveUni("uni-sub").await()
        .atMost(java.time.Duration.ofSeconds(30)).reserved(), "sold out");
  }

  @Test
  void uniEndpoint_waitsForAHolderElsewhere_thenReserves() throws Exception {
    assertWaitsThenReserves("uni-wait", "reserve-uni");
  }

  /** Built only on JDK 21+ (Quarkus refuses a {@code @RunOnVirtualThread} endpoint before). */
  @Test
  void virtualThreadEndpoint_waitsForAHolderElsewhere_thenReserves() throws Exception {
    assumeTrue(Runtime.version().feature() >= 21, "virtual threads need JDK 21+");
    Response answer = assertWaitsThenReserves("vt-wait", "reserve-virtual");
    assertTrue(answer.jsonPath().getBoolean("virtualThread"), "ran on a virtual thread");
  }

  private Response assertWaitsThenReserves(String sku, String endpoint) throws Exception {
    given().contentType("application/json").body(Map.of("units", 2))
        .put("/stock/{sku}", sku).then().statusCode(200);
    CompletableFuture<Response> call;
    try (LockClient other = LockClient.create(Map.of("holdfast.redis.address", redisAddress))) {
      DistributedLock lock = other.getLock("stock:" + sku);
      lock.lock();
      try {
        call = CompletableFuture.supplyAsync(
            () -> given().post("/stock/{sku}/" + endpoint, sku).andReturn());
        CompletableFuture<Response> pending = call;
        assertThrows(TimeoutException.class, () -> pending.get(1, TimeUnit.SECONDS),
            "answered while the lock was held elsewhere");
      } finally {
        lock.unlock();
      }
    }
    Response answer = call.get(60, TimeUnit.SECONDS);
    assertEquals(200, answer.statusCode(), answer.asString());
    assertTrue(answer.jsonPath().getBoolean("reserved"), answer.asString());
    given().get("/stock/{sku}", sku).then().statusCode(200)
        .body("units", org.hamcrest.Matchers.equalTo(1));
    return answer;
  }
}
