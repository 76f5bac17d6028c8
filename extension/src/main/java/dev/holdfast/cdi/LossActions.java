package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * What a loss does to the {@code @Locked} calls still running with {@code onLoss} other than
 * {@code NOTHING}: one {@link LockClient#onLockLost} listener per client matches each report
 * (lock name and owner: the thread's id, or a {@code LockHold}'s owner id) against the calls
 * watched here and runs the call's action. Calls with {@code NOTHING} are never registered, so
 * they cost nothing.
 *
 * <p>Thread-safe: calls register and leave on their own threads; actions run on the client's
 * event thread.
 */
final class LossActions {
  /** Per client, weakly: a closed, forgotten client takes its entry with it. */
  private static final Map<LockClient, LossActions> BY_CLIENT =
      Collections.synchronizedMap(new WeakHashMap<>());

  private final Map<Key, Consumer<LockLost>> watched = new ConcurrentHashMap<>();

  private record Key(String lockName, long ownerId) {
  }

  private LossActions() {
  }

  /** The actions of {@code client}'s locks; the first call registers the listener. */
  static LossActions of(LockClient client) {
    synchronized (BY_CLIENT) {
      LossActions actions = BY_CLIENT.get(client);
      if (actions == null) {
        actions = new LossActions();
        client.onLockLost(actions::lost);
        BY_CLIENT.put(client, actions);
      }
      return actions;
    }
  }

  /**
   * Runs {@code action} if the hold of {@code lockName} by {@code ownerId} is reported lost
   * before {@link Watch#close()}. A hold watched already (a reentrant call of the same lock on
   * the same thread) keeps its first action: the returned watch then does nothing.
   */
  Watch watch(String lockName, long ownerId, Consumer<LockLost> action) {
    Key key = new Key(lockName, ownerId);
    if (watched.putIfAbsent(key, action) != null) {
      return () -> { };
    }
    return () -> watched.remove(key, action);
  }

  private void lost(LockLost event) {
    Consumer<LockLost> action = watched.get(new Key(event.lockName(), event.threadId()));
    if (action != null) {
      action.accept(event);
    }
  }

  /** A watched call; closing it ends the watch. */
  interface Watch extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * {@code INTERRUPT}: interrupts the calling thread when its hold is lost, and takes that
   * interrupt back when the call ends — only the one Holdfast set: a thread already interrupted
   * when the loss is reported is left as it is, and keeps its interrupt.
   */
  static final class Interruption implements Watch {
    private final Thread thread = Thread.currentThread();
    private final Watch watch;
    /** Guarded by this. */
    private boolean ended;
    /** Holdfast interrupted the thread; guarded by this. */
    private boolean interrupted;

    /** Watches the calling thread's hold of {@code lockName}. */
    Interruption(LossActions actions, String lockName) {
      this.watch = actions.watch(lockName, thread.getId(), lost -> interrupt());
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
      watch.close();
      synchronized (this) {
        ended = true;
        if (interrupted) {
          Thread.interrupted();
        }
      }
    }
  }
}
