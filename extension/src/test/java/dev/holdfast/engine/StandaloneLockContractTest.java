package dev.holdfast.engine;

import dev.holdfast.testing.RedisExtension;
import java.util.Map;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** {@link LockContractTest} on one redis-server. */
class StandaloneLockContractTest extends LockContractTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @Override
  Map<String, String> config() {
    return redis.config();
  }

  @Override
  void flushAll() {
    redis.flushAll();
  }

  @Override
  void deleteKey(String key) {
    try (Jedis jedis = redis.server().admin()) {
      jedis.del(key);
    }
  }
}
