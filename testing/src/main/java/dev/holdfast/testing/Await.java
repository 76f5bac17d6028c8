package dev.holdfast.testing;

import java.time.Duration;
import java.util.Objects;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Polls a condition until it holds or a timeout passes; tests use it instead of sleeping.
 *
 * <p>The condition is evaluated on the calling thread, first immediately and then about every
 * {@value #POLL_MILLIS} ms. A condition that throws a {@link RuntimeException} (for example a
 * connection refused while a server is still starting) counts as "not yet"; the last such
 * exception becomes the cause of the timeout error. {@link Error}s, including failed assertions,
 * propagate at once.
 *
 * <p>Thread-safe (stateless).
 */
public final class Await {

  static final long POLL_MILLIS = 10;

  private Await() {
  }

  /**
   * Blocks until {@code condition} returns {@code true}.
   *
   * @param timeout     how long to keep polling; must be positive
   * @param condition   the condition to poll
   * @param description what is awaited, in words ("replica is connected"); used in the error
   * @throws AssertionError if the condition does not hold within {@code timeout}, or if the
   *                        thread is interrupted while waiting (the interrupt flag is restored)
   */
  public static void until(Duration timeout, BooleanSupplier condition, String description) {
    Objects.requireNonNull(condition, "condition");
    value(timeout, () -> condition.getAsBoolean() ? Boolean.TRUE : null, description);
  }

  /**
   * Blocks until {@code supplier} returns a non-null value, and returns it.
   *
   * @param timeout     how long to keep polling; must be positive
   * @param supplier    returns {@code null} while the value is not there yet
   * @param description what is awaited, in words; used in the error
   * @return the first non-null value
   * @throws AssertionError on timeout or interrupt, as for {@link #until}
   */
  public static <T> T value(Duration timeout, Supplier<T> supplier, String description) {
    Objects.requireNonNull(supplier, "supplier");
    Objects.requireNonNull(description, "description");
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive: " + timeout);
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    RuntimeException lastFailure = null;
    while (true) {
      try {
        T value = supplier.get();
        if (value != null) {
          return value;
        }
      } catch (RuntimeException e) {
        lastFailure = e;
      }
      long remainingNanos = deadline - System.nanoTime();
      if (remainingNanos <= 0) {
        throw new AssertionError("Timed out after " + timeout.toMillis() + " ms waiting until "
            + description, lastFailure);
      }
      try {
        Thread.sleep(Math.max(1, Math.min(POLL_MILLIS, remainingNanos / 1_000_000)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("Interrupted while waiting until " + description, e);
      }
    }
  }
}
