package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockLost;
import java.lang.System.Logger.Level;
import java.time.Instant;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * One client's engine: the Redis topology, the waiters' subscriptions, the holds this client
 * believes it has, and the scheduler that renews leases and keeps subscriber connections alive.
 *
 * <p>Internal: use {@code dev.holdfast.LockClient}. Thread-safe; {@link #close()} is idempotent.
 */
public final class LockEngine implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(LockEngine.class.getName());

  private final LockClientConfig config;
  private final String clientId;
  /** {@code <clientId>:}, the constant start of every hash field of this client. */
  private final String fieldPrefix;
  private final RedisTopology topology;
  private final UnlockSubscriptions subscriptions;
  private final ConcurrentMap<Hold.Id, Hold> holds = new ConcurrentHashMap<>();
  private final CopyOnWriteArrayList<Consumer<? super LockLost>> lostListeners =
      new CopyOnWriteArrayList<>();
  private final ScheduledThreadPoolExecutor scheduler;
  private final AtomicLong requests = new AtomicLong();
  private final long watchdogMillis;
  private final long markerMillis;
  private volatile boolean closed;

  private LockEngine(LockClientConfig config) {
    this.config = config;
    this.clientId = UUID.randomUUID().toString();
    this.fieldPrefix = clientId + ":";
    String clientName = "holdfast-" + clientId.substring(0, 8);
    this.topology = RedisTopology.connect(config, clientName);
    this.subscriptions = new UnlockSubscriptions(topology, clientName);
    this.watchdogMillis = config.watchdogTimeout().toMillis();
    // Outlives every retry of the release it marks.
    this.markerMillis = Math.max(5_000, config.timeout().toMillis() * (RedisTopology.ATTEMPTS + 2));
    this.scheduler = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, clientName + "-watchdog");
      t.setDaemon(true);
      return t;
    });
    scheduler.setRemoveOnCancelPolicy(true);
    LeaseWatchdog watchdog = new LeaseWatchdog(topology, holds, watchdogMillis, this::reportLost);
    long every = Math.max(1, watchdogMillis / 3);
    scheduler.scheduleWithFixedDelay(watchdog::run, every, every, TimeUnit.MILLISECONDS);
    long ping = UnlockSubscriptions.PING_INTERVAL.toMillis();
    scheduler.scheduleWithFixedDelay(this::pingSubscribers, ping, ping, TimeUnit.MILLISECONDS);
  }

  /**
   * Connects to Redis as {@code config} says.
   *
   * @throws dev.holdfast.LockException if the topology cannot be discovered (e.g. no cluster seed
   *     or sentinel answers)
   */
  public static LockEngine start(LockClientConfig config) {
    Objects.requireNonNull(config, "config");
    LockEngine engine = new LockEngine(config);
    LOG.log(Level.DEBUG, () -> "Holdfast client " + engine.clientId + " started: " + config);
    return engine;
  }

  /** A handle on lock {@code name}; no I/O. */
  public DistributedLock lock(String name) {
    return new RedisLock(this, LockNames.of(config.keyPrefix(), name));
  }

  /** The id that prefixes this client's hash fields: {@code <clientId>:<threadId>}. */
  public String clientId() {
    return clientId;
  }

  /** Registers a listener; the returned action removes it. */
  public Runnable addLockLostListener(Consumer<? super LockLost> listener) {
    Objects.requireNonNull(listener, "listener");
    lostListeners.add(listener);
    return () -> lostListeners.remove(listener);
  }

  /**
   * Stops renewals and closes every connection. Held locks are not released: they expire within
   * their lease. Waiting threads wake up and fail.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    scheduler.shutdownNow();
    subscriptions.close();
    topology.close();
  }

  boolean closed() {
    return closed;
  }

  RedisTopology topology() {
    return topology;
  }

  UnlockSubscriptions subscriptions() {
    return subscriptions;
  }

  ConcurrentMap<Hold.Id, Hold> holds() {
    return holds;
  }

  long watchdogMillis() {
    return watchdogMillis;
  }

  long markerMillis() {
    return markerMillis;
  }

  String nextRequestId() {
    return fieldPrefix + requests.incrementAndGet();
  }

  /** The hash field of thread {@code threadId} of this client: {@code <clientId>:<threadId>}. */
  String fieldOf(long threadId) {
    return fieldPrefix + threadId;
  }

  /** Channels that have local waiters now, for tests. */
  Set<String> waitedChannels() {
    return subscriptions.activeChannels();
  }

  private void pingSubscribers() {
    try {
      subscriptions.ping();
    } catch (Throwable t) {
      LOG.log(Level.DEBUG, "Subscriber ping failed", t);
    }
  }

  private void reportLost(Hold hold, String reason) {
    LockLost event = new LockLost(hold.names.name(), hold.threadId, reason, Instant.now());
    LOG.log(Level.WARNING, "Lock '" + hold.names.name() + "' held by thread " + hold.threadId
        + " was lost: " + reason);
    for (Consumer<? super LockLost> listener : lostListeners) {
      try {
        listener.accept(event);
      } catch (Throwable t) {
        // A faulty listener must not stop others from hearing, nor the watchdog from renewing.
        LOG.log(Level.ERROR, "LockLost listener " + listener + " failed", t);
      }
    }
  }
}
