package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.ExclusionProbe;
import dev.holdfast.testing.RedisExtension;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Local handoff on a 3-primary Redis Cluster (sharded pub/sub): two clients of 8 threads each
 * on one hot key exclude each other, both get their turns, and handoffs happen in both.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LocalHandoffClusterTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void twoClientsOnOneHotKey_excludeEachOther_andBothHandOffLocally() throws Exception {
    redis.flushAll();
    Map<String, String> config = Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", redis.clusterSetup().seedNodes(),
        "holdfast.redis.timeout", "500ms");
    List<LockClient> both = List.of(clients.create(config), clients.create(config));
    ExclusionProbe probe = new ExclusionProbe();
    int perThread = 60;
    List<AtomicLong> sections = List.of(new AtomicLong(), new AtomicLong());
    List<Future<?>> workers = new ArrayList<>();
    for (int c = 0; c < 2; c++) {
      DistributedLock lock = both.get(c).getLock("hot");
      AtomicLong mine = sections.get(c);
      for (int t = 0; t < 8; t++) {
        workers.add(threads.submit(() -> {
          for (int i = 0; i < perThread; i++) {
            lock.lock();
            try {
              probe.enter();
              mine.incrementAndGet();
              probe.exit();
            } finally {
              lock.unlock();
            }
          }
          return null;
        }));
      }
    }
    for (Future<?> w : workers) {
      w.get(50, TimeUnit.SECONDS);
    }
    assertEquals(0, probe.overlaps(), "two threads were inside at once");
    assertEquals(8L * perThread, sections.get(0).get());
    assertEquals(8L * perThread, sections.get(1).get());
    for (LockClient c : both) {
      assertTrue(Clients.engine(c).localHandoffs() > 0, "handoffs in " + c.getClientId());
    }
  }
}
