package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.engine.EngineAccess;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Everything the interceptor needs for one {@code @Locked} method, prepared once: the parsed
 * name, the wait (null: as long as it takes) and the lease (null: the watchdog). Immutable.
 *
 * <p>Locks are taken through the engine with the name's template, so that metrics and JFR events
 * count them by {@code inventory:{sku}}, not by each SKU.
 */
final class LockedOperation {
  private final String where;
  private final LockNameTemplate name;
  private final Duration waitTime;
  private final Duration leaseTime;
  private final String template;
  private final String spanName;

  LockedOperation(String where, LockNameTemplate name, Duration waitTime, Duration leaseTime) {
    this.where = where;
    this.name = name;
    this.waitTime = waitTime;
    this.leaseTime = leaseTime;
    this.template = name.toString();
    this.spanName = "lock.wait " + template;
  }

  /**
   * Acquires the lock for these arguments, as the annotation says.
   *
   * @return the held lock, to unlock after the method
   * @throws LockNotAcquiredException when the wait elapsed or the thread was interrupted
   */
  DistributedLock acquire(LockClient client, LockTracing tracing, Object[] args) {
    String lockName = name.render(args);
    DistributedLock lock = EngineAccess.engine(client).lock(lockName, template);
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
    boolean acquired;
    try {
      if (waitTime == null) {
        if (leaseTime == null) {
          lock.lock();
        } else {
          lock.lock(leaseTime.toMillis(), TimeUnit.MILLISECONDS);
        }
        acquired = true;
      } else if (leaseTime == null) {
        acquired = lock.tryLock(waitTime.toMillis(), TimeUnit.MILLISECONDS);
      } else {
        acquired = lock.tryLock(waitTime.toMillis(), leaseTime.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockNotAcquiredException(lockName, waitTime, e);
    }
    return acquired;
  }

  @Override
  public String toString() {
    return "@Locked(\"" + name + "\") on " + where + " [wait " + (waitTime == null ? "unbounded"
        : waitTime) + ", lease " + (leaseTime == null ? "watchdog" : leaseTime) + "]";
  }
}
