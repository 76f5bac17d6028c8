package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.engine.EngineAccess;
import dev.holdfast.engine.LockEngine;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Everything the interceptor needs for one {@code @Locked} method, prepared once: the parsed
 * name, the wait (null: as long as it takes), the lease (null: the watchdog) and whether the
 * hold carries a fencing token. Immutable.
 *
 * <p>Locks are taken through the engine with the name's template, so that metrics and JFR events
 * count them by {@code inventory:{sku}}, not by each SKU.
 */
final class LockedOperation {
  private final String where;
  private final LockNameTemplate name;
  private final Duration waitTime;
  private final Duration leaseTime;
  private final boolean fenced;
  private final String template;
  private final String spanName;

  LockedOperation(String where, LockNameTemplate name, Duration waitTime, Duration leaseTime,
      boolean fenced) {
    this.where = where;
    this.name = name;
    this.waitTime = waitTime;
    this.leaseTime = leaseTime;
    this.fenced = fenced;
    this.template = name.toString();
    this.spanName = "lock.wait " + template;
  }

  /** Whether the method runs with its hold's {@link dev.holdfast.FencingToken}. */
  boolean fenced() {
    return fenced;
  }

  /**
   * Acquires the lock for these arguments, as the annotation says: a fenced lock when the
   * operation is fenced; the wait is a span when tracing is on.
   *
   * @return the held lock, to unlock after the method
   * @throws LockNotAcquiredException when the wait elapsed or the thread was interrupted
   */
  DistributedLock acquire(LockClient client, LockTracing tracing, Object[] args) {
    String lockName = name.render(args);
    LockEngine engine = EngineAccess.engine(client);
    DistributedLock lock = fenced ? engine.fencedLock(lockName, template)
        : engine.lock(lockName, template);
    Object span = tracing.waitBegins(spanName, template, lockName);
    String outcome = "failed";
    Throwable failure = null;
    try {
      outcome = acquire(lock, lockName) ? "acquired" : "timed_out";
    } catch (LockNotAcquiredException e) {
      outcome = "interrupted";
      failure = e;
    } catch (RuntimeException | Error e) {
      failure = e;
    } finally {
      tracing.waitEnds(span, outcome, failure);
    }
    if (failure instanceof RuntimeException e) {
      throw e;
    } else if (failure instanceof Error e) {
      throw e;
    }
    if (!"acquired".equals(outcome)) {
      throw new LockNotAcquiredException(lockName, waitTime, null);
    }
    return lock;
  }

  /**
   * Acquires {@code lock} as the annotation says.
   *
   * @return whether it was acquired within the wait
   * @throws LockNotAcquiredException when the thread was interrupted
   */
  private boolean acquire(DistributedLock lock, String lockName) {
    try {
      if (waitTime == null) {
        if (leaseTime == null) {
          lock.lock();
        } else {
          lock.lock(leaseTime.toMillis(), TimeUnit.MILLISECONDS);
        }
        return true;
      } else if (leaseTime == null) {
        return lock.tryLock(waitTime.toMillis(), TimeUnit.MILLISECONDS);
      } else {
        return lock.tryLock(waitTime.toMillis(), leaseTime.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockNotAcquiredException(lockName, waitTime, e);
    }
  }

  /**
   * The fencing token of the hold {@link #acquire} just returned.
   *
   * @throws LockException if the hold has no token: it was acquired but is already lost (its
   *     lease ran out before the method could start, e.g. in a pause), so the method must not run
   */
  static long token(DistributedLock held) {
    Long token = ((FencedLock) held).getToken();
    if (token == null) {
      throw new LockException("Lock '" + held.getName() + "' was lost right after it was "
          + "acquired, before the @Locked(fenced = true) method could start (its lease ran out); "
          + "the method did not run");
    }
    return token;
  }

  @Override
  public String toString() {
    return "@Locked(\"" + name + "\"" + (fenced ? ", fenced" : "") + ") on " + where + " [wait "
        + (waitTime == null ? "unbounded" : waitTime) + ", lease "
        + (leaseTime == null ? "watchdog" : leaseTime) + "]";
  }
}
