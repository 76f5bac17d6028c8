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
    return foreign(lock, "hook", (method, proceed) -> {
      boolean acquires = acquiring.contains(method);
      if (acquires && before != null && before.get() != null) {
        before.get().run();
      }
      Object result = proceed.call();
      if (acquires && after != null && after.get() != null
          && (result == null || Boolean.TRUE.equals(result))) {
        after.get().run();
      }
      return result;
    });
  }

  /** A call on the wrapped lock, as a {@link #foreign} proxy's {@link Around} makes it. */
  interface Proceed {
    Object call() throws Throwable;
  }

  /** What a {@link #foreign} proxy does with a call of {@code method} on its lock. */
  interface Around {
    Object call(String method, Proceed proceed) throws Throwable;
  }

  /**
   * {@code lock} as a lock of another implementation (a proxy, not a {@code RedisLock}), each
   * {@link DistributedLock} call going through {@code around}; {@code label} names it.
   */
  static DistributedLock foreign(DistributedLock lock, String label, Around around) {
    return (DistributedLock) Proxy.newProxyInstance(DistributedLock.class.getClassLoader(),
        new Class<?>[] {DistributedLock.class}, (self, method, args) -> {
          if (method.getDeclaringClass() == Object.class) {
            return switch (method.getName()) {
              case "equals" -> self == args[0];
              case "hashCode" -> System.identityHashCode(self);
              default -> label + "[" + lock + "]";
            };
          }
          return around.call(method.getName(), () -> {
            try {
              return method.invoke(lock, args);
            } catch (InvocationTargetException e) {
              throw e.getCause();
            }
          });
        });
  }

  /** {@return the outcome of unlocking {@code lock} with B's link a black hole} */
  RuntimeException unlockWithBDark(DistributedLock lock) {
    proxy.blackHole(true);
    try {
      return unlockOutcome(lock);
    } finally {
      proxy.blackHole(false);
    }
  }

  /** Takes {@code multi} twice, then fails its inner unlock on B ({@link #failUnlockOnB}). */
  void takeTwiceThenFailUnlock(DistributedLock multi) {
    multi.lock();
    multi.lock();
    failUnlockOnB(multi);
  }

  /** Unlocks {@code lock} with B's link a black hole: B's release gets no answer. */
  void failUnlockOnB(DistributedLock lock) {
    proxy.blackHole(true);
    try {
      assertFailed(lock);
    } finally {
      proxy.blackHole(false);
    }
  }

  /**
   * Multi-lock [a{suffix}, b{suffix}, hook z{suffix}] taken twice; the inner unlock fails on B
   * (its release never ran: count 2, pending); then taken a third time with {@code fault} armed
   * right after the acquisition's last member, so that finishOwed's give-back of B fails and
   * stays owed on B's hold. The link is restored before returning.
   */
  DistributedLock relockWithFailingFinish(String suffix, Runnable fault) {
    AtomicReference<Runnable> afterAcquire = new AtomicReference<>();
    DistributedLock hook = hook(a.getLock("z" + suffix), null, afterAcquire);
    DistributedLock multi = a.getMultiLock(a.getLock("a" + suffix), b.getLock("b" + suffix),
        hook);
    takeTwiceThenFailUnlock(multi); // A 1, hook 1; B 2 with its release pending (never ran)
    afterAcquire.set(fault);
    multi.lock();
    afterAcquire.set(null);
    proxy.blackHole(false);
    return multi;
  }
}
