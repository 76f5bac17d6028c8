package dev.holdfast.example.stock;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.greaterThanOrEqualTo;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import java.util.Map;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

/** The report guarded by the injected {@code @Named("report")} lock. */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class ReportResourceTest {

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  @Test
  void report_whileAnotherInstanceRunsIt_answers409_andRunsOnceItIsDone() {
    given().contentType("application/json").body(Map.of("units", 3))
        .put("/stock/{sku}", "report-sku").then().statusCode(200);
    try (LockClient otherInstance =
        LockClient.create(Map.of("holdfast.redis.address", redisAddress))) {
      DistributedLock reportLock = otherInstance.getLock("report");
      reportLock.lock();
      try {
        given().post("/report").then().statusCode(409)
            .body("error", equalTo("A report is already running"));
      } finally {
        reportLock.unlock();
      }
    }
    given().post("/report").then().statusCode(200)
        .body("skus", greaterThanOrEqualTo(1))
        .body("units", greaterThanOrEqualTo(3));
    given().post("/report").then().statusCode(200); // and the application released it
  }
}
