package dev.holdfast;

import dev.holdfast.engine.EngineAccess;
import dev.holdfast.engine.LockEngine;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The entry point: a connection to one Redis deployment (standalone, Sentinel or Cluster), the
 * factory of {@link DistributedLock} handles, and the owner of the lease watchdog.
 *
 * <pre>{@code
 * try (LockClient locks = LockClient.create(Map.of("holdfast.redis.address", "redis://localhost:6379"))) {
 *   DistributedLock lock = locks.getLock("nightly-report");
 *   lock.lock();
 *   try {
 *     // one holder across every process using this Redis
 *   } finally {
 *     lock.unlock();
 *   }
 * }
 * }</pre>
 *
 * <p>Create one client per application and share it: it is thread-safe, and each client has its
 * own identity, so two clients in one JVM exclude each other like two processes do. Closing the
 * client stops lease renewals (held locks then expire within their lease), wakes and fails its
 * waiting threads and closes its connections; it is idempotent.
 */
public final class LockClient implements AutoCloseable {

  static {
    EngineAccess.install(client -> client.engine);
  }

  private final LockEngine engine;

  private LockClient(LockEngine engine) {
    this.engine = engine;
  }

  /**
   * Creates a client from {@code holdfast.*} keys (see {@link LockClientConfig} for the table);
   * an empty map means {@code redis://localhost:6379}. Unknown keys are treated as
   * {@link LockClientConfig#fromProperties(Map)} says: errors in Holdfast's namespaces, warnings
   * for other {@code holdfast.*} keys.
   *
   * @param properties {@code holdfast.*} keys and their values
   * @return a new client; close it when done
   * @throws IllegalArgumentException naming the key when a value is invalid or a key is unknown
   * @throws LockException if Redis cannot be reached, as {@link #create(LockClientConfig)} says
   */
  public static LockClient create(Map<String, String> properties) {
    return create(LockClientConfig.fromProperties(properties));
  }

  /**
   * Creates a client from a typed configuration. By default this connects and checks that Redis
   * answers, so that a wrong address or password is found now rather than at the first lock call;
   * {@link LockClientConfig.Builder#connectAtStartup(boolean)} turns the check off.
   *
   * @param config the configuration, from {@link LockClientConfig#builder()} or
   *     {@link LockClientConfig#fromProperties(Map)}
   * @return a new client; close it when done
   * @throws LockException naming the mode, the address (never a password) and the cause
   *     (connection refused, authentication failed, no answer within the timeout) if a cluster
   *     or sentinel deployment cannot be discovered or, with
   *     {@link LockClientConfig#connectAtStartup()} (the default), if the server, the master or a
   *     cluster primary does not answer {@code PING} within the configured timeout; nothing is
   *     left open then
   */
  public static LockClient create(LockClientConfig config) {
    return new LockClient(LockEngine.start(Objects.requireNonNull(config, "config")));
  }

  /**
   * A handle on the lock called {@code name}. No I/O: handles are cheap, immutable and may be
   * shared or thrown away. The Redis key is {@code holdfast.key-prefix + name}.
   *
   * @param name the lock's name, shared by every process that means the same lock
   * @return a handle on the lock
   * @throws IllegalArgumentException if the name is empty, or contains an opening brace
   *     <code>&#123;</code> but no non-empty hash tag such as {@code {tag}} (Redis Cluster
   *     places the key by its hash tag)
   */
  public DistributedLock getLock(String name) {
    return engine.lock(name);
  }

  /**
   * A handle on the lock called {@code name} whose holds carry fencing tokens. It is the same
   * lock as {@link #getLock(String)} returns for that name: both exclude each other.
   *
   * @param name the lock's name, shared by every process that means the same lock
   * @return a handle on the lock
   * @throws IllegalArgumentException if the name is empty or has a malformed hash tag
   */
  public FencedLock getFencedLock(String name) {
    return engine.fencedLock(name);
  }

  /**
   * A handle on the read-write lock called {@code name} (see {@link DistributedReadWriteLock}).
   * No I/O. Its Redis layout is Redisson's {@code RReadWriteLock}; it is not the same lock as
   * {@link #getLock(String)} of that name.
   *
   * @param name the lock's name, shared by every process that means the same lock
   * @return a handle on the lock
   * @throws IllegalArgumentException if the name is empty or has a malformed hash tag
   */
  public DistributedReadWriteLock getReadWriteLock(String name) {
    return engine.readWriteLock(name);
  }

  /**
   * A handle on the fair lock called {@code name}: like {@link #getLock(String)}, but waiters, in
   * every process, acquire in the order they started waiting. A waiter that gives up (timeout,
   * interrupt) leaves the queue at once; one whose process died loses its place after
   * {@link LockClientConfig#fairWaiterTimeout()}. Its Redis layout is Redisson's
   * {@code RFairLock}. No I/O.
   *
   * @param name the lock's name, shared by every process that means the same lock
   * @return a handle on the lock
   * @throws IllegalArgumentException if the name is empty or has a malformed hash tag
   */
  public DistributedLock getFairLock(String name) {
    return engine.fairLock(name);
  }

  /**
   * A lock that holds all of {@code locks} or none of them: acquiring it acquires each (in a
   * fixed order, so two multi-locks over the same locks never deadlock), and an acquisition that
   * fails releases the ones it took. The locks may come from different clients and Redis
   * deployments. No I/O.
   *
   * @param locks at least one lock, none null, no name twice
   * @return a lock over all of them
   * @throws IllegalArgumentException if {@code locks} is empty or holds a lock twice
   */
  public DistributedLock getMultiLock(DistributedLock... locks) {
    return engine.multiLock(locks);
  }

  /**
   * A lock over locks on independent Redis servers, held when a majority of them is acquired
   * (the Redlock algorithm). See the README's RedLock section for what it does and does not
   * protect against. No I/O.
   *
   * @param locks the same lock name on each independent server (at least three recommended)
   * @return a lock held by a majority of them
   * @throws IllegalArgumentException if {@code locks} is empty or holds a lock twice
   */
  public DistributedLock getRedLock(DistributedLock... locks) {
    return engine.redLock(locks);
  }

  /**
   * Runs {@code action} while holding the lock called {@code name} and returns its result. The
   * lock is released after the action returns and after it throws; the action's exception
   * propagates unchanged (a failing release is then added to it as suppressed).
   *
   * @param name the lock's name
   * @param waitTime how long to wait for the lock; {@code null} waits as long as it takes
   * @param leaseTime the lease; {@code null} uses the watchdog (renewed until the action ends)
   * @param action what to run while holding the lock
   * @param <T> the action's result type
   * @return what the action returned
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}, or the
   *     thread was interrupted while waiting (its interrupt flag is then set again)
   */
  public <T> T executeInLock(String name, Duration waitTime, Duration leaseTime,
      Supplier<T> action) {
    return engine.executeInLock(getLock(name), waitTime, leaseTime, action);
  }

  /**
   * Runs {@code action} while holding the lock called {@code name}, as
   * {@link #executeInLock(String, Duration, Duration, Supplier)} does.
   *
   * @param name the lock's name
   * @param waitTime how long to wait for the lock; {@code null} waits as long as it takes
   * @param leaseTime the lease; {@code null} uses the watchdog
   * @param action what to run while holding the lock
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}
   */
  public void executeInLock(String name, Duration waitTime, Duration leaseTime, Runnable action) {
    Objects.requireNonNull(action, "action");
    engine.executeInLock(getLock(name), waitTime, leaseTime, () -> {
      action.run();
      return null;
    });
  }

  /**
   * Runs {@code action} while holding {@code lock} (any lock of this library: read, write, fair,
   * multi…), as {@link #executeInLock(String, Duration, Duration, Supplier)} does.
   *
   * @param lock the lock to hold
   * @param waitTime how long to wait for the lock; {@code null} waits as long as it takes
   * @param leaseTime the lease; {@code null} uses the watchdog
   * @param action what to run while holding the lock
   * @param <T> the action's result type
   * @return what the action returned
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}
   */
  public <T> T executeInLock(DistributedLock lock, Duration waitTime, Duration leaseTime,
      Supplier<T> action) {
    return engine.executeInLock(lock, waitTime, leaseTime, action);
  }

  /**
   * Runs {@code action} while holding {@code lock}, as
   * {@link #executeInLock(String, Duration, Duration, Supplier)} does.
   *
   * @param lock the lock to hold
   * @param waitTime how long to wait for the lock; {@code null} waits as long as it takes
   * @param leaseTime the lease; {@code null} uses the watchdog
   * @param action what to run while holding the lock
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}
   */
  public void executeInLock(DistributedLock lock, Duration waitTime, Duration leaseTime,
      Runnable action) {
    Objects.requireNonNull(action, "action");
    engine.executeInLock(lock, waitTime, leaseTime, () -> {
      action.run();
      return null;
    });
  }

  /**
   * Registers a listener told when a lock held by this client is lost (see {@link LockLost}):
   * once per lost hold. Listeners run on the client's own event thread, one event at a time in
   * the order the losses were found, never on the thread that renews leases: a slow listener
   * delays only later events. A listener that throws is logged and does not affect others.
   *
   * @param listener called once per lost hold
   * @return a registration whose {@link Registration#close()} removes the listener
   */
  public Registration onLockLost(Consumer<? super LockLost> listener) {
    Runnable remove = engine.addLockLostListener(listener);
    return remove::run;
  }

  /**
   * {@return this client's identity, the first half of its hash fields
   * {@code <clientId>:<threadId>}}
   */
  public String getClientId() {
    return engine.clientId();
  }

  /**
   * Stops renewals, wakes waiting threads (they fail with {@link IllegalStateException}) and
   * closes connections. Locks still held are not released: they expire within their lease.
   */
  @Override
  public void close() {
    engine.close();
  }

  /** A listener registration; closing it twice is harmless. */
  @FunctionalInterface
  public interface Registration extends AutoCloseable {
    @Override
    void close();
  }
}
