package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockAtRisk;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisRedirectionException;

/**
 * Issue 17, part 3, on a cluster, whose holds are renewed in one batch per node: a master that
 * stops answering for less than the lease puts exactly its holds at risk, each once, and each
 * recovers; the other masters' holds are never at risk.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ClusterLockAtRiskTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void pausedMaster_putsItsHoldsAtRisk_thenTheyRecover() {
    redis.flushAll();
    // Renewals every 800 ms; the pause ends once its holds are at risk (about 1.4 s), before
    // the other masters could declare the paused one failed (cluster-node-timeout 2 s).
    LockClient client = clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", redis.clusterSetup().seedNodes(),
        "holdfast.watchdog-timeout", "2400ms", "holdfast.redis.timeout", "200ms"));
    LockAtRiskTest.Reports reports = LockAtRiskTest.Reports.on(client);
    List<DistributedLock> held = RenewalCounting.lockMany(client, 30);
    RedisServer paused = redis.clusterSetup().servers().get(0);
    Set<String> onPaused = servedBy(paused, held);
    assertFalse(onPaused.isEmpty() || onPaused.size() == held.size(), "setup: " + onPaused);

    paused.pause();
    try {
      Await.until(Duration.ofSeconds(10), () -> named(reports, LockAtRisk.class).containsAll(onPaused),
          "every hold on the paused master at risk; so far " + reports);
    } finally {
      paused.resume();
    }
    Await.until(Duration.ofSeconds(10), () -> named(reports, LockRecovered.class).containsAll(onPaused),
        "every one recovered; so far " + reports);
    assertEquals(onPaused, named(reports, LockAtRisk.class), "only the paused master's holds were at risk");
    assertEquals(onPaused.size(), reports.heard.stream()
        .filter(h -> h.event() instanceof LockAtRisk).count(), "once each: " + reports);
    assertTrue(reports.heard.stream().noneMatch(h -> h.event() instanceof LockLost),
        reports::toString);
    for (DistributedLock lock : held) {
      assertTrue(lock.isHeldByCurrentThread(), lock.getName());
      lock.unlock();
    }
  }

  static Set<String> servedBy(RedisServer server, List<DistributedLock> held) {
    Set<String> names = new HashSet<>();
    try (Jedis admin = server.admin()) {
      for (DistributedLock lock : held) {
        try {
          if (admin.exists(lock.getName())) {
            names.add(lock.getName());
          }
        } catch (JedisRedirectionException elsewhere) {
          // served by another master
        }
      }
    }
    return names;
  }

  /** The locks named by the reports of {@code type} so far. */
  static Set<String> named(LockAtRiskTest.Reports reports, Class<?> type) {
    Set<String> names = new HashSet<>();
    reports.heard.forEach(h -> {
      if (h.event() instanceof LockAtRisk r && type == LockAtRisk.class) {
        names.add(r.lockName());
      } else if (h.event() instanceof LockRecovered r && type == LockRecovered.class) {
        names.add(r.lockName());
      }
    });
    return names;
  }
}
