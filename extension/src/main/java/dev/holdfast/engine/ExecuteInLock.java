package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockNotAcquiredException;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * {@code LockClient#executeInLock}: acquire, run, release — with any {@link DistributedLock}.
 * Stateless.
 */
final class ExecuteInLock {

  private ExecuteInLock() {
  }

  /**
   * Runs {@code action} holding {@code lock}.
   *
   * @param waitTime {@code null}: wait as long as it takes; zero or negative: try once
   * @param leaseTime {@code null}: the watchdog; else a positive lease
   * @throws IllegalArgumentException naming {@code leaseTime} if it is not positive or too long
   * @throws dev.holdfast.LockNotAcquiredException if the wait elapsed or the thread was
   *     interrupted while waiting (its flag is then set again)
   */
  static <T> T run(DistributedLock lock, Duration waitTime, Duration leaseTime,
      Supplier<T> action) {
    Objects.requireNonNull(lock, "lock");
    Objects.requireNonNull(action, "action");
    long leaseMillis = leaseTime == null ? LockGroup.NONE : leaseMillis(leaseTime);
    boolean acquired;
    try {
      if (waitTime == null) {
        LockGroup.acquire(lock, LockGroup.NONE, leaseMillis);
        acquired = true;
      } else {
        acquired = LockGroup.acquire(lock, waitNanos(waitTime), leaseMillis);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockNotAcquiredException(lock.getName(), waitTime, e);
    }
    if (!acquired) {
      throw new LockNotAcquiredException(lock.getName(), waitTime, null);
    }
    T result;
    try {
      result = action.get();
    } catch (Throwable t) {
      // The action's failure is what the caller needs; a failing release only adds to it.
      try {
        lock.unlock();
      } catch (Throwable releaseFailure) {
        t.addSuppressed(releaseFailure);
      }
      throw t;
    }
    lock.unlock();
    return result;
  }

  private static long leaseMillis(Duration leaseTime) {
    if (leaseTime.isNegative() || leaseTime.isZero()) {
      throw new IllegalArgumentException("leaseTime must be positive (or null for the watchdog), "
          + "but was " + leaseTime);
    }
    if (leaseTime.compareTo(Duration.ofMillis(RedisLock.MAX_LEASE_MILLIS)) > 0) {
      throw new IllegalArgumentException("leaseTime must be at most 365 days, but was "
          + leaseTime);
    }
    long millis = leaseTime.toMillis();
    return Duration.ofMillis(millis).compareTo(leaseTime) < 0 ? millis + 1 : millis;
  }

  private static long waitNanos(Duration waitTime) {
    return waitTime.isNegative() || waitTime.isZero() ? 0 : saturatedNanos(waitTime);
  }

  private static long saturatedNanos(Duration d) {
    try {
      return d.toNanos();
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }
}
