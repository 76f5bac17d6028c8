package dev.holdfast.engine;

import dev.holdfast.testing.RedisExtension;
import java.util.Map;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** {@link LockContractTest} on a 3-master, 3-replica Cluster. */
class ClusterLockContractTest extends LockContractTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 1);

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
    try (Jedis jedis = redis.clusterSetup().masterForKey(key).admin()) {
      jedis.del(key);
    }
  }
}
