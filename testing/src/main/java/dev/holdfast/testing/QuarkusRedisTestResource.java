package dev.holdfast.testing;

import java.util.Locale;
import java.util.Map;

import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;

/**
 * A Quarkus test resource giving {@code @QuarkusTest}s a real Redis from this harness, and
 * Holdfast's configuration for it ({@link RedisExtension#config()}):
 *
 * <pre>{@code
 * @QuarkusTest
 * @QuarkusTestResource(QuarkusRedisTestResource.class)
 * class InventoryTest { ... }
 *
 * @QuarkusTestResource(value = QuarkusRedisTestResource.class, initArgs = {
 *     @ResourceArg(name = "topology", value = "sentinel"),
 *     @ResourceArg(name = "backend", value = "local") })
 * }</pre>
 *
 * <p>Init args: {@code topology} — {@code standalone} (default), {@code replicated} (one
 * replica), {@code sentinel} or {@code cluster} (3 masters, 1 replica each); {@code backend} —
 * as {@value RedisBackend#PROPERTY} (default: {@link RedisBackend#selected()}).
 *
 * <p>Needs {@code io.quarkus:quarkus-test-common} (every Quarkus test has it); the rest of this
 * module does not.
 */
public class QuarkusRedisTestResource implements QuarkusTestResourceLifecycleManager {

  private RedisExtension redis = RedisExtension.standalone();

  @Override
  public void init(Map<String, String> initArgs) {
    String topology = initArgs.getOrDefault("topology", "standalone").toLowerCase(Locale.ROOT);
    RedisExtension chosen = switch (topology) {
      case "standalone" -> RedisExtension.standalone();
      case "replicated" -> RedisExtension.replicated(1);
      case "sentinel" -> RedisExtension.sentinel();
      case "cluster" -> RedisExtension.cluster();
      default -> throw new IllegalArgumentException("Invalid QuarkusRedisTestResource topology: '"
          + topology + "' (expected standalone, replicated, sentinel or cluster)");
    };
    String backend = initArgs.get("backend");
    redis = backend == null ? chosen : chosen.withBackend(RedisBackend.parse(backend));
  }

  /** Starts Redis; returns Holdfast's configuration for it, which Quarkus adds to the test's. */
  @Override
  public Map<String, String> start() {
    redis.startDetached();
    return redis.config();
  }

  /** Kills every server started. */
  @Override
  public void stop() {
    try {
      redis.closeDetached();
    } catch (Exception e) {
      throw new IllegalStateException("Cannot stop Redis", e);
    }
  }

  /** The running topology, e.g. for a subclass injecting faults. */
  protected RedisExtension redis() {
    return redis;
  }
}
