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
   * A lock that holds all of {@code locks} or none of them. The locks may be of any kind and come
   * from different clients and Redis deployments. No I/O.
   *
   * <pre>{@code
   * DistributedLock both = locks.getMultiLock(locks.getLock("account:1"), locks.getLock("account:2"));
   * both.lock();
   * try {
   *   transfer(1, 2);
   * } finally {
   *   both.unlock();
   * }
   * }</pre>
   *
   * <ul>
   *   <li><b>Acquiring</b> takes every lock on the calling thread. A lock that stays busy makes
   *       the acquisition release every lock it took, wait for that one first (holding nothing),
   *       and try the rest again within the remaining wait; other locks are waited for only
   *       briefly while some are held. So two multi-locks over the same locks, taken in any order
   *       by any threads or processes, never deadlock, and a {@code tryLock} that fails or an
   *       acquisition that throws holds none of them.</li>
   *   <li><b>Leases:</b> a lease argument is passed to each lock and counts from when that lock
   *       was acquired; without one, each lock is kept by its own client's watchdog.</li>
   *   <li><b>Reentrant:</b> each acquisition re-enters every lock; each needs its own
   *       {@code unlock()}.</li>
   *   <li>{@code unlock()} releases one hold of every lock, trying each even when some fail; if
   *       some fail, it throws an {@link IllegalMonitorStateException} (they were not held by this
   *       thread: never acquired, or lost) or a {@link LockException} (Redis failed), naming them,
   *       with each lock's exception suppressed.</li>
   *   <li>{@code isLocked()}: whether <em>any</em> of the locks is held by anyone (so the
   *       multi-lock cannot be taken now); {@code isHeldByCurrentThread()} and
   *       {@code isHeldByThread}: whether the thread holds <em>all</em> of them;
   *       {@code getHoldCount()}: the smallest hold count among them;
   *       {@code remainTimeToLive()}: the shortest remaining lease ({@code -2} if one of them is
   *       not held, {@code -1} if none expires); {@code forceUnlock()}: force-unlocks each,
   *       {@code true} if any was held; {@code getName()}: {@code multi[a, b, …]};
   *       {@code newCondition()}: unsupported.</li>
   *   <li>Losses are reported per lock, by each lock's own client ({@link #onLockLost}).</li>
   *   <li>No {@link LockHold}: {@link DistributedLock#acquire acquire} and
   *       {@link DistributedLock#acquireAsync acquireAsync} throw
   *       {@link UnsupportedOperationException}; a multi-lock is held by a thread. Take a
   *       {@code LockHold} of each lock in a fixed order instead.</li>
   * </ul>
   *
   * @param locks at least one lock, none null, no lock twice
   * @return a lock over all of them
   * @throws IllegalArgumentException if {@code locks} is empty or contains null, or contains one
   *     lock twice (two handles of one client for one name are the same lock)
   */
  public DistributedLock getMultiLock(DistributedLock... locks) {
    return engine.multiLock(locks);
  }

  /**
   * A lock over the same lock on several independent Redis servers, held while a majority of them
   * is (the Redlock algorithm). Pass one {@link #getLock(String)} (or
   * {@link #getFencedLock(String)}) handle per server, each from a client of its own server; an
   * odd number, at least three, is the sensible choice. See docs/lock-kinds.md, "RedLock", for what
   * it does and does not protect against. No I/O.
   *
   * <ul>
   *   <li><b>Acquiring</b> asks every server once, on the calling thread, without waiting; a
   *       server that fails (down, timing out) is a vote lost, so set a short
   *       {@code holdfast.redis.timeout} on these clients. The round succeeds when a majority
   *       agreed and the validity is still positive: the lease (without one, the shortest
   *       watchdog timeout of the clients) minus the time the round took minus 1% of the lease
   *       plus 2 ms for clock drift. Otherwise every vote won is given back and, within the wait,
   *       the next round follows after a short random pause. When failing servers alone keep a
   *       majority out of reach for the whole wait, the call throws {@link LockException}
   *       instead of returning {@code false}.</li>
   *   <li>Without a lease each server's lock is renewed by its own client's watchdog, and the
   *       hold is believed while a majority of them is held: losing a minority does not end
   *       it.</li>
   *   <li>{@code unlock()} releases the servers whose votes the matching acquisition won (a
   *       server that refused its vote is left alone: the thread may hold that lock otherwise);
   *       it succeeds when a majority was released, and throws
   *       {@link IllegalMonitorStateException} when the thread has no acquisition of it open or
   *       a majority answered that this thread does not hold them, else
   *       {@link LockException}.</li>
   *   <li>Queries count servers: {@code isLocked()} and {@code isHeldByCurrentThread()} are true
   *       when a majority says so; {@code remainTimeToLive()} gives the value a majority has at
   *       least ({@code -2}: fewer than a majority held); {@code getHoldCount()} is the number of
   *       the thread's acquisitions open while it holds a majority, else 0; a query throws
   *       {@link LockException} when too few servers answer to tell. {@code forceUnlock()}
   *       force-unlocks every server. {@code getName()} is the shared name.</li>
   *   <li>No {@link LockHold}: {@link DistributedLock#acquire acquire} and
   *       {@link DistributedLock#acquireAsync acquireAsync} throw
   *       {@link UnsupportedOperationException}; a RedLock is held by a thread.</li>
   * </ul>
   *
   * @param locks one handle per independent server, normally with the same name
   * @return a lock held by a majority of them
   * @throws IllegalArgumentException if {@code locks} is empty, contains null, contains one lock
   *     twice (it would vote twice), or contains a lock not from {@link #getLock(String)} or
   *     {@link #getFencedLock(String)}
   */
  public DistributedLock getRedLock(DistributedLock... locks) {
    return engine.redLock(locks);
  }

  /**
   * Runs {@code action} while holding the lock called {@code name} and returns its result.
   *
   * <pre>{@code
   * Report report = locks.executeInLock("nightly-report", Duration.ofSeconds(5), null, this::build);
   * }</pre>
   *
   * <ol>
   *   <li>The lock is acquired on the calling thread: a {@code null} {@code waitTime} waits as
   *       long as it takes (interruptibly), zero or negative tries once. A {@code null}
   *       {@code leaseTime} means the watchdog, which keeps the lock however long the action
   *       runs.</li>
   *   <li>The lock is released after the action returns and after it throws. The action's
   *       exception propagates unchanged; a release that fails then is added to it as
   *       suppressed. After a normal return a release that fails is thrown (for example an
   *       {@link IllegalMonitorStateException} saying the lock was lost while the action ran).</li>
   * </ol>
   *
   * @param name the lock's name
   * @param waitTime how long to wait for the lock; {@code null} waits as long as it takes; zero
   *     or negative does not wait
   * @param leaseTime the lease; {@code null} uses the watchdog (renewed until the action ends)
   * @param action what to run while holding the lock
   * @param <T> the action's result type
   * @return what the action returned
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}, or the
   *     thread was interrupted while waiting (its interrupt flag is then set again, and the
   *     {@link InterruptedException} is the cause); the action did not run
   * @throws IllegalArgumentException naming {@code leaseTime} if it is zero, negative or longer
   *     than 365 days; nothing was acquired
   * @throws LockException if Redis cannot be reached
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
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}, or
   *     the wait was interrupted
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
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}, or
   *     the wait was interrupted
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
   * @throws LockNotAcquiredException if the lock was not acquired within {@code waitTime}, or
   *     the wait was interrupted
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
   * Registers a listener told when a hold of this client is at risk (see {@link LockAtRisk}):
   * once per episode, before any {@link LockLost} of that hold. Delivered like
   * {@link #onLockLost}: on the client's event thread, in order with the other reports.
   *
   * @param listener called once per episode
   * @return a registration whose {@link Registration#close()} removes the listener
   */
  public Registration onLockAtRisk(Consumer<? super LockAtRisk> listener) {
    Runnable remove = engine.addLockAtRiskListener(listener);
    return remove::run;
  }

  /**
   * Registers a listener told when an at-risk hold is confirmed again (see
   * {@link LockRecovered}). Delivered like {@link #onLockLost}.
   *
   * @param listener called once per episode that ends without a loss
   * @return a registration whose {@link Registration#close()} removes the listener
   */
  public Registration onLockRecovered(Consumer<? super LockRecovered> listener) {
    Runnable remove = engine.addLockRecoveredListener(listener);
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
