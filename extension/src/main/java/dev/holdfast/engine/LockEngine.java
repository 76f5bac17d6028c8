package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockAtRisk;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import dev.holdfast.engine.LockObserver.LossCause;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * One client's engine: the Redis topology, the waiters' subscriptions, the holds this client
 * believes it has, and the threads that keep them honest.
 *
 * <p><b>Threads.</b> One scheduler thread only keeps time: it starts renewal rounds, fires hold
 * deadlines and pings subscriber connections, and never waits for Redis. Redis calls of the
 * watchdog and of owed cleanups run on an I/O pool, one task per node at a time, so that a node
 * that does not answer delays nobody else's renewals. Listeners (lost, at risk, recovered) run
 * on their own thread, in order, so that application code never delays a renewal. Asynchronous
 * acquisitions and releases of {@link dev.holdfast.LockHold}s run on an executor of their own
 * ({@link #asyncExecutor()}), created on first use.
 *
 * <p><b>Reports.</b> {@code LockAtRisk}, {@code LockRecovered} and {@code LockLost} are handed
 * to the listeners on the event thread, in the order they were detected. What may be reported
 * is decided there too, per hold: no {@code LockAtRisk} or {@code LockRecovered} after the
 * hold's {@code LockLost}, and a {@code LockRecovered} only after its {@code LockAtRisk}, even
 * when a loss and a failing renewal are detected at the same moment on different threads.
 *
 * <p><b>Observation.</b> Metrics go through one {@link LockObserver} (Micrometer when the
 * configuration carries a registry, else nothing); JFR events are emitted where the work happens
 * ({@link LockEvents}). Both cost next to nothing when nobody looks.
 *
 * <p>Internal: use {@code dev.holdfast.LockClient}. Thread-safe; {@link #close()} is idempotent.
 */
public final class LockEngine implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(LockEngine.class.getName());
  /** How often owed cleanups are retried while Redis does not answer them. */
  private static final long CLEANUP_RETRY_MS = 250;
  /** Retry interval of owed work whose lease is over: only its seal is still at stake. */
  private static final long CLEANUP_PAST_LEASE_RETRY_MS = 2_000;
  /** How often subscribers check that the master they listen on is still the one named. */
  private static final long FOLLOW_TOPOLOGY_MILLIS = 500;

  private final LockClientConfig config;
  private final String clientId;
  /** {@code <clientId>:}, the constant start of every hash field of this client. */
  private final String fieldPrefix;
  private final RedisTopology topology;
  private final UnlockSubscriptions subscriptions;
  private final ConcurrentMap<Hold.Id, Hold> holds = new ConcurrentHashMap<>();
  /** What failed multi-lock unlocks still owe ({@link MultiLock}); dropped on close. */
  private final ConcurrentMap<MultiLock.OwedKey, ThreadRecord<MultiLock.Owed>> multiLockOwed =
      new ConcurrentHashMap<>();
  /**
   * When this client's latest {@code forceUnlock()} of each key was answered (nanoTime), kept
   * a seal's time: an acquisition answered later may have run before the delete.
   */
  private final ConcurrentMap<String, Long> forcedAt = new ConcurrentHashMap<>();
  /** Seals owed by unanswered {@code forceUnlock()} calls, settled by the cleanup rounds. */
  private final Set<SealOwed> sealsOwed = ConcurrentHashMap.newKeySet();
  /** What failed RedLock unlocks left ({@link RedLock}); dropped on close. */
  private final ConcurrentMap<MultiLock.OwedKey, ThreadRecord<MultiLock.Due>> redLockUnfinished =
      new ConcurrentHashMap<>();
  /** The multi-lock sections open per multi-lock and thread ({@link MultiLock}); dropped on close. */
  private final ConcurrentMap<MultiLock.OwedKey, ThreadRecord<Deque<CompositeLock.Section>>>
      multiLockSections = new ConcurrentHashMap<>();
  /** The RedLock sections open per RedLock and thread ({@link RedLock}); dropped on close. */
  private final ConcurrentMap<MultiLock.OwedKey, ThreadRecord<Deque<CompositeLock.Section>>>
      redLockSections = new ConcurrentHashMap<>();
  private final CopyOnWriteArrayList<Consumer<? super LockAtRisk>> atRiskListeners =
      new CopyOnWriteArrayList<>();
  private final CopyOnWriteArrayList<Consumer<? super LockRecovered>> recoveredListeners =
      new CopyOnWriteArrayList<>();
  private final CopyOnWriteArrayList<Consumer<? super LockLost>> lostListeners =
      new CopyOnWriteArrayList<>();
  private final ScheduledThreadPoolExecutor scheduler;
  private final ThreadPoolExecutor io;
  private final ExecutorService events;
  private final AtomicLong requests = new AtomicLong();
  private final AtomicBoolean cleanupRunning = new AtomicBoolean();
  // Set by every request for a cleanup round, cleared by the round that serves it: a debt owed
  // while a round runs (settling one debt can owe another) is served by another round, never
  // dropped because the running one refused the start.
  private final AtomicBoolean cleanupWanted = new AtomicBoolean();
  private final long watchdogMillis;
  private final long markerMillis;
  private final long sealMillis;
  private final LockObserver observer;
  /** Threads parked in an acquisition now. */
  private final AtomicInteger waiting = new AtomicInteger();
  /** Locks handed from one thread of this client to another without a release through Redis. */
  private final AtomicLong handoffs = new AtomicLong();
  /** Owner ids of {@link OwnedLockHold}s: negated, so never a thread's id. */
  private final AtomicLong owners = new AtomicLong();
  /** Runs asynchronous acquisitions and releases; created on first use. Guarded by this. */
  private ExecutorService async;
  private volatile boolean closed;

  private LockEngine(LockClientConfig config) {
    this.config = config;
    this.clientId = UUID.randomUUID().toString();
    this.fieldPrefix = clientId + ":";
    String clientName = "holdfast-" + clientId.substring(0, 8);
    this.topology = RedisTopology.connect(config, clientName);
    this.observer = config.meterRegistry().isPresent()
        ? new MicrometerObserver(config.meterRegistry().get(), this::activeHolds, waiting::get)
        : LockObserver.NONE;
    topology.observe(observer);
    this.subscriptions = new UnlockSubscriptions(topology, clientName);
    this.watchdogMillis = config.watchdogTimeout().toMillis();
    // A final release's marker outlives every retry of that release.
    this.markerMillis = Math.max(5_000, config.timeout().toMillis() * (RedisTopology.ATTEMPTS + 2));
    // A sealed or settled request's marker also outlives a copy delayed in a paused server or a
    // slow network; these are rare, so they may live long.
    this.sealMillis = Math.max(markerMillis, Math.max(60_000, 2 * watchdogMillis));
    this.scheduler = new ScheduledThreadPoolExecutor(1, daemon(clientName + "-timer"));
    scheduler.setRemoveOnCancelPolicy(true);
    // Bounded by design: at most one renewal task per node plus one cleanup task at a time.
    this.io = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30, TimeUnit.SECONDS,
        new SynchronousQueue<>(), daemon(clientName + "-io"));
    this.events = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
        new LinkedBlockingQueue<>(), daemon(clientName + "-events"));
    LeaseWatchdog watchdog = new LeaseWatchdog(this);
    long every = Math.max(1, watchdogMillis / 3);
    scheduler.scheduleWithFixedDelay(watchdog::run, every, every, TimeUnit.MILLISECONDS);
    long ping = UnlockSubscriptions.PING_INTERVAL.toMillis();
    scheduler.scheduleWithFixedDelay(this::pingSubscribers, ping, ping, TimeUnit.MILLISECONDS);
    if (topology.switchesMaster()) {
      scheduler.scheduleWithFixedDelay(this::followTopology, FOLLOW_TOPOLOGY_MILLIS,
          FOLLOW_TOPOLOGY_MILLIS, TimeUnit.MILLISECONDS);
      long tick = SentinelMasterCheck.REFRESH_TICK_MILLIS;
      scheduler.scheduleWithFixedDelay(this::refreshMasterCheck, tick, tick,
          TimeUnit.MILLISECONDS);
    }
  }

  private static ThreadFactory daemon(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + (name.endsWith("-io") ? "-" + n.incrementAndGet() : ""));
      t.setDaemon(true);
      return t;
    };
  }

  /**
   * Connects to Redis as {@code config} says.
   *
   * @throws dev.holdfast.LockException if the topology cannot be discovered (e.g. no cluster seed
   *     or sentinel answers), or, with {@code connectAtStartup}, Redis does not answer PING
   */
  public static LockEngine start(LockClientConfig config) {
    Objects.requireNonNull(config, "config");
    LockEngine engine = new LockEngine(config);
    LOG.log(Level.DEBUG, () -> "Holdfast client " + engine.clientId + " started: " + config);
    return engine;
  }

  /** A handle on lock {@code name}, which is its own template in metrics; no I/O. */
  public DistributedLock lock(String name) {
    return lock(name, name);
  }

  /**
   * A handle on lock {@code name}, measured under {@code template} (a {@code @Locked} template
   * such as {@code inventory:{sku}}: a bounded set of values, unlike rendered names); no I/O.
   */
  public DistributedLock lock(String name, String template) {
    return new RedisLock(this, LockNames.of(config.keyPrefix(), name), false,
        Objects.requireNonNull(template, "template"));
  }

  /** A handle on lock {@code name} whose holds carry fencing tokens; no I/O. */
  public FencedLock fencedLock(String name) {
    return fencedLock(name, name);
  }

  /** A read-write lock handle, which is its own template in metrics; no I/O. */
  public dev.holdfast.DistributedReadWriteLock readWriteLock(String name) {
    return readWriteLock(name, name);
  }

  /** {@link #readWriteLock(String)}, both sides measured under {@code template}; no I/O. */
  public dev.holdfast.DistributedReadWriteLock readWriteLock(String name, String template) {
    return new RedisReadWriteLock(this, config.keyPrefix(), name,
        Objects.requireNonNull(template, "template"));
  }

  /** A fair lock handle, its own template in metrics; see {@code LockClient#getFairLock}. */
  public DistributedLock fairLock(String name) {
    return fairLock(name, name);
  }

  /** {@link #fairLock(String)}, measured under {@code template}; no I/O. */
  public DistributedLock fairLock(String name, String template) {
    return new RedisLock(this, LockNames.of(config.keyPrefix(), name, FairKind.INSTANCE), false,
        Objects.requireNonNull(template, "template"));
  }

  /** A multi-lock; see {@code LockClient#getMultiLock}. */
  public DistributedLock multiLock(DistributedLock... locks) {
    return new MultiLock(locks);
  }

  /** A RedLock; see {@code LockClient#getRedLock}. */
  public DistributedLock redLock(DistributedLock... locks) {
    return new RedLock(locks);
  }

  /** {@code LockClient#executeInLock}. */
  public <T> T executeInLock(DistributedLock lock, java.time.Duration waitTime,
      java.time.Duration leaseTime, java.util.function.Supplier<T> action) {
    return ExecuteInLock.run(lock, waitTime, leaseTime, action);
  }

  /**
   * Like {@code lock.unlock()} on the calling thread, but when this unlock would end the hold,
   * the lock stays held in Redis for {@code remaining} more and then expires (renewal stops; no
   * {@code LockLost}). A nested hold, a non-positive {@code remaining} or a lock of another
   * implementation is a plain unlock.
   *
   * @throws IllegalMonitorStateException as {@code unlock()} does
   */
  public void unlockAfter(DistributedLock lock, java.time.Duration remaining) {
    Objects.requireNonNull(remaining, "remaining");
    if (lock instanceof RedisLock redisLock) {
      redisLock.unlockAfter(remaining.isNegative() ? 0 : remaining.toMillis());
    } else {
      lock.unlock();
    }
  }

  /** {@link #fencedLock(String)}, measured under {@code template}. */
  public FencedLock fencedLock(String name, String template) {
    return new RedisLock(this, LockNames.of(config.keyPrefix(), name), true,
        Objects.requireNonNull(template, "template"));
  }

  /**
   * Sends {@code PING} to every node this client sends lock commands to: the standalone server,
   * the master the sentinels name, or each cluster primary (a cluster whose slots are not all
   * served is reported as such). For health checks; blocks up to the Redis timeout per node.
   *
   * @return one result per node; empty only if a cluster's topology is unknown
   */
  public List<NodeStatus> ping() {
    return topology.ping();
  }

  /** The id that prefixes this client's hash fields: {@code <clientId>:<threadId>}. */
  public String clientId() {
    return clientId;
  }

  /** Adds an at-risk listener (see {@code LockClient#onLockAtRisk}); returns its removal. */
  public Runnable addLockAtRiskListener(Consumer<? super LockAtRisk> listener) {
    Objects.requireNonNull(listener, "listener");
    atRiskListeners.add(listener);
    return () -> atRiskListeners.remove(listener);
  }

  /** Adds a recovery listener (see {@code LockClient#onLockRecovered}); returns its removal. */
  public Runnable addLockRecoveredListener(Consumer<? super LockRecovered> listener) {
    Objects.requireNonNull(listener, "listener");
    recoveredListeners.add(listener);
    return () -> recoveredListeners.remove(listener);
  }

  /** Adds a lost-lock listener (see {@code LockClient#onLockLost}); returns its removal. */
  public Runnable addLockLostListener(Consumer<? super LockLost> listener) {
    Objects.requireNonNull(listener, "listener");
    lostListeners.add(listener);
    return () -> lostListeners.remove(listener);
  }

  /**
   * Stops renewals and closes every connection. Held locks are not released: they expire within
   * their lease. Waiting threads wake up and fail. Seals still owed are sent once more first
   * ({@link #sealBeforeClose()}).
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    multiLockOwed.clear();
    redLockUnfinished.clear();
    redLockSections.clear();
    multiLockSections.clear();
    sealBeforeClose();
    observer.close();
    scheduler.shutdownNow();
    ExecutorService asyncPool;
    synchronized (this) {
      asyncPool = async;
    }
    if (asyncPool != null) {
      asyncPool.shutdownNow(); // pending acquisitions are interrupted and fail
    }
    subscriptions.close();
    io.shutdown();
    events.shutdown();
    topology.close();
  }

  boolean closed() {
    return closed;
  }

  /**
   * Sends each seal still owed once more, starting none after one command timeout (the one in
   * progress then takes at most its attempts: close() waits a few timeouts at worst). Unlike
   * every other debt, which at worst leaves this client's own field until its lease ends, an
   * unsealed {@code forceUnlock()} can still arrive late and delete a lock another client took
   * since. One that does not land is logged: that is for up to the seal time.
   */
  private void sealBeforeClose() {
    long deadline = System.nanoTime() + config.timeout().toNanos();
    for (SealOwed seal : sealsOwed) {
      String error = "no time left";
      if (System.nanoTime() - deadline < 0) {
        try {
          seal.settle();
          sealsOwed.remove(seal);
          continue;
        } catch (RuntimeException e) {
          error = e.getMessage();
        }
      }
      LOG.log(Level.WARNING, "Closed with " + seal + " not sealed (" + error + "): a copy of it "
          + "still on its way can delete the lock, even one taken since, for up to "
          + TimeUnit.MILLISECONDS.toSeconds(sealMillis) + " s");
    }
    sealsOwed.clear();
  }

  RedisTopology topology() {
    return topology;
  }

  /**
   * Counts a {@code @Locked(skipIfBusy = true)} call that did not run because its lock was busy
   * (its {@code tryLock} is measured as any other acquisition).
   */
  public void skipped(String template) {
    observer.skipped(template);
  }

  LockObserver observer() {
    return observer;
  }

  /** Holds this client has now (not lost, at least one section open), for the gauge. */
  int activeHolds() {
    int n = 0;
    for (Hold h : holds.values()) {
      if (h.active() && h.count() > 0) {
        n++;
      }
    }
    return n;
  }

  /** Threads of this client parked in an acquisition now (for the gauge and tests). */
  int waitingThreads() {
    return waiting.get();
  }

  /** A thread parks in an acquisition ({@code +1}) or leaves having parked ({@code -1}). */
  void waiting(int delta) {
    waiting.addAndGet(delta);
  }

  /** A lock was handed to a waiting thread of this client ({@link LockScripts#TRANSFER}). */
  void handedOff() {
    handoffs.incrementAndGet();
  }

  /** How many handoffs between threads of this client ran in Redis (acknowledged or not). */
  long localHandoffs() {
    return handoffs.get();
  }

  UnlockSubscriptions subscriptions() {
    return subscriptions;
  }

  /**
   * Records that a {@code forceUnlock()} of {@code key} by this client was answered at
   * {@code at} (nanoTime). Called before its holds of the key are checked, so that an
   * acquisition registered meanwhile is seen by that check or sees this record.
   */
  void forced(String key, long at) {
    long keep = TimeUnit.MILLISECONDS.toNanos(sealMillis);
    forcedAt.values().removeIf(t -> at - t > keep);
    forcedAt.merge(key, at, Math::max);
  }

  /**
   * {@return whether a {@code forceUnlock()} of {@code key} by this client was answered after
   * {@code sentAt} (nanoTime): an acquisition sent then may have run before its delete}
   */
  boolean forcedSince(String key, long sentAt) {
    Long at = forcedAt.get(key);
    return at != null && at - sentAt > 0;
  }

  ConcurrentMap<Hold.Id, Hold> holds() {
    return holds;
  }

  /**
   * The rest of the failed unlocks of multi-locks whose first member of this library is of this
   * client, per multi-lock and thread ({@link MultiLock#unlock()}); cleared on close, when
   * nothing of this client is held any more.
   */
  ConcurrentMap<MultiLock.OwedKey, ThreadRecord<MultiLock.Owed>> multiLockOwed() {
    return multiLockOwed;
  }

  /**
   * The records of failed RedLock unlocks with a member of this client, per RedLock and thread
   * ({@link RedLock#unlock()}); cleared on close, when nothing of this client is held any more.
   */
  ConcurrentMap<MultiLock.OwedKey, ThreadRecord<MultiLock.Due>> redLockUnfinished() {
    return redLockUnfinished;
  }

  /**
   * The RedLock sections with a member of this client that each thread has open, per RedLock
   * ({@link RedLock#unlock()}); cleared on close, when nothing of this client is held any more.
   */
  ConcurrentMap<MultiLock.OwedKey, ThreadRecord<Deque<CompositeLock.Section>>> redLockSections() {
    return redLockSections;
  }

  /** As {@link #redLockSections()}, for multi-locks with a lock of this client. */
  ConcurrentMap<MultiLock.OwedKey, ThreadRecord<Deque<CompositeLock.Section>>>
      multiLockSections() {
    return multiLockSections;
  }

  long watchdogMillis() {
    return watchdogMillis;
  }

  /** How long a fair waiter may go without refreshing its place (holdfast.fair.waiter-timeout). */
  long fairWaiterMillis() {
    return config.fairWaiterTimeout().toMillis();
  }

  /** How long a marker lives: short for a final release's first attempt, long once sealed. */
  long markerMillis(boolean sealed) {
    return sealed ? sealMillis : markerMillis;
  }

  String nextRequestId() {
    return fieldPrefix + requests.incrementAndGet();
  }

  /**
   * A new owner id for a {@link OwnedLockHold}: negative and never reused in this client, so it
   * never equals a thread id ({@link Thread#getId()} is positive) and a hold owned by an object
   * has a hash field ({@link #fieldOf}) and a registry entry no thread of this JVM shares.
   */
  long nextOwnerId() {
    return -owners.incrementAndGet();
  }

  /**
   * Runs {@code task} on the client's asynchronous executor (see {@link #asyncExecutor()}).
   *
   * @return a future completed with the task's result or exception, exceptionally with
   *     {@link IllegalStateException} if the client is closed
   */
  <T> java.util.concurrent.CompletableFuture<T> async(
      java.util.concurrent.Callable<T> task) {
    java.util.concurrent.CompletableFuture<T> result =
        new java.util.concurrent.CompletableFuture<>();
    try {
      asyncExecutor().execute(() -> {
        try {
          result.complete(task.call());
        } catch (Throwable t) {
          result.completeExceptionally(t);
        }
      });
    } catch (RejectedExecutionException | IllegalStateException e) {
      result.completeExceptionally(new IllegalStateException("The lock client is closed", e));
    }
    return result;
  }

  /**
   * The executor of asynchronous acquisitions and releases, created on first use and shut down
   * (its tasks interrupted) by {@link #close()}: a virtual thread per task when the JVM has them
   * (Java 21+, reached reflectively since this library is built for Java 17), else a cached pool
   * of daemon threads {@code holdfast-async-<n>}. Its tasks block on Redis and on waiting for
   * locks; a pool thread idle for a minute ends.
   *
   * @throws IllegalStateException if the client is closed
   */
  synchronized ExecutorService asyncExecutor() {
    if (closed) {
      throw new IllegalStateException("The lock client is closed");
    }
    if (async == null) {
      async = virtualThreadExecutor();
      if (async == null) {
        AtomicInteger n = new AtomicInteger();
        ThreadFactory threads = r -> {
          Thread t = new Thread(r, "holdfast-async-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        };
        async = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 60, TimeUnit.SECONDS,
            new SynchronousQueue<>(), threads);
      }
    }
    return async;
  }

  /**
   * {@code Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("holdfast-async-", 1)
   * .factory())}, or null on a JVM without virtual threads.
   */
  private static ExecutorService virtualThreadExecutor() {
    try {
      Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
      Class<?> builderType = Class.forName("java.lang.Thread$Builder");
      builder = builderType.getMethod("name", String.class, long.class)
          .invoke(builder, "holdfast-async-", 1L);
      ThreadFactory factory = (ThreadFactory) builderType.getMethod("factory").invoke(builder);
      return (ExecutorService) java.util.concurrent.Executors.class
          .getMethod("newThreadPerTaskExecutor", ThreadFactory.class).invoke(null, factory);
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      return null; // Java 17-20: no virtual threads (or preview only)
    }
  }

  /** The hash field of thread {@code threadId} of this client: {@code <clientId>:<threadId>}. */
  String fieldOf(long threadId) {
    return fieldPrefix + threadId;
  }

  /** Channels that have local waiters now, for tests. */
  Set<String> waitedChannels() {
    return subscriptions.activeChannels();
  }

  /** Runs {@code task} on the timer thread after {@code delayMillis}; false if closing. */
  boolean schedule(Runnable task, long delayMillis) {
    try {
      scheduler.schedule(task, delayMillis, TimeUnit.MILLISECONDS);
      return true;
    } catch (RejectedExecutionException e) {
      return false;
    }
  }

  /** Runs {@code task} on the I/O pool; false if the client is closing. */
  boolean runIo(Runnable task) {
    try {
      io.execute(task);
      return true;
    } catch (RejectedExecutionException e) {
      return false;
    }
  }

  // ---- belief and loss ----

  /**
   * Until when a TTL of {@code ttlMillis} set by a call sent at {@code sentAt} (nanoTime) is
   * certainly still running in Redis: Redis counts it from when it ran, which is later. The
   * margin covers a Redis clock running a little faster than ours (1%) and a deadline timer that
   * fires late on a busy machine (25 ms), so that a loss is reported before anyone else can
   * acquire.
   */
  static long confirmedUntil(long sentAt, long ttlMillis) {
    long margin = ttlMillis / 100 + 25;
    return sentAt + TimeUnit.MILLISECONDS.toNanos(Math.max(0, ttlMillis - margin));
  }

  /**
   * Arms the timer that declares {@code hold} lost once its confirmed lease has passed. A timer
   * armed for an earlier instant stays (it re-arms itself when it finds the lease extended); one
   * armed for a later instant is replaced, since the lease got shorter.
   */
  void watchDeadline(Hold hold) {
    synchronized (hold) {
      long until = hold.confirmedUntil();
      if (!hold.active() || closed
          || (hold.deadlineTask != null && hold.deadlineTaskAt - until <= 0)) {
        return;
      }
      if (hold.deadlineTask != null) {
        hold.deadlineTask.cancel(false);
      }
      long delay = Math.max(0, until - System.nanoTime());
      try {
        hold.deadlineTask = scheduler.schedule(() -> checkDeadline(hold), delay,
            TimeUnit.NANOSECONDS);
        hold.deadlineTaskAt = until;
      } catch (RejectedExecutionException e) {
        hold.deadlineTask = null; // closing: no more deadlines
      }
    }
  }

  private void checkDeadline(Hold hold) {
    synchronized (hold) {
      if (hold.deadlineTask == null || hold.deadlineTask.isCancelled()) {
        return;
      }
      hold.deadlineTask = null;
    }
    if (!hold.active() || holds.get(hold.id) != hold || hold.endedInDoubt()) {
      return;
    }
    if (System.nanoTime() - hold.confirmedUntil() < 0) {
      watchDeadline(hold); // renewed meanwhile
      return;
    }
    expire(hold);
  }

  /** The hold's confirmed lease has passed: it is lost, whatever Redis says when it answers. */
  void expire(Hold hold) {
    if (hold.renewed()) {
      if (lose(hold, LossCause.LEASE_UNCONFIRMED,
          "its lease could not be confirmed: no renewal was acknowledged by Redis "
          + "within the watchdog timeout of " + watchdogMillis + "ms, so another client may "
          + "hold it now")) {
        // If Redis still has the field (it was slow, not gone), free the lock for others.
        oweAbandon(hold, hold.count(), watchdogMillis);
      }
    } else if (hold.pendingRelease() != null) {
      // Its newest section's release got no answer: if it ran, it cut the lease to what the
      // other sections needed, which has run out; if not, Redis keeps the field longer (that
      // section's lease, or the watchdog's): free the lock for others all the same.
      if (lose(hold, LossCause.LEASE_EXPIRED, "its lease ran out before unlock(): an inner "
          + "unlock() got no answer, and if it ran it cut the lease to what the outer sections "
          + "needed")) {
        oweAbandon(hold, hold.count(), Math.max(watchdogMillis, hold.fixedLeaseMillis()));
      }
    } else {
      lose(hold, LossCause.LEASE_EXPIRED,
          "its lease of " + hold.fixedLeaseMillis() + "ms ran out before unlock()");
    }
  }

  /**
   * Whether the thread of {@code hold} still has it: open sections, not lost, and its lease not
   * possibly over (a hold past its confirmed lease is declared lost here, as {@link #expire}).
   * A lost hold keeps its count until its sections are unlocked, but holds nothing.
   */
  boolean live(Hold hold) {
    if (hold == null || hold.count() == 0) {
      return false;
    }
    if (hold.active() && !hold.believedAt(System.nanoTime())) {
      expire(hold);
    }
    return hold.active();
  }

  /**
   * Marks {@code hold} lost and tells the listeners, once.
   *
   * @param cause the category of {@code reason}, for metrics and JFR
   * @return whether this call marked it
   */
  boolean lose(Hold hold, LossCause cause, String reason) {
    if (hold == null || !hold.lose(reason)) {
      return false;
    }
    // Taken at once: an unlock() on another thread may report the loss before the log is out.
    Instant detectedAt = Instant.now();
    cancelDeadline(hold);
    if (hold.acquiredAt() != 0) { // a record of owed work was never held: nothing was lost
      observer.lost(hold.template, cause);
      LockEvents.lost(hold.names.name(), hold.template, hold.thread(), hold.threadId, cause,
          reason, System.nanoTime() - hold.acquiredAt());
    }
    LOG.log(Level.WARNING, "Lock '" + hold.names.name() + "' held by " + hold.ownerName()
        + " was lost: " + reason);
    LockLost event = new LockLost(hold.names.name(), hold.threadId, reason, detectedAt);
    LossWatch watch = hold.lossWatch(); // read after the mark: see watchLoss
    report(() -> {
      hold.lossReported = true;
      deliver(lostListeners, event, "LockLost");
      if (watch != null) {
        watch.fire(reason); // after the listeners, which see the report while the call runs
      }
    });
    return true;
  }

  /**
   * A renewal of {@code hold} could not be confirmed ({@code error}, for humans): opens its
   * at-risk episode and reports it, unless one is open or the hold is not one at risk (see
   * {@link Hold#atRisk(long, boolean)}). Called by the watchdog.
   */
  void atRisk(Hold hold, String error, boolean inFlightOnly) {
    synchronized (hold) { // an episode's reports are queued in the order of its transitions
      long now = System.nanoTime();
      if (hold.atRisk(now, inFlightOnly)) {
        reportAtRisk(hold, error, now);
      }
    }
  }

  private void reportAtRisk(Hold hold, String error, long now) {
    LockAtRisk event = new LockAtRisk(hold.names.name(), hold.template, hold.threadId,
        Duration.ofNanos(Math.max(0, hold.confirmedUntil() - now)), error, Instant.now());
    LOG.log(Level.DEBUG, () -> "Lock '" + event.lockName() + "' held by " + hold.ownerName()
        + " is at risk, " + event.timeLeft().toMillis() + "ms left: " + error);
    report(() -> {
      if (!hold.lossReported) {
        hold.riskReported = true;
        observer.atRisk(hold.template);
        LockEvents.atRisk(hold.names.name(), hold.template, hold.thread(), hold.threadId,
            event.timeLeft().toNanos(), error);
        deliver(atRiskListeners, event, "LockAtRisk");
      }
    });
  }

  /**
   * Applies a renewal of {@code hold} sent at {@code epoch} and confirmed until {@code until}
   * (see {@link Hold#renewed}); if it ends an at-risk episode, reports the recovery. Called by
   * the watchdog.
   */
  void renewed(Hold hold, long epoch, long until) {
    synchronized (hold) {
      long atRiskSince = hold.renewed(epoch, until);
      if (atRiskSince != 0) {
        reportRecovered(hold, atRiskSince);
      }
    }
  }

  private void reportRecovered(Hold hold, long since) {
    LockRecovered event = new LockRecovered(hold.names.name(), hold.template, hold.threadId,
        Duration.ofNanos(Math.max(0, System.nanoTime() - since)), Instant.now());
    report(() -> {
      if (hold.riskReported && !hold.lossReported) {
        hold.riskReported = false;
        observer.recovered(hold.template);
        LockEvents.recovered(hold.names.name(), hold.template, hold.thread(), hold.threadId,
            event.atRiskFor().toNanos());
        deliver(recoveredListeners, event, "LockRecovered");
      }
    });
  }

  /** Runs {@code task} on the event thread, after every report detected before it. */
  private void report(Runnable task) {
    try {
      events.execute(task);
    } catch (RejectedExecutionException e) {
      // the client is closed: nobody is listening any more
    }
  }

  /**
   * Runs {@code action} with the reason, once, if {@code hold} — this hold, not a later one of the
   * same lock and owner — is lost before the returned removal runs: on the event thread, after
   * the {@link LockLost} listeners of that loss; a hold lost already is reported to it at once
   * (on the event thread too). A hold watched already keeps its watch: the returned removal then
   * does nothing, and so it does for a null {@code hold}. For {@code @Locked(onLoss)}; the
   * action must be quick and must not block.
   */
  Runnable watchLoss(Hold hold, Consumer<String> action) {
    Objects.requireNonNull(action, "action");
    LossWatch watch = new LossWatch(action);
    if (hold == null || !hold.watch(watch)) {
      return () -> { };
    }
    // The watch is set before the loss mark is read here, and lose() marks before it reads the
    // watch: one of the two sees the other (both may: the watch fires once).
    if (!hold.active()) {
      String reason = hold.lostReason();
      report(() -> watch.fire(reason));
    }
    return () -> {
      watch.close();
      hold.unwatch(watch);
    };
  }

  private static <E> void deliver(List<Consumer<? super E>> listeners, E event, String what) {
    for (Consumer<? super E> listener : listeners) {
      try {
        listener.accept(event);
      } catch (Throwable t) {
        // A faulty listener must not stop others from hearing.
        LOG.log(Level.ERROR, what + " listener " + listener + " failed", t);
      }
    }
  }

  /** The final unlock succeeded: forget the hold. Called by the holding thread. */
  void forget(Hold hold) {
    holds.remove(hold.id, hold);
    cancelDeadline(hold);
    hold.retire(topology.timeout.toNanos() * (RedisTopology.ATTEMPTS + 1));
    if (hold.active()) {
      observer.released(hold.template, System.nanoTime() - hold.acquiredAt());
      LockEvents.holdEnds(hold.heldEvent(), hold.names.name(), hold.template);
    }
  }

  /**
   * The final call of {@code hold} (release, handoff or keep; {@link Hold#ending(boolean)} was
   * set before it was sent) got no answer. For its thread the hold is over: its section closes
   * and it is never renewed again. What the call did is settled in the background by
   * {@link LockScripts#RESOLVE} under the call's own request ({@code kind} {@code abandon}
   * completes a release: the field goes if it is still there; {@code release} only seals a
   * keep), retried until Redis answers or the hold's lease has passed. Until then, and until
   * the thread calls again, the hold stays in the registry (see {@link Hold#endedInDoubt()}):
   * a retried unlock settles it and succeeds, a new acquisition settles it first. No loss is
   * reported: the thread asked for the hold to end.
   *
   * @param leaseMillis the longest the key can still live by this hold's doing
   */
  void endInDoubt(Hold hold, String requestId, String kind, long leaseMillis) {
    cancelDeadline(hold);
    hold.closeNewest();
    observer.released(hold.template, System.nanoTime() - hold.acquiredAt());
    LockEvents.holdEnds(hold.heldEvent(), hold.names.name(), hold.template);
    owe(hold, new Hold.Cleanup(requestId, 1, kind, leaseOverAfter(leaseMillis)));
  }

  /**
   * Drops what is left of a hold whose final call was in doubt, once settled: the holder called
   * again, or the watchdog found it stale.
   */
  void forgetEnded(Hold hold) {
    holds.remove(hold.id, hold);
    hold.retire(topology.timeout.toNanos() * (RedisTopology.ATTEMPTS + 1));
  }

  /**
   * Drops {@code hold}, its thread's only section, which Redis no longer has, without a
   * {@link LockLost}: its thread gave it back before the application could use it (a composite
   * acquisition giving up, {@link RedisLock#giveBack()}), so nothing it believed was lost.
   */
  void forgetUnreported(Hold hold, String reason) {
    hold.lose(reason);
    cancelDeadline(hold);
    hold.closeNewest();
    forgetIfDone(hold);
  }

  /** Drops a lost hold once its sections are unlocked and nothing is owed to Redis. */
  void forgetIfDone(Hold hold) {
    if (!hold.active() && hold.count() == 0 && nothingOwed(hold)) {
      holds.remove(hold.id, hold);
    }
  }

  /**
   * Whether lost {@code hold} owes Redis nothing, so that it may leave the registry. A release it
   * left pending is owed then ({@link #oweAbandon}): dropped unsettled, a late copy of it would
   * apply to the thread's next hold of the lock.
   */
  boolean nothingOwed(Hold hold) {
    if (hold.cleanup() == null && hold.pendingRelease() != null) {
      oweAbandon(hold, hold.count(), watchdogMillis);
    }
    return hold.cleanup() == null;
  }

  /**
   * Owes the abandon of lost {@code hold}: its field removed if Redis still has it, settled under
   * the release it left pending if any (that request sealed, no late copy of it applies to a
   * newer hold of the thread's), else under a fresh request.
   *
   * @param leaseMillis the longest the field can still live by this hold's doing
   */
  void oweAbandon(Hold hold, int expected, long leaseMillis) {
    owe(hold, new Hold.Cleanup(abandonRequest(hold), expected, "abandon",
        leaseOverAfter(leaseMillis)));
  }

  /**
   * {@return the request to settle an abandon of {@code hold} under: the release it left
   * pending, taken off the hold (settling the abandon seals it), else a fresh one}
   */
  String abandonRequest(Hold hold) {
    Hold.Pending pending = hold.pendingRelease();
    hold.pendingRelease(null);
    return pending != null ? pending.requestId() : nextRequestId();
  }

  private static void cancelDeadline(Hold hold) {
    synchronized (hold) {
      if (hold.deadlineTask != null) {
        hold.deadlineTask.cancel(false);
        hold.deadlineTask = null;
      }
    }
  }

  // ---- Redis work owed ----

  long leaseOverAfter(long leaseMillis) {
    return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(leaseMillis + 1_000);
  }

  /**
   * Registers {@code owing} ({@link Hold#owing}), unless its thread has a hold of the lock
   * already, and starts settling what it owes in the background.
   */
  void register(Hold owing) {
    if (holds.putIfAbsent(owing.id, owing) == null) {
      scheduleCleanup(0);
    }
  }

  /** Records Redis work that {@code hold} owes and starts retrying it in the background. */
  void owe(Hold hold, Hold.Cleanup cleanup) {
    hold.owe(cleanup);
    scheduleCleanup(0);
  }

  /**
   * A request's seal owed to Redis by no hold (an unanswered {@code forceUnlock()}): settled by
   * the cleanup rounds, retried while a copy of the request may still arrive (a seal's time).
   */
  interface SealOwed {
    /**
     * Sends the seal and acts on its answer.
     *
     * @throws RuntimeException if it was not answered, or answered with an error
     */
    void settle();

    /**
     * {@return when the call that left it owed gave up (nanoTime), no earlier than the request's
     * send: a copy may arrive for a seal's time after it, so it is retried that long}
     */
    long sentAt();
  }

  /** Records {@code seal} as owed and starts settling it in the background. */
  void oweSeal(SealOwed seal) {
    if (!closed) {
      sealsOwed.add(seal);
      scheduleCleanup(0);
    }
  }

  private void scheduleCleanup(long delayMillis) {
    if (closed) {
      return;
    }
    try {
      scheduler.schedule(this::startCleanup, delayMillis, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      // closing
    }
  }

  private void startCleanup() {
    cleanupWanted.set(true);
    if (cleanupRunning.compareAndSet(false, true) && !runIo(this::cleanupRounds)) {
      cleanupRunning.set(false);
    }
  }

  /** Cleanup rounds until none is wanted; a round that left debts unsettled retries later. */
  private void cleanupRounds() {
    long retryMillis = -1;
    try {
      while (cleanupWanted.getAndSet(false)) {
        retryMillis = cleanupRound();
      }
    } finally {
      cleanupRunning.set(false);
    }
    if (cleanupWanted.get()) {
      startCleanup(); // wanted after the loop's last look, refused by this run's flag
    }
    if (retryMillis >= 0) {
      scheduleCleanup(retryMillis);
    }
  }

  /** {@return when to retry, in ms, or -1: every debt this round found was settled} */
  private long cleanupRound() {
    boolean again = false;
    boolean pastLease = true;
    try {
      // Seals first: a hold's debt on a node that does not answer costs a timeout, and a
      // copy of a force-unlock must not outrun its seal meanwhile.
      for (SealOwed seal : sealsOwed) {
        try {
          seal.settle();
          sealsOwed.remove(seal);
        } catch (RuntimeException e) {
          if (System.nanoTime() - seal.sentAt() - TimeUnit.MILLISECONDS.toNanos(sealMillis) < 0) {
            again = true; // a copy may still arrive: retried at the fast rate
            pastLease = false;
          } else {
            LOG.log(Level.WARNING, "Sealing " + seal + " failed for "
                + TimeUnit.MILLISECONDS.toSeconds(sealMillis) + " s, given up: "
                + e.getMessage());
            sealsOwed.remove(seal);
          }
        }
      }
      List<Hold> owing = new ArrayList<>();
      for (Hold h : holds.values()) {
        if (h.cleanup() != null) {
          owing.add(h);
        }
      }
      for (Hold h : owing) {
        for (Hold.Cleanup c = h.cleanup(); c != null; c = h.cleanup()) { // oldest first
          try {
            settle(h, c);
          } catch (RedisUnavailableException e) {
            // Past its lease, what the request did has expired, but its seal still matters: an
            // unsealed copy arriving late would apply to the thread's next hold. So it stays
            // owed (the thread's next acquisition settles it first) and is retried, less often.
            again = true;
            pastLease &= System.nanoTime() - c.leaseOverAt() > 0;
            break;
          } catch (RuntimeException e) {
            // Redis answered with an error (out of memory, a script killed…): the request
            // this settles may still arrive late, so it stays owed, retried at the past-lease
            // rate, for as long as its seal would live; only then is it given up.
            if (System.nanoTime() - c.leaseOverAt() - TimeUnit.MILLISECONDS.toNanos(sealMillis)
                < 0) {
              LOG.log(Level.DEBUG, () -> "Cleaning up " + h + " failed, retrying: "
                  + e.getMessage());
              again = true;
              break;
            }
            LOG.log(Level.WARNING, "Cleaning up " + h + " failed for "
                + TimeUnit.MILLISECONDS.toSeconds(sealMillis) + " s past its lease, given up: "
                + e.getMessage());
            h.settled(c);
            forgetIfDone(h);
          }
        }
      }
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "Unexpected error while settling lock requests", t);
    }
    return !again ? -1 : pastLease ? CLEANUP_PAST_LEASE_RETRY_MS : CLEANUP_RETRY_MS;
  }

  /**
   * Settles what {@code hold} owes now, on the calling thread (the holder, before it acquires the
   * lock again, or the cleanup task).
   *
   * @throws RedisUnavailableException if Redis does not answer
   */
  void settleNow(Hold hold) {
    for (Hold.Cleanup c = hold.cleanup(); c != null; c = hold.cleanup()) {
      settle(hold, c);
    }
  }

  private void settle(Hold hold, Hold.Cleanup c) {
    resolve(hold.names, hold.field, c.requestId(), c.expected(), c.kind(),
        RedisTopology.ATTEMPTS);
    hold.settled(c);
    forgetIfDone(hold);
  }

  /**
   * Runs {@link LockScripts#RESOLVE}.
   *
   * @param attempts how often to try: a caller that just failed to reach Redis tries once and
   *     leaves the rest to the background, so that a failing call does not take twice as long
   * @return {count, outcome}
   */
  List<?> resolve(LockNames names, String field, String requestId, int expected, String kind,
      int attempts) {
    // No WAIT: whatever a settling call undoes was never granted or is already reported lost,
    // and a copy of it that a failover forgets expires with its lease.
    List<String> args = new ArrayList<>(List.of(field, Integer.toString(expected), kind,
        topology.publishCommand(), names.channel(), Long.toString(sealMillis)));
    args.addAll(names.kind().extraArgs(this, names, field));
    List<String> keys = new ArrayList<>(List.of(names.key(), names.markerPrefix() + requestId));
    keys.addAll(names.kind().extraKeys(names));
    return (List<?>) topology.eval(names.kind().resolve(), keys, sealed -> args, false,
        attempts);
  }

  private void refreshMasterCheck() {
    try {
      topology.refreshMasterCheck(task -> {
        if (!runIo(task)) {
          throw new RejectedExecutionException("closing");
        }
      });
    } catch (Throwable t) { // a scheduled task that throws is never run again
      LOG.log(Level.DEBUG, "Renewing the master check failed", t);
    }
  }

  private void followTopology() {
    try {
      subscriptions.followTopology();
    } catch (Throwable t) {
      LOG.log(Level.DEBUG, "Subscriber topology check failed", t);
    }
  }

  private void pingSubscribers() {
    try {
      subscriptions.ping();
    } catch (Throwable t) {
      LOG.log(Level.DEBUG, "Subscriber ping failed", t);
    }
  }
}
