package dev.holdfast.cdi;

import io.smallrye.mutiny.infrastructure.CallbackDecorator;
import java.util.concurrent.Callable;

/**
 * A Mutiny callback decorator standing in for Quarkus's context propagation in this module's
 * tests (registered through {@code META-INF/services}): a callable decorated on a thread whose
 * {@link #CALLER} is set runs with that value set, on whatever thread runs it, and leaves that
 * thread as it found it. Does nothing where {@link #CALLER} is not set, so other tests never see
 * it.
 */
public final class CallerContextDecorator implements CallbackDecorator {
  /** The "context" a test's calling thread has. */
  static final ThreadLocal<String> CALLER = new ThreadLocal<>();

  @Override
  public <V> Callable<V> decorate(Callable<V> callable) {
    return CALLER.get() == null ? callable : carry(CALLER, callable);
  }

  /**
   * {@return {@code callable}, run with {@code context} as this thread has it now (set, or not
   * set), on whatever thread runs it, leaving that thread's value as it found it}
   */
  static <V> Callable<V> carry(ThreadLocal<String> context, Callable<V> callable) {
    String captured = context.get();
    return () -> {
      String before = context.get();
      set(context, captured);
      try {
        return callable.call();
      } finally {
        set(context, before);
      }
    };
  }

  private static void set(ThreadLocal<String> context, String value) {
    if (value == null) {
      context.remove();
    } else {
      context.set(value);
    }
  }
}
