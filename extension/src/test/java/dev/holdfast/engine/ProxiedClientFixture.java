package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The fixture of the attacks that fault one client's traffic: one standalone server, emptied
 * before each test; clients {@link #a} and {@link #rival} talk to it directly, and {@link
 * #viaProxy} makes clients that talk to it through {@link #proxy}.
 */
abstract class ProxiedClientFixture {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  FaultProxy proxy;
  RedisProbe redisState;
  LockClient a;
  LockClient rival;

  @BeforeEach
  void startProxyAndDirectClients() throws Exception {
    redis.flushAll();
    redisState = new RedisProbe(redis.server());
    proxy = new FaultProxy(redis.server().port());
    a = direct();
    rival = direct();
  }

  @AfterEach
  void closeProxy() {
    proxy.close();
  }

  /** A new client that talks to the server directly. */
  LockClient direct() {
    return clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
  }

  /**
   * A new client through {@link #proxy} with the given timeout and watchdog timeout, its scripts
   * loaded (a NOSCRIPT held back by the proxy would mean a call that never ran).
   */
  LockClient viaProxy(String timeout, String watchdog) {
    LockClient client = null;
    for (int attempt = 1; client == null; attempt++) {
      try {
        client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
            LockClientConfig.TIMEOUT, timeout, LockClientConfig.WATCHDOG_TIMEOUT, watchdog));
      } catch (LockException e) {
        if (attempt == 5) {
          throw e; // a loaded machine may miss one short handshake, not five
        }
      }
    }
    DistributedLock warm = client.getLock("warm");
    warm.lock();
    warm.lock();
    warm.unlock();
    warm.unlock();
    return client;
  }

  /**
   * An unlock() of {@code lock} whose requests the proxy holds back: it throws {@link
   * LockException} (returned); the held requests are then delivered (late).
   */
  LockException unlockUnanswered(DistributedLock lock) {
    LockException failed;
    proxy.blackHole(true);
    try {
      failed = assertThrows(LockException.class, lock::unlock, "unlock() through a black hole");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "the held requests delivered");
    return failed;
  }

  /** {@return the hold count {@code owner} has in the hash {@code key}, or null} */
  String count(String key, LockClient owner) {
    return redisState.hget(key, RedisProbe.fieldOf(owner));
  }

  /** Returns once none of {@code keys} exists. */
  void awaitFree(String... keys) {
    Await.until(Duration.ofSeconds(20), () -> {
      for (String k : keys) {
        if (redisState.exists(k)) {
          return false;
        }
      }
      return true;
    }, "nothing left held");
  }

  /**
   * Another thread of this client takes {@code lock} as a {@link LockHold} with a fixed lease
   * (120 s: no renewal notices anything during a probe), waiting up to a minute.
   */
  static CompletableFuture<LockHold> take(DistributedLock lock, String thread) {
    CompletableFuture<LockHold> taken = new CompletableFuture<>();
    new Thread(() -> {
      try {
        taken.complete(lock.acquire(Duration.ofSeconds(60), Duration.ofSeconds(120)));
      } catch (Throwable e) {
        taken.completeExceptionally(e);
      }
    }, thread).start();
    return taken;
  }
}
