package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import redis.clients.jedis.exceptions.JedisException;

/**
 * A {@link DistributedLock} handle: the lock's names and its engine, nothing else. All state lives
 * in Redis and in the engine's hold registry, so handles are interchangeable.
 */
final class RedisLock implements DistributedLock {
  /** Returned by {@link #tryAcquire} when the lock was acquired. */
  private static final long ACQUIRED = Long.MIN_VALUE;
  /** Park bound while our subscription is not confirmed: unlock messages might not reach us. */
  private static final long UNSUBSCRIBED_PARK_MS = 100;
  /** Park bound for a lock without expiry (not set by Holdfast or Redisson). */
  private static final long NO_EXPIRY_PARK_MS = 1_000;
  /** Retry interval while Redis cannot be reached during a wait. */
  private static final long OUTAGE_RETRY_MS = 200;
  private static final long WATCHDOG = -1;
  private static final long FOREVER = -1;

  private final LockEngine engine;
  private final LockNames names;
  private final List<String> keyList;

  RedisLock(LockEngine engine, LockNames names) {
    this.engine = engine;
    this.names = names;
    this.keyList = List.of(names.key());
  }

  @Override
  public String getName() {
    return names.name();
  }

  @Override
  public void lock() {
    acquireUninterruptibly(WATCHDOG);
  }

  @Override
  public void lock(long leaseTime, TimeUnit unit) {
    acquireUninterruptibly(leaseMillis(leaseTime, unit));
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(FOREVER, WATCHDOG, true);
  }

  @Override
  public void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException {
    acquire(FOREVER, leaseMillis(leaseTime, unit), true);
  }

  @Override
  public boolean tryLock() {
    return tryAcquire(Thread.currentThread().getId(), WATCHDOG) == ACQUIRED;
  }

  @Override
  public boolean tryLock(long waitTime, TimeUnit unit) throws InterruptedException {
    return acquire(waitNanos(waitTime, unit), WATCHDOG, true);
  }

  @Override
  public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit)
      throws InterruptedException {
    return acquire(waitNanos(waitTime, unit), leaseMillis(leaseTime, unit), true);
  }

  private void acquireUninterruptibly(long leaseMillis) {
    try {
      acquire(FOREVER, leaseMillis, false);
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquisition was interrupted", e);
    }
  }

  /**
   * The acquisition loop: try; if someone else holds the lock, join the lock's wait entry, try
   * again (the unlock may have come before we subscribed), then park until an unlock message,
   * the holder's lease or our deadline, whichever comes first, and retry.
   *
   * @param waitNanos {@link #FOREVER}, 0 for no waiting, else the most to wait
   */
  private boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    long threadId = Thread.currentThread().getId();
    long pttl = tryAcquire(threadId, leaseMillis);
    if (pttl == ACQUIRED) {
      return true;
    }
    if (waitNanos == 0) {
      return false;
    }
    long deadline = System.nanoTime() + waitNanos;
    WaitEntry entry = engine.subscriptions().join(names.channel());
    boolean acquired = false;
    boolean interrupted = false;
    try {
      long failingSince = 0;
      while (true) {
        try {
          pttl = tryAcquire(threadId, leaseMillis);
          failingSince = 0;
        } catch (LockException e) {
          // A waiter rides out a short outage (a restart, a failover) instead of failing; once
          // it lasts a whole watchdog timeout, every lock is presumed lost and so is the wait.
          long now = System.nanoTime();
          failingSince = failingSince == 0 ? now : failingSince;
          if (now - failingSince > TimeUnit.MILLISECONDS.toNanos(engine.watchdogMillis())) {
            throw e;
          }
          pttl = OUTAGE_RETRY_MS;
        }
        if (pttl == ACQUIRED) {
          acquired = true;
          return true;
        }
        long remaining = waitNanos == FOREVER ? Long.MAX_VALUE
            : TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime() + 999_999);
        if (remaining <= 0) {
          return false;
        }
        long park = Math.min(remaining, pttl >= 0 ? Math.max(1, pttl) : NO_EXPIRY_PARK_MS);
        if (!entry.subscribed()) {
          park = Math.min(park, UNSUBSCRIBED_PARK_MS);
        }
        try {
          entry.await(park);
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
        }
        if (engine.closed()) {
          throw new IllegalStateException("The lock client was closed while waiting for lock '"
              + names.name() + "'");
        }
      }
    } finally {
      engine.subscriptions().leave(entry, acquired);
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * One run of the acquire script.
   *
   * @return {@link #ACQUIRED}, or the holder's remaining lease in ms (-1: no expiry)
   */
  private long tryAcquire(long threadId, long leaseMillis) {
    checkOpen();
    Hold.Id id = new Hold.Id(names.key(), threadId);
    Hold known = engine.holds().get(id);
    int expected = known == null || known.lostReason() != null ? 0 : known.count();
    long lease = leaseMillis == WATCHDOG ? engine.watchdogMillis() : leaseMillis;
    String field = field(threadId);
    List<?> reply;
    try {
      reply = (List<?>) engine.topology().eval(LockScripts.ACQUIRE, keyList,
          List.of(Long.toString(lease), field, Integer.toString(expected)));
    } catch (LockException e) {
      undoUncertainAcquire(threadId, expected);
      throw e;
    }
    long value = ((Number) reply.get(1)).longValue();
    if (((Number) reply.get(0)).longValue() == 0) {
      return value;
    }
    int count = Math.toIntExact(value);
    engine.holds().compute(id, (key, hold) -> {
      Hold h = hold == null || hold.lostReason() != null
          ? new Hold(names, threadId, field) : hold;
      h.count(count);
      h.leased(lease);
      if (leaseMillis == WATCHDOG) {
        h.useWatchdog();
      }
      return h;
    });
    return ACQUIRED;
  }

  /**
   * The acquire failed without an answer, so it may still have run. Take back the hold it may
   * have added; the release script leaves the lock alone if it did not.
   */
  private void undoUncertainAcquire(long threadId, int expected) {
    try {
      release(threadId, expected + 1, engine.watchdogMillis());
    } catch (RuntimeException e) {
      // Redis is unreachable: a hold it may have added expires with its lease, and the next
      // acquisition by this thread recognises it by its count.
    }
  }

  @Override
  public void unlock() {
    checkOpen();
    long threadId = Thread.currentThread().getId();
    Hold.Id id = new Hold.Id(names.key(), threadId);
    Hold hold = engine.holds().get(id);
    int expected = hold == null ? 0 : hold.count();
    long lease = hold == null ? engine.watchdogMillis() : hold.leaseMillis();
    long left;
    if (hold != null) {
      hold.releasing(true);
    }
    try {
      left = release(threadId, expected, lease);
    } finally {
      if (hold != null) {
        hold.releasing(false);
      }
    }
    if (left > 0) {
      if (hold != null) {
        hold.count(Math.toIntExact(left));
      }
      return;
    }
    if (hold != null) {
      engine.holds().remove(id, hold);
    }
    if (left < 0) {
      throw notHeld(hold);
    }
  }

  private long release(long threadId, int expected, long lease) {
    Object reply = engine.topology().eval(LockScripts.RELEASE,
        List.of(names.key(), names.markerPrefix() + engine.nextRequestId()),
        List.of(field(threadId), Long.toString(lease), Integer.toString(expected),
            engine.topology().publishCommand(), Long.toString(engine.markerMillis()),
            names.channel()));
    return ((Number) reply).longValue();
  }

  private IllegalMonitorStateException notHeld(Hold hold) {
    String thread = "thread " + Thread.currentThread().getName() + " (id "
        + Thread.currentThread().getId() + ")";
    if (hold == null) {
      return new IllegalMonitorStateException(
          "Lock '" + names.name() + "' is not held by " + thread);
    }
    if (hold.lostReason() != null) {
      return new IllegalMonitorStateException("Lock '" + names.name() + "' was lost by " + thread
          + " before unlock: " + hold.lostReason());
    }
    return new IllegalMonitorStateException("Lock '" + names.name() + "' is no longer held by "
        + thread + ": its lease of " + hold.leaseMillis() + "ms expired or it was force-unlocked");
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("DistributedLock has no conditions");
  }

  @Override
  public boolean forceUnlock() {
    checkOpen();
    Object reply = engine.topology().eval(LockScripts.FORCE_RELEASE, keyList,
        List.of(engine.topology().publishCommand(), names.channel()));
    return ((Number) reply).longValue() == 1;
  }

  @Override
  public boolean isLocked() {
    return query(() -> engine.topology().commands().exists(names.key()));
  }

  @Override
  public boolean isHeldByCurrentThread() {
    return isHeldByThread(Thread.currentThread().getId());
  }

  @Override
  public boolean isHeldByThread(long threadId) {
    return query(() -> engine.topology().commands().hexists(names.key(), field(threadId)));
  }

  @Override
  public int getHoldCount() {
    String count = query(() -> engine.topology().commands()
        .hget(names.key(), field(Thread.currentThread().getId())));
    return count == null ? 0 : Integer.parseInt(count);
  }

  @Override
  public long remainTimeToLive() {
    return query(() -> engine.topology().commands().pttl(names.key()));
  }

  private <T> T query(java.util.function.Supplier<T> command) {
    checkOpen();
    try {
      return command.get();
    } catch (JedisException e) {
      throw new LockException("Redis query on lock '" + names.name() + "' failed: "
          + e.getMessage(), e);
    }
  }

  private String field(long threadId) {
    return engine.fieldOf(threadId);
  }

  private void checkOpen() {
    if (engine.closed()) {
      throw new IllegalStateException("The lock client is closed (lock '" + names.name() + "')");
    }
  }

  private static long leaseMillis(long leaseTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    if (leaseTime <= 0) {
      throw new IllegalArgumentException("leaseTime must be positive, but was " + leaseTime
          + " " + unit + "; use the methods without a lease for a watchdog-renewed lock");
    }
    return Math.max(1, unit.toMillis(leaseTime));
  }

  private static long waitNanos(long waitTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    return waitTime <= 0 ? 0 : unit.toNanos(waitTime);
  }

  @Override
  public String toString() {
    return "DistributedLock[" + names.name() + "]";
  }
}
