package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisServer;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link LockEngine#ping()} on a standalone server (Sentinel and Cluster: their lock tests). */
class PingTest {

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void ping_reportsTheServer_upThenDownWithTheError_thenUpAgain() {
    try (RedisServer redis = RedisServer.start()) {
      LockClient client = clients.create(Map.of("holdfast.redis.address", redis.uri(),
          "holdfast.redis.timeout", "300ms"));
      LockEngine engine = Clients.engine(client);
      String node = redis.hostAndPort().toString();

      List<NodeStatus> up = engine.ping();
      assertEquals(1, up.size());
      assertEquals(node, up.get(0).node());
      assertEquals("standalone", up.get(0).role());
      assertTrue(up.get(0).up(), () -> "" + up);
      assertTrue(up.get(0).millis() > 0);

      redis.kill();
      NodeStatus down = engine.ping().get(0);
      assertFalse(down.up());
      assertEquals(node, down.node());
      assertTrue(down.error() != null && !down.error().isBlank(), () -> "" + down);

      redis.restart();
      assertTrue(engine.ping().get(0).up(), "a broken pooled connection is replaced");
    }
  }

  @Test
  void ping_refusedCredentials_areDownWithoutTheSecret() {
    try (RedisServer redis = RedisServer.start()) {
      LockClient client = clients.create(Map.of("holdfast.redis.address",
          "redis://app:s3cret@" + redis.host() + ":" + redis.port(),
          "holdfast.redis.connect-at-startup", "false"));
      NodeStatus down = Clients.engine(client).ping().get(0);
      assertFalse(down.up());
      assertEquals(redis.hostAndPort().toString(), down.node());
      assertFalse(down.toString().contains("s3cret"), () -> "no secret in " + down);
    }
  }
}
