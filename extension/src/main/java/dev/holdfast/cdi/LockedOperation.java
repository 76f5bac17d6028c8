package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockNotAcquiredException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Everything the interceptor needs for one {@code @Locked} method, prepared once: the parsed
 * name, the wait (null: as long as it takes), the lease (null: the watchdog) and whether the
 * hold carries a fencing token. Immutable.
 */
final class LockedOperation {
  private final String where;
  private final LockNameTemplate name;
  private final Duration waitTime;
  private final Duration leaseTime;
  private final boolean fenced;

  LockedOperation(String where, LockNameTemplate name, Duration waitTime, Duration leaseTime,
      boolean fenced) {
    this.where = where;
    this.name = name;
    this.waitTime = waitTime;
    this.leaseTime = leaseTime;
    this.fenced = fenced;
  }

  /** Whether the method runs with its hold's {@link dev.holdfast.FencingToken}. */
  boolean fenced() {
    return fenced;
  }

  /**
   * Acquires the lock for these arguments, as the annotation says: through
   * {@link LockClient#getFencedLock} when the operation is fenced.
   *
   * @return the held lock, to unlock after the method
   * @throws LockNotAcquiredException when the wait elapsed or the thread was interrupted
   */
  DistributedLock acquire(LockClient client, Object[] args) {
    String lockName = name.render(args);
    DistributedLock lock = fenced ? client.getFencedLock(lockName) : client.getLock(lockName);
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
    if (!acquired) {
      throw new LockNotAcquiredException(lockName, waitTime, null);
    }
    return lock;
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
