package dev.holdfast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.RedisBackend;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.testcontainers.DockerClientFactory;

/**
 * The lock contract on holdfast-testing's Testcontainers backend: every server a container (host
 * network, 127.0.0.1), faults by Docker (kill = forced removal, pause = cgroup freezer).
 *
 * <p>Skipped when there is no Docker engine or the image ({@code -Dholdfast.testing.image}, built
 * by {@code .ci/docker-setup}) is not there; never skipped when {@code .ci/run} set
 * {@code HOLDFAST_TESTCONTAINERS_REQUIRED=true} after setting Docker up.
 */
@EnabledIf("dockerWithImage")
class TestcontainersBackendTest {

  @RegisterExtension
  static final RedisExtension redis =
      RedisExtension.standalone().withBackend(RedisBackend.TESTCONTAINERS);

  private final List<LockClient> clients = new ArrayList<>();
  private final ExecutorService threads = Executors.newCachedThreadPool();

  static boolean dockerWithImage() {
    if (Boolean.parseBoolean(System.getenv("HOLDFAST_TESTCONTAINERS_REQUIRED"))) {
      return true; // fail loudly instead of skipping
    }
    try {
      // Anything that goes wrong here (no engine, no image, an image Testcontainers wants to
      // pull and cannot) means: no usable Docker on this machine, so skip.
      return RedisBackend.isDockerAvailable() && DockerClientFactory.instance().client()
          .inspectImageCmd(RedisBackend.image()).exec() != null;
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
  }

  @AfterEach
  void closeClients() {
    threads.shutdownNow();
    clients.forEach(LockClient::close);
  }

  private LockClient client(Map<String, String> config) {
    Map<String, String> withTimeout = new HashMap<>(config);
    withTimeout.put("holdfast.redis.timeout", "500ms");
    LockClient client = LockClient.create(withTimeout);
    clients.add(client);
    return client;
  }

  @Test
  void server_isAContainerOnLoopback(RedisServer server) {
    assertEquals(RedisBackend.TESTCONTAINERS, server.backend());
    assertEquals("127.0.0.1", server.host());
    assertEquals(Long.toString(server.pid()),
        server.withAdmin(jedis -> jedis.info("server")).lines()
            .filter(line -> line.startsWith("process_id:")).findFirst().orElseThrow()
            .substring("process_id:".length()).trim());
  }

  @Test
  void lock_excludesAnotherClient_untilUnlocked(Map<String, String> config) throws Exception {
    DistributedLock mine = client(config).getLock("tc-exclusion");
    DistributedLock theirs = client(config).getLock("tc-exclusion");
    mine.lock();
    assertTrue(mine.isHeldByCurrentThread());
    assertFalse(threads.submit(() -> theirs.tryLock()).get());
    mine.unlock();
    assertTrue(threads.submit(() -> {
      boolean got = theirs.tryLock();
      theirs.unlock();
      return got;
    }).get());
  }

  @Test
  void unlock_wakesAWaiterOfAnotherClient(Map<String, String> config) throws Exception {
    DistributedLock holder = client(config).getLock("tc-waiter");
    DistributedLock waiting = client(config).getLock("tc-waiter");
    holder.lock(); // 30 s watchdog lease: only the unlock message can wake the waiter soon
    Future<Long> woken = threads.submit(() -> {
      assertTrue(waiting.tryLock(20, TimeUnit.SECONDS));
      long at = System.nanoTime();
      waiting.unlock();
      return at;
    });
    Thread.sleep(300); // let the waiter subscribe and park
    long unlockedAt = System.nanoTime();
    holder.unlock();
    long tookMillis = (woken.get(20, TimeUnit.SECONDS) - unlockedAt) / 1_000_000;
    assertTrue(tookMillis < 5_000, "woken by the unlock message, not by lease expiry: " + tookMillis);
  }

  @Test
  void killAndRestart_losesTheLock_andANewHolderAcquires(Map<String, String> config,
      RedisServer server) throws Exception {
    DistributedLock first = client(config).getLock("tc-restart");
    DistributedLock second = client(config).getLock("tc-restart");
    first.lock();
    long pidBefore = server.pid();
    server.kill();
    assertFalse(server.isRunning());
    server.restart(); // no persistence: the key is gone
    assertNotEquals(pidBefore, server.pid());
    assertTrue(threads.submit(() -> {
      boolean got = second.tryLock(10, TimeUnit.SECONDS);
      second.unlock();
      return got;
    }).get());
  }

  @Test
  void pause_blocksAcquisition_untilResumed(Map<String, String> config, RedisServer server)
      throws Exception {
    DistributedLock lock = client(config).getLock("tc-pause");
    server.pause();
    try {
      assertTrue(server.isPaused());
      Future<Boolean> acquiring = threads.submit(() -> {
        try {
          return lock.tryLock(100, TimeUnit.MILLISECONDS);
        } catch (LockException e) {
          return false; // the timeout surfaced as a Redis failure
        }
      });
      assertFalse(acquiring.get(10, TimeUnit.SECONDS), "a frozen Redis grants nothing");
    } finally {
      server.resume();
    }
    assertTrue(threads.submit(() -> {
      boolean got = lock.tryLock(10, TimeUnit.SECONDS);
      lock.unlock();
      return got;
    }).get());
  }
}
