package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import java.util.ArrayList;
import java.util.List;

/**
 * The blocking {@code @Locked} calls running on each thread, innermost first: what the commit
 * guard checks when a transaction begins inside them ({@link TransactionGuard}). Tracked only
 * when the JTA API is on the class path; without it {@link #enter} does nothing and returns
 * {@code null}, so a call costs one branch.
 *
 * <p>Each thread sees only its own calls; a {@link Running} call's {@link Running#ended} flag is
 * read by the thread that completes a transaction, which may be another.
 */
final class LockedCalls {
  /** Whether transactions can exist at all here. */
  static final boolean TRACKED = OptionalApis.present(OptionalApis.TRANSACTION_REGISTRY);

  private static final ThreadLocal<Running> INNERMOST = new ThreadLocal<>();

  private LockedCalls() {
  }

  /** A locked call that is running: its lock (held by the running thread) and operation. */
  static final class Running {
    final DistributedLock lock;
    final LockedOperation operation;
    private final Running outer;
    /** The call returned: its lock is no longer its to check. */
    volatile boolean ended;

    private Running(DistributedLock lock, LockedOperation operation, Running outer) {
      this.lock = lock;
      this.operation = operation;
      this.outer = outer;
    }
  }

  /**
   * The calling thread starts a call that holds {@code lock}.
   *
   * @return the call, to {@link #exit} when it ends; null when nothing is tracked
   */
  static Running enter(DistributedLock lock, LockedOperation operation) {
    if (!TRACKED) {
      return null;
    }
    Running call = new Running(lock, operation, INNERMOST.get());
    INNERMOST.set(call);
    return call;
  }

  /** The call {@link #enter} returned ends (before its lock is released). */
  static void exit(Running call) {
    if (call == null) {
      return;
    }
    call.ended = true;
    if (call.outer == null) {
      INNERMOST.remove();
    } else {
      INNERMOST.set(call.outer);
    }
  }

  /** {@return whether a call is running on the calling thread} */
  static boolean anyRunning() {
    return INNERMOST.get() != null;
  }

  /** {@return the calling thread's running calls, innermost first; empty if none} */
  static List<Running> running() {
    Running call = INNERMOST.get();
    if (call == null) {
      return List.of();
    }
    List<Running> calls = new ArrayList<>();
    for (; call != null; call = call.outer) {
      calls.add(call);
    }
    return calls;
  }
}
