package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Everything the interceptor needs for one {@code @Locked} method, prepared once: the parsed
 * name, the wait (null: as long as it takes) and the lease (null: the watchdog). Immutable.
 */
final class LockedOperation {
  private final String where;
  private final LockNameTemplate name;
  private final Duration waitTime;
  private final Duration leaseTime;

  LockedOperation(String where, LockNameTemplate name, Duration waitTime, Duration leaseTime) {
    this.where = where;
    this.name = name;
    this.waitTime = waitTime;
    this.leaseTime = leaseTime;
  }

  /**
   * Acquires the lock for these arguments, as the annotation says.
   *
   * @return the held lock, to unlock after the method
   * @throws LockNotAcquiredException when the wait elapsed or the thread was interrupted
   */
  DistributedLock acquire(LockClient client, Object[] args) {
    String lockName = name.render(args);
    DistributedLock lock = client.getLock(lockName);
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

  @Override
  public String toString() {
    return "@Locked(\"" + name + "\") on " + where + " [wait " + (waitTime == null ? "unbounded"
        : waitTime) + ", lease " + (leaseTime == null ? "watchdog" : leaseTime) + "]";
  }
}
