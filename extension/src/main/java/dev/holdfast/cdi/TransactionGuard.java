package dev.holdfast.cdi;

import dev.holdfast.LockLostException;
import dev.holdfast.engine.HoldCheck;
import jakarta.transaction.Status;
import jakarta.transaction.Synchronization;
import jakarta.transaction.TransactionSynchronizationRegistry;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.naming.NamingException;

/**
 * The commit guard: an interposed {@link Synchronization} of one JTA transaction that checks, in
 * {@code beforeCompletion}, every hold registered with it, and fails the commit when one is no
 * longer held. At most one per transaction (kept as a resource of the registry); holds are added
 * by {@link dev.holdfast.CommitGuard} and, for {@code @Locked} calls, when a transaction begins
 * inside them ({@link TransactionBegun}).
 *
 * <p><b>How a commit fails.</b> The synchronization marks the transaction rollback-only and
 * throws a {@link LockLostException} naming the lock and why. Both are needed: rollback-only
 * alone makes the transaction manager's {@code RollbackException} say only that the transaction
 * was marked, while the exception thrown from {@code beforeCompletion} is what it records as the
 * commit's cause (Narayana puts it in the cause chain of its {@code RollbackException}), and
 * rollback-only makes the rollback certain whatever the manager does with the exception.
 *
 * <p>Loaded only when the JTA API is on the class path ({@link OptionalApis}). Thread-safe:
 * holds are added on the transaction's thread, checked on the thread that completes it. A
 * public class for {@code dev.holdfast.CommitGuard}; not API.
 */
public final class TransactionGuard implements Synchronization {
  /** This guard's key among the transaction's resources. */
  private static final Object KEY = TransactionGuard.class.getName() + ".guard";
  /** Where Jakarta EE servers bind the registry. */
  static final String REGISTRY_JNDI_NAME = "java:comp/TransactionSynchronizationRegistry";

  private final TransactionSynchronizationRegistry registry;
  private final List<Guarded> holds = new CopyOnWriteArrayList<>();

  /**
   * A hold to check, and, for a {@code @Locked} call, the call (so that a call is guarded once).
   * A call's hold is checked {@linkplain HoldCheck#ofLockedCall until its release}: a transaction
   * completed after the call passes if the call released the hold, and fails if it was lost.
   */
  private record Guarded(HoldCheck hold, boolean inRedis, LockedCalls.Running call) {
  }

  private TransactionGuard(TransactionSynchronizationRegistry registry) {
    this.registry = registry;
  }

  /**
   * Guards the transaction active on this thread with {@code hold}: it must pass the local check
   * now, and passes {@code beforeCompletion}'s check (with a round trip when {@code inRedis}),
   * or the transaction does not commit.
   *
   * @throws IllegalStateException if no transaction is active on this thread
   * @throws LockLostException if {@code hold} fails the local check now; the transaction is
   *     then marked rollback-only
   */
  public static void register(TransactionSynchronizationRegistry registry, HoldCheck hold,
      boolean inRedis) {
    Objects.requireNonNull(registry, "registry");
    Objects.requireNonNull(hold, "hold");
    TransactionGuard guard = of(registry, true);
    String reason = hold.verify(false);
    if (reason != null) {
      throw guard.fail(hold, reason);
    }
    guard.holds.add(new Guarded(hold, inRedis, null));
  }

  /**
   * A transaction began on this thread: guards it with the holds of the {@code @Locked} calls
   * running on the thread, if any.
   */
  static void guardRunningCalls(TransactionSynchronizationRegistry registry) {
    List<LockedCalls.Running> calls = LockedCalls.running();
    if (calls.isEmpty()) {
      return;
    }
    TransactionGuard guard = of(registry, false);
    if (guard == null) {
      return;
    }
    for (LockedCalls.Running call : calls) {
      if (guard.holds.stream().noneMatch(g -> g.call() == call)) {
        guard.holds.add(new Guarded(call.check(), call.operation.verifyInRedis(), call));
      }
    }
  }

  /**
   * The guard of the transaction active on this thread, registered now if it has none.
   *
   * @return null when no transaction is active and {@code required} is false
   * @throws IllegalStateException when no transaction is active and {@code required} is true
   */
  private static TransactionGuard of(TransactionSynchronizationRegistry registry,
      boolean required) {
    int status = registry.getTransactionStatus();
    if (status != Status.STATUS_ACTIVE && status != Status.STATUS_MARKED_ROLLBACK) {
      if (required) {
        throw new IllegalStateException("No transaction is active on this thread (status "
            + status + "): the commit guard needs one to guard");
      }
      return null;
    }
    TransactionGuard guard = (TransactionGuard) registry.getResource(KEY);
    if (guard == null) {
      guard = new TransactionGuard(registry);
      registry.registerInterposedSynchronization(guard);
      registry.putResource(KEY, guard);
    }
    return guard;
  }

  /**
   * The registry of the application's transaction manager: the CDI bean, else JNDI's
   * {@value #REGISTRY_JNDI_NAME}.
   *
   * @throws IllegalStateException if there is neither
   */
  public static TransactionSynchronizationRegistry lookupRegistry() {
    try {
      return OptionalApis.containerResource(TransactionSynchronizationRegistry.class,
          REGISTRY_JNDI_NAME);
    } catch (NamingException | RuntimeException e) {
      throw new IllegalStateException("No transaction synchronization registry was found: no CDI "
          + "bean of TransactionSynchronizationRegistry, and JNDI has no " + REGISTRY_JNDI_NAME
          + " (" + e + "); pass the transaction manager's registry to "
          + "CommitGuard.register(registry, ...)", e);
    }
  }


  @Override
  public void beforeCompletion() {
    if (registry.getTransactionStatus() == Status.STATUS_MARKED_ROLLBACK) {
      return; // rolled back anyway
    }
    for (Guarded guarded : holds) {
      String reason = guarded.hold().verify(guarded.inRedis());
      if (reason != null) {
        throw fail(guarded.hold(), reason);
      }
    }
  }

  /** Marks the transaction rollback-only; the exception says why, for the commit's caller. */
  private LockLostException fail(HoldCheck hold, String reason) {
    LockLostException lost = new LockLostException(hold.lockName(), "The transaction must not "
        + "commit: lock '" + hold.lockName() + "' " + reason);
    try {
      registry.setRollbackOnly();
    } catch (RuntimeException e) {
      lost.addSuppressed(e);
    }
    return lost;
  }

  @Override
  public void afterCompletion(int status) {
    // nothing: the holds belong to their callers
  }
}
