package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockHold;
import dev.holdfast.engine.EngineAccess;
import java.util.function.Consumer;

/**
 * What a loss does to the {@code @Locked} calls still running with {@code onLoss} other than
 * {@code NOTHING}. Each such call watches its own hold in the engine
 * ({@link EngineAccess#watchLoss}): a report of the loss of an earlier hold — of the same lock, on
 * the same thread, delivered late — never reaches a later call. Calls with {@code NOTHING} watch
 * nothing, so they cost nothing.
 *
 * <p>Thread-safe: calls start and end their watches on their own threads; actions run on the
 * client's event thread, after the {@link dev.holdfast.LockLost} listeners of that loss.
 */
final class LossActions {
  private LossActions() {
  }

  /**
   * Runs {@code action} with the reason if {@code hold} is lost before the returned watch is
   * closed ({@code onLoss = CANCEL}).
   */
  static Watch watch(LockHold hold, Consumer<String> action) {
    return EngineAccess.watchLoss(hold, action)::run;
  }

  /** A watched call; closing it ends the watch. */
  interface Watch extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * {@code INTERRUPT}: interrupts the calling thread when its hold of a lock is lost, and takes
   * that interrupt back when the call ends — only the one Holdfast set: a thread already
   * interrupted when the loss is reported is left as it is, and keeps its interrupt. A reentrant
   * call of the same lock on the same thread watches nothing: the outer call's watch covers the
   * hold, and takes the interrupt back when the outer call ends.
   */
  static final class Interruption implements Watch {
    private final Thread thread = Thread.currentThread();
    private final Runnable watch;
    /** Guarded by this. */
    private boolean ended;
    /** Holdfast interrupted the thread; guarded by this. */
    private boolean interrupted;

    /** Watches the calling thread's hold of {@code lock}, which it holds now. */
    Interruption(DistributedLock lock) {
      this.watch = EngineAccess.watchLoss(lock, reason -> interrupt());
    }

    private synchronized void interrupt() {
      if (!ended && !thread.isInterrupted()) {
        interrupted = true;
        thread.interrupt();
      }
    }

    /** The call ends, on its own thread: clears the interrupt Holdfast set, if it did. */
    @Override
    public void close() {
      watch.run();
      synchronized (this) {
        ended = true;
        if (interrupted) {
          Thread.interrupted();
        }
      }
    }
  }
}
