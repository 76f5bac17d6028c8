package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.RedisExtension;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The fixture of the attacks on a failed multi-lock unlock's record: client {@link #a} talks to
 * Redis directly, client {@link #b} through a {@link BlackHoleProxy} (200 ms timeout, scripts
 * loaded), so that B's member release fails while A's succeeds; {@link #rival} is a third client,
 * direct.
 */
abstract class MultiLockOwedFixture {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  BlackHoleProxy proxy;
  RedisProbe redisState;
  LockClient a;
  LockClient b;
  LockClient rival;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    redisState = new RedisProbe(redis.server());
    proxy = new BlackHoleProxy(redis.server().port());
    a = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    b = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    rival = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    warmUp(b.getLock("warm"));
  }

  @AfterEach
  void tearDown() {
    proxy.close();
  }

  static void assertFailed(DistributedLock multi) {
    RuntimeException e = unlockOutcome(multi);
    assertTrue(e instanceof LockException, "B's member got no answer: " + e);
  }

  static RuntimeException unlockOutcome(DistributedLock lock) {
    try {
      lock.unlock();
      return null;
    } catch (RuntimeException e) {
      return e;
    }
  }

  /** Loads the scripts through the proxy: a held NOSCRIPT reply would mean nothing ran. */
  static void warmUp(DistributedLock lock) {
    lock.lock();
    lock.unlock();
  }
}
