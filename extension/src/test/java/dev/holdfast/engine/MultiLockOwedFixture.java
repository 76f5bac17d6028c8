package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.RedisExtension;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
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

  /**
   * {@code lock} behind a {@link DistributedLock} proxy that runs {@code before} (if set) before
   * each acquisition call and {@code after} (if set) after each one that acquired.
   */
  static DistributedLock hook(DistributedLock lock, AtomicReference<Runnable> before,
      AtomicReference<Runnable> after) {
    Set<String> acquiring = Set.of("lock", "lockInterruptibly", "tryLock");
    return (DistributedLock) Proxy.newProxyInstance(DistributedLock.class.getClassLoader(),
        new Class<?>[] {DistributedLock.class}, (self, method, args) -> {
          if (method.getDeclaringClass() == Object.class) {
            return switch (method.getName()) {
              case "equals" -> self == args[0];
              case "hashCode" -> System.identityHashCode(self);
              default -> "hook[" + lock + "]";
            };
          }
          boolean acquires = acquiring.contains(method.getName());
          if (acquires && before != null && before.get() != null) {
            before.get().run();
          }
          Object result;
          try {
            result = method.invoke(lock, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
          if (acquires && after != null && after.get() != null
              && (result == null || Boolean.TRUE.equals(result))) {
            after.get().run();
          }
          return result;
        });
  }
}
