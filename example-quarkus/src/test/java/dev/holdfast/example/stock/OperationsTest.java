package dev.holdfast.example.stock;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

/**
 * Holdfast's operations endpoints in Quarkus: the {@code holdfast} readiness check at
 * {@code /q/health/ready} (quarkus-smallrye-health) and the lock meters at {@code /q/metrics}
 * (quarkus-micrometer-registry-prometheus), both found by the build-compatible extension.
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class OperationsTest {

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  @Test
  void readiness_includesTheHoldfastCheck_upWithTheRedisNode() {
    String node = redisAddress.replaceFirst("^redis://", "");
    given().get("/q/health/ready").then().statusCode(200)
        .body("status", equalTo("UP"))
        .body("checks.name", hasItem("holdfast"))
        .body("checks.find { it.name == 'holdfast' }.status", equalTo("UP"))
        .body("checks.find { it.name == 'holdfast' }.data.'" + node + "'", startsWith("UP "));
    given().get("/q/health/live").then().statusCode(200)
        .body("checks.name", org.hamcrest.Matchers.not(hasItem("holdfast")));
  }

  @Test
  void metrics_countLockedCallsByTemplate() {
    for (String sku : new String[] {"metrics-a", "metrics-b"}) {
      given().contentType("application/json").body(Map.of("units", 5))
          .put("/stock/{sku}", sku).then().statusCode(200);
      given().post("/stock/{sku}/reserve", sku).then().statusCode(200);
      given().post("/stock/{sku}/reserve", sku).then().statusCode(200);
    }
    String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();

    assertTrue(value(metrics, "holdfast_lock_wait_seconds_count",
        "outcome=\"acquired\",template=\"stock:{sku}\"") >= 4, metrics);
    assertTrue(value(metrics, "holdfast_lock_held_seconds_count",
        "template=\"stock:{sku}\"") >= 4, metrics);
    assertTrue(metrics.contains("holdfast_lock_wait_seconds{outcome=\"acquired\","
        + "template=\"stock:{sku}\",quantile=\"0.99\"}"), "percentiles");
    assertTrue(metrics.contains("holdfast_lock_active "), "the active-holds gauge");
    assertTrue(metrics.contains("holdfast_lock_waiting "), "the waiting-threads gauge");
    assertTrue(!metrics.contains("template=\"stock:metrics-a\""), "never a rendered name");
  }

  /** The value of the series {@code name{labels}} in Prometheus text. */
  private static double value(String metrics, String name, String labels) {
    Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name + "{" + labels + "}") + " (\\S+)$")
        .matcher(metrics);
    return m.find() ? Double.parseDouble(m.group(1)) : -1;
  }
}
