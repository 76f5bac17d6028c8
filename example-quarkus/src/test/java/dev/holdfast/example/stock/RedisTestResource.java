package dev.holdfast.example.stock;

import dev.holdfast.testing.RedisServer;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import java.util.Map;

/** A real redis-server from the Holdfast harness for the {@code @QuarkusTest}s. */
public class RedisTestResource implements QuarkusTestResourceLifecycleManager {
  private RedisServer redis;

  @Override
  public Map<String, String> start() {
    redis = RedisServer.start();
    return Map.of("holdfast.redis.address", redis.uri());
  }

  @Override
  public void stop() {
    if (redis != null) {
      redis.close();
    }
  }
}
