package dev.holdfast;

import java.time.Duration;

/**
 * A {@link Locked} method, or the action of {@link LockClient#executeInLock(String,
 * java.time.Duration, java.time.Duration, java.util.function.Supplier) executeInLock}, did not run
 * because its lock stayed held by someone else for the whole {@link Locked#waitTime() wait}, or
 * because the waiting thread was interrupted (then the interrupt flag is set again and the cause
 * is the {@link InterruptedException}).
 */
public class LockNotAcquiredException extends LockException {
  private static final long serialVersionUID = 1L;

  /** The resolved lock name. */
  private final String lockName;
  /** The bound on the wait; {@code null} for an unbounded one. */
  private final Duration waitTime;

  /**
   * Reports that the lock {@code lockName} was not acquired.
   *
   * @param lockName the resolved lock name
   * @param waitTime the bound on the wait; {@code null} for an unbounded one
   * @param cause the {@link InterruptedException} if the waiting thread was interrupted, else
   *     {@code null}
   */
  public LockNotAcquiredException(String lockName, Duration waitTime, Throwable cause) {
    super("Lock '" + lockName + "' was not acquired within " + describe(waitTime)
        + (cause instanceof InterruptedException ? ": the waiting thread was interrupted" : ""),
        cause);
    this.lockName = lockName;
    this.waitTime = waitTime;
  }

  /** {@return the resolved name of the lock that was not acquired} */
  public String lockName() {
    return lockName;
  }

  /** {@return how long the caller waited at most; {@code null} when it would have waited forever} */
  public Duration waitTime() {
    return waitTime;
  }

  private static String describe(Duration wait) {
    return wait == null ? "an unbounded wait" : "the wait time of " + wait.toMillis() + "ms";
  }
}
