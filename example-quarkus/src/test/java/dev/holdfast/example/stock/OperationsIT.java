package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The packaged application's readiness through a Redis outage: {@code /q/health/ready} is UP,
 * turns DOWN (503) naming the Redis node while Redis is stopped, and UP again once it is back;
 * liveness stays UP throughout, so an orchestrator takes the instance out of rotation instead of
 * restarting it.
 */
class OperationsIT {
  private static final HttpClient HTTP = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  private static RedisServer redis;
  private static List<AppInstance> instances = List.of();

  @BeforeAll
  static void startRedisAndAnInstance() {
    redis = RedisServer.start();
    Path jar = Path.of(System.getProperty("app.jar", "target/quarkus-app/quarkus-run.jar"));
    instances = AppInstance.startAll(1, jar, redis.uri(), Path.of("target", "it-logs-ops"),
        Duration.ofSeconds(60));
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
  void readiness_followsRedis_andLivenessDoesNot() throws Exception {
    URI app = instances.get(0).uri();
    String node = redis.hostAndPort().toString();

    HttpResponse<String> up = get(app, "/q/health/ready");
    assertEquals(200, up.statusCode(), up.body());
    assertTrue(up.body().contains("\"holdfast\""), up.body());

    redis.kill();
    HttpResponse<String> down = get(app, "/q/health/ready");
    assertEquals(503, down.statusCode(), down.body());
    assertTrue(down.body().contains("\"" + node + "\": \"DOWN: ")
        || down.body().contains("\"" + node + "\":\"DOWN: "), down.body());
    assertEquals(200, get(app, "/q/health/live").statusCode(), "a Redis outage is not fatal");

    redis.restart();
    Await.until(Duration.ofSeconds(20), () -> get(app, "/q/health/ready").statusCode() == 200,
        "ready again once Redis is back");
  }

  private static HttpResponse<String> get(URI app, String path) {
    try {
      return HTTP.send(HttpRequest.newBuilder(app.resolve(path)).timeout(Duration.ofSeconds(10))
          .build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new AssertionError("GET " + path, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }
}
