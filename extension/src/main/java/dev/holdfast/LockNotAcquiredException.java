package dev.holdfast;

import java.time.Duration;

/**
 * A {@link Locked} method did not run because its lock stayed held by someone else for the whole
 * {@link Locked#waitTime() wait}, or because the waiting thread was interrupted (then the
 * interrupt flag is set again and the cause is the {@link InterruptedException}).
 */
public class LockNotAcquiredException extends LockException {
  private static final long serialVersionUID = 1L;

  private final String lockName;
  private final Duration waitTime;

  public LockNotAcquiredException(String lockName, Duration waitTime, Throwable cause) {
    super("Lock '" + lockName + "' was not acquired within " + describe(waitTime)
        + (cause instanceof InterruptedException ? ": the waiting thread was interrupted" : ""),
        cause);
    this.lockName = lockName;
    this.waitTime = waitTime;
  }

  /** The resolved name of the lock that was not acquired. */
  public String lockName() {
    return lockName;
  }

  /** How long the caller waited at most; {@code null} when it would have waited forever. */
  public Duration waitTime() {
    return waitTime;
  }

  private static String describe(Duration wait) {
    return wait == null ? "an unbounded wait" : "the wait time of " + wait.toMillis() + "ms";
  }
}
