package dev.holdfast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.RedisBackend;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisSentinelSetup;
import dev.holdfast.testing.RedisServer;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Sentinel on holdfast-testing's Testcontainers backend (master, replica, three sentinels, each a
 * container): the lock carries on across a failover. Enabled as {@link TestcontainersBackendTest}.
 */
@EnabledIf("dev.holdfast.TestcontainersBackendTest#dockerWithImage")
class TestcontainersSentinelTest {

  @RegisterExtension
  static final RedisExtension sentinel =
      RedisExtension.sentinel().withBackend(RedisBackend.TESTCONTAINERS);

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void failover_promotesTheReplica_andLockingCarriesOn(Map<String, String> config,
      RedisSentinelSetup setup) throws Exception {
    try (LockClient client = LockClient.create(config)) {
      DistributedLock lock = client.getLock("tc-failover");
      lock.lock();
      lock.unlock();
      RedisServer oldMaster = setup.master();
      assertEquals(RedisBackend.TESTCONTAINERS, oldMaster.backend());
      setup.failover();
      assertNotEquals(oldMaster.port(), setup.currentMaster().getPort());
      assertTrue(threads.submit(() -> {
        boolean got = lock.tryLock(15, TimeUnit.SECONDS);
        lock.unlock();
        return got;
      }).get(30, TimeUnit.SECONDS));
    }
  }
}
