package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * What to do if one {@link Hold} — that object, never a later hold of the same lock and owner —
 * is lost while someone relies on it: the {@code @Locked(onLoss = ...)} call that runs under it.
 * Tying the action to the hold rather than to a lock name and owner id is what keeps a late
 * report of an earlier hold from reaching a later call on the same thread.
 *
 * <p>A hold has at most one watch ({@link Hold#watch}); the engine fires it after the
 * {@code LockLost} listeners of that loss, on the client's event thread ({@link LockEngine#lose}),
 * or at once, on that thread too, for a hold that was lost before the watch was set
 * ({@link LockEngine#watchLoss}). The action runs at most once, and not after {@link #close()}
 * returned — unless it had started already.
 *
 * <p>Thread-safe.
 */
final class LossWatch {
  private static final System.Logger LOG = System.getLogger(LossWatch.class.getName());

  private final Consumer<String> action;
  private final AtomicBoolean fired = new AtomicBoolean();
  private volatile boolean closed;

  LossWatch(Consumer<String> action) {
    this.action = action;
  }

  /** The hold was lost for {@code reason}: runs the action, once, unless the watch ended. */
  void fire(String reason) {
    if (closed || !fired.compareAndSet(false, true)) {
      return;
    }
    try {
      action.accept(reason);
    } catch (Throwable t) {
      // On the event thread: a faulty action must not keep the next reports from their listeners.
      LOG.log(Level.ERROR, "The action on the loss of a hold failed", t);
    }
  }

  /** Nobody relies on the hold any more. */
  void close() {
    closed = true;
  }
}
