package dev.holdfast;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;
import java.util.concurrent.Callable;

/**
 * The fencing token of the {@code @Locked(fenced = true)} method running on this thread, so
 * that the method can hand it to the resource it protects without naming the lock again:
 *
 * <pre>{@code
 * @Locked(value = "inventory:{sku}", fenced = true)
 * public void reserve(String sku, int qty) {
 *   stock.write(sku, qty, FencingToken.current());   // the store refuses lower tokens
 * }
 * }</pre>
 *
 * <p>Nested fenced methods see their own token; when one returns, the caller's is current again.
 * Thread-confined: a task handed to another thread does not see it.
 */
public final class FencingToken {
  private static final ThreadLocal<Deque<Long>> TOKENS = ThreadLocal.withInitial(ArrayDeque::new);

  private FencingToken() {
  }

  /**
   * {@return the token of the innermost fenced {@code @Locked} method running on this thread}
   *
   * @throws IllegalStateException if none is running (the method is not
   *     {@code @Locked(fenced = true)}, or this is another thread)
   */
  public static long current() {
    Long token = TOKENS.get().peek();
    if (token == null) {
      throw new IllegalStateException("No fencing token on thread "
          + Thread.currentThread().getName() + ": FencingToken.current() works inside a "
          + "@Locked(fenced = true) method, on the thread that runs it");
    }
    return token;
  }

  /**
   * Runs {@code action} with {@code token} as the {@linkplain #current() current token}; the
   * {@code @Locked} interceptor does this, and so can code that takes a {@link FencedLock} by hand.
   *
   * @param <T> the action's result type
   * @param token the token of the hold the action runs under
   * @param action what to run
   * @return the action's result
   * @throws Exception whatever the action throws
   */
  public static <T> T callWith(long token, Callable<T> action) throws Exception {
    Objects.requireNonNull(action, "action");
    Deque<Long> tokens = TOKENS.get();
    tokens.push(token);
    try {
      return action.call();
    } finally {
      tokens.pop();
      if (tokens.isEmpty()) {
        TOKENS.remove();
      }
    }
  }
}
