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
    String captured = CALLER.get();
    if (captured == null) {
      return callable;
    }
    return () -> {
      String before = CALLER.get();
      CALLER.set(captured);
      try {
        return callable.call();
      } finally {
        if (before == null) {
          CALLER.remove();
        } else {
          CALLER.set(before);
        }
      }
    };
  }
}
