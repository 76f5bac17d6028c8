package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * On a Redis 7 cluster, holds spread over many slots cost one renewal call per node and round
 * (a script flagged to span the slots of its node), not one per slot.
 */
class ClusterRenewalBatchingTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void holdsInManySlots_renewedWithOneCallPerNodeAndRound() throws Exception {
    redis.flushAll();
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", redis.clusterSetup().seedNodes(),
        "holdfast.watchdog-timeout", RenewalCounting.WATCHDOG));
    List<DistributedLock> held = RenewalCounting.lockMany(client, 120);
    Set<Integer> slots = new HashSet<>();
    held.forEach(l -> slots.add(JedisClusterCRC16.getSlot(l.getName())));
    assertTrue(slots.size() > 100, "names spread over " + slots.size() + " slots");
    List<RedisServer> masters = redis.clusterSetup().servers();
    List<Long> calls = RenewalCounting.evalshaCallsDuringWindow(masters);
    // ~7 rounds of one call per node; one call per slot would be ~280 per node.
    for (long c : calls) {
      assertTrue(c >= 3 && c <= 12, "renewal calls per node in the window: " + calls);
    }
    for (DistributedLock lock : held) {
      assertTrue(lock.isHeldByCurrentThread(), lock.getName() + " was not kept");
      lock.unlock();
    }
  }
}
