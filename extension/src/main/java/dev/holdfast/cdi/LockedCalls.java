package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockHold;
import dev.holdfast.engine.HoldCheck;
import java.util.ArrayList;
import java.util.List;

/**
 * The {@code @Locked} calls running on each thread, innermost first: what the commit guard
 * checks when a transaction begins inside them ({@link TransactionGuard}). A blocking call is
 * on its thread's list while its method runs; an asynchronous one while its method runs and
 * returns its result: the transaction of such a method that is {@code @Transactional} begins
 * there, and commits when the method returns (Narayana's CDI interceptors) or when its result
 * completes (Quarkus) — before the call's release either way. Tracked only when the JTA API is
 * on the class path; without it {@link #enter} does nothing and returns {@code null}, so a call
 * costs one branch.
 *
 * <p>Each thread sees only its own calls. What a transaction relies on is the call's hold, not
 * the call: the guard keeps a {@link HoldCheck#ofLockedCall} of it, which passes once the call
 * released the hold and fails if it was lost first, however late the transaction completes.
 */
final class LockedCalls {
  /** Whether transactions can exist at all here. */
  static final boolean TRACKED = OptionalApis.present(OptionalApis.TRANSACTION_REGISTRY);

  private static final ThreadLocal<Running> INNERMOST = new ThreadLocal<>();

  private LockedCalls() {
  }

  /** A locked call that is running: its hold (one of the two is set) and operation. */
  static final class Running {
    /** A blocking call's lock, held by the running thread; or null. */
    private final DistributedLock lock;
    /** An asynchronous call's hold; or null. */
    private final LockHold hold;
    final LockedOperation operation;
    private final Running outer;

    private Running(DistributedLock lock, LockHold hold, LockedOperation operation,
        Running outer) {
      this.lock = lock;
      this.hold = hold;
      this.operation = operation;
      this.outer = outer;
    }

    /** The check of this call's hold, for a transaction begun now on the call's thread. */
    HoldCheck check() {
      return hold != null ? HoldCheck.ofLockedCall(hold) : HoldCheck.ofLockedCall(lock);
    }
  }

  /**
   * The calling thread starts a blocking call that holds {@code lock}.
   *
   * @return the call, to {@link #exit} when it ends; null when nothing is tracked
   */
  static Running enter(DistributedLock lock, LockedOperation operation) {
    return TRACKED ? push(lock, null, operation) : null;
  }

  /**
   * The calling thread runs the method of an asynchronous call that holds {@code hold}.
   *
   * @return the call, to {@link #exit} when the method has returned; null when nothing is
   *     tracked
   */
  static Running enter(LockHold hold, LockedOperation operation) {
    return TRACKED ? push(null, hold, operation) : null;
  }

  private static Running push(DistributedLock lock, LockHold hold, LockedOperation operation) {
    Running call = new Running(lock, hold, operation, INNERMOST.get());
    INNERMOST.set(call);
    return call;
  }

  /** The call {@link #enter} returned leaves the thread (before its hold is released). */
  static void exit(Running call) {
    if (call == null) {
      return;
    }
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
