package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.FencedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** Fencing tokens: assigned with the grant, the same for a hold's re-entries, and only growing. */
class FencedLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private Map<String, String> config;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "2s");
  }

  @Test
  void reentry_returnsTheSameToken_andUnlockEndsIt() {
    FencedLock lock = clients.create(config).getFencedLock("fenced");
    assertNull(lock.getToken(), "no hold, no token");
    Long token = lock.lockAndGetToken();
    assertNotNull(token);
    assertEquals(token, lock.lockAndGetToken(2, TimeUnit.SECONDS), "a re-entry keeps the token");
    assertEquals(token, lock.getToken());
    lock.unlock();
    assertEquals(token, lock.getToken(), "still held once");
    lock.unlock();
    assertNull(lock.getToken());
    assertTrue(lock.lockAndGetToken() > token, "a new hold gets a larger token");
    lock.unlock();
  }

  @Test
  void tryLockAndGetToken_returnsNullWhenNotAcquired() throws Exception {
    clients.create(config).getLock("busy").lock(10, TimeUnit.SECONDS);
    FencedLock lock = clients.create(config).getFencedLock("busy");
    assertNull(lock.tryLockAndGetToken());
    assertNull(lock.tryLockAndGetToken(50, TimeUnit.MILLISECONDS));
    assertNull(lock.tryLockAndGetToken(50, 1_000, TimeUnit.MILLISECONDS));
    assertNull(lock.getToken());
  }

  @Test
  void plainAndFencedHandles_areTheSameLock() {
    LockClient client = clients.create(config);
    client.getLock("same").lock();
    FencedLock other = clients.create(config).getFencedLock("same");
    assertNull(other.tryLockAndGetToken(), "a plain hold excludes a fenced one");
    FencedLock fenced = client.getFencedLock("same");
    Long token = fenced.lockAndGetToken(); // re-entry through the fenced handle
    assertNotNull(token, "a fenced re-entry of a plain hold assigns a token");
    fenced.unlock();
    client.getLock("same").unlock();
  }

  @Test
  void plainHandleCastToFencedLock_refusesBeforeAcquiring() {
    LockClient client = clients.create(config);
    FencedLock cast = (FencedLock) client.getLock("cast");
    assertThrows(UnsupportedOperationException.class, cast::lockAndGetToken);
    assertThrows(UnsupportedOperationException.class, cast::tryLockAndGetToken);
    assertFalse(cast.isLocked(), "nothing was acquired");
  }

  @Test
  void tokens_strictlyIncrease_acrossClientsAndThreads() throws Exception {
    List<LockClient> lockClients = List.of(clients.create(config), clients.create(config),
        clients.create(config));
    ConcurrentLinkedQueue<Long> granted = new ConcurrentLinkedQueue<>();
    ExecutorService threads = Executors.newFixedThreadPool(6);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < 6; t++) {
        FencedLock lock = lockClients.get(t % 3).getFencedLock("counter");
        done.add(threads.submit(() -> {
          for (int i = 0; i < 400; i++) {
            long token = lock.lockAndGetToken();
            try {
              granted.add(token); // in grant order: the lock serialises the adds
            } finally {
              lock.unlock();
            }
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      threads.shutdownNow();
    }
    List<Long> inOrder = new ArrayList<>(granted);
    assertEquals(2_400, inOrder.size());
    for (int i = 1; i < inOrder.size(); i++) {
      assertTrue(inOrder.get(i) > inOrder.get(i - 1),
          "token " + i + " (" + inOrder.get(i) + ") after " + inOrder.get(i - 1));
    }
  }

  @Test
  void tokens_keepGrowing_afterExpiryClientRestartScriptFlushAndRedisRestart() {
    List<Long> tokens = new ArrayList<>();
    LockClient first = clients.create(config);
    FencedLock lock = first.getFencedLock("survivor");
    tokens.add(lock.lockAndGetToken(100, TimeUnit.MILLISECONDS));
    Await.until(Duration.ofSeconds(5), () -> !lock.isLocked(), "lease expiry");
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "the expired section");
    tokens.add(lock.lockAndGetToken());
    lock.unlock();
    first.close();
    FencedLock again = clients.create(config).getFencedLock("survivor");
    tokens.add(again.lockAndGetToken());
    again.unlock();
    try (Jedis jedis = redis.server().admin()) {
      jedis.scriptFlush();
    }
    tokens.add(again.lockAndGetToken());
    again.unlock();
    redis.server().restart(); // no persistence: every key, the token key included, is gone
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(0, jedis.dbSize());
    }
    LockClient afterRestart = clients.create(config);
    FencedLock last = afterRestart.getFencedLock("survivor");
    tokens.add(last.lockAndGetToken());
    last.unlock();
    for (int i = 1; i < tokens.size(); i++) {
      assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens " + tokens);
    }
  }

  @Test
  void tokenKey_isOnePerName_andExpires() {
    FencedLock lock = clients.create(config).getFencedLock("{tagged}:a");
    lock.lockAndGetToken();
    lock.unlock();
    try (Jedis jedis = redis.server().admin()) {
      String tokenKey = "holdfast_fence:{tagged}:a";
      assertTrue(jedis.exists(tokenKey), jedis.keys("*").toString());
      long ttl = jedis.pttl(tokenKey);
      assertTrue(ttl > 0 && ttl <= TimeUnit.HOURS.toMillis(1) + 2_000, "token key TTL " + ttl);
      assertEquals(1, jedis.keys("*fence*").size());
    }
  }

  @Test
  void fencingToken_current_outsideAFencedCall_fails() throws Exception {
    assertThrows(IllegalStateException.class, FencingToken::current);
    long seen = FencingToken.callWith(42, () -> FencingToken.callWith(43, FencingToken::current)
        + FencingToken.current());
    assertEquals(85, seen, "nested calls see their own token, then the caller's again");
    assertThrows(IllegalStateException.class, FencingToken::current);
  }
}
