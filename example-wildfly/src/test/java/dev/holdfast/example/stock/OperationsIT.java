package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.example.stock.StockServers.Servers;
import jakarta.json.JsonObject;
import jakarta.json.JsonValue;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Holdfast's readiness check on WildFly: MicroProfile Health (in
 * {@code standalone-microprofile.xml}) finds the {@code holdfast} check that the portable
 * extension registers, and reports it at {@code /health/ready} on the management port. WildFly's
 * default configuration has no Micrometer: that the deployment works shows Holdfast runs without
 * it.
 */
@ExtendWith(StockServers.class)
class OperationsIT {
  private static final HttpClient HTTP = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  private final Servers servers;

  OperationsIT(Servers servers) {
    this.servers = servers;
  }

  @Test
  void healthReady_onTheManagementPort_hasTheHoldfastCheckUp() throws Exception {
    HttpResponse<String> ready = HTTP.send(HttpRequest.newBuilder(
            servers.a().managementUri().resolve("health/ready"))
        .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());

    assertEquals(200, ready.statusCode(), ready.body());
    JsonObject holdfast = StockClient.json(ready.body()).getJsonArray("checks").stream()
        .map(JsonValue::asJsonObject)
        .filter(c -> c.getString("name").equals("holdfast"))
        .findFirst().orElseThrow(() -> new AssertionError("no holdfast check: " + ready.body()));
    assertEquals("UP", holdfast.getString("status"), ready.body());
    String node = servers.redis().hostAndPort().toString();
    assertTrue(holdfast.getJsonObject("data").getString(node).startsWith("UP "), ready.body());

    HttpResponse<String> live = HTTP.send(HttpRequest.newBuilder(
            servers.a().managementUri().resolve("health/live"))
        .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
    assertTrue(!live.body().contains("\"holdfast\""), "never a liveness check: " + live.body());
  }
}
