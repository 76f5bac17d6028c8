package dev.holdfast;

import dev.holdfast.cdi.TransactionGuard;
import dev.holdfast.engine.HoldCheck;
import jakarta.transaction.TransactionSynchronizationRegistry;
import java.util.Objects;

/**
 * Ties a lock to a JTA transaction: the transaction does not commit if the lock was lost before
 * it. {@code @Locked} methods get this on their own whenever their work runs in a transaction;
 * this class is for locks taken in code.
 *
 * <pre>{@code
 * try (LockHold hold = lock.acquire(Duration.ofSeconds(5), null)) {
 *   userTransaction.begin();
 *   CommitGuard.register(hold, CommitGuard.Check.LOCAL);
 *   ledger.post(entry);
 *   userTransaction.commit();   // RollbackException naming the lock if it was lost meanwhile
 * }
 * }</pre>
 *
 * <p>A registration adds an interposed {@link jakarta.transaction.Synchronization} to the
 * transaction active on the calling thread. In its {@code beforeCompletion}, after every
 * resource's work is done and before the transaction manager prepares them, the hold is checked
 * ({@link Check}); if it is no longer held the transaction is marked rollback-only and the commit
 * fails with the transaction manager's {@code RollbackException}, whose cause chain holds a
 * {@link LockLostException} naming the lock and why it was lost. A transaction that is rolled
 * back anyway is not checked.
 *
 * <p>Several registrations with one transaction share one synchronization, which checks every
 * hold in the order registered and fails at the first that is not held. A hold of a
 * {@link DistributedLock} is the registering thread's hold at the time of the registration: a
 * hold released and taken again later is another hold, and fails the check. A multi-lock needs
 * every member held, a RedLock a majority (as its own {@code isHeldByThread} counts).
 * {@code @Locked} methods are registered on their own (see {@link Locked}); registering their
 * lock again is harmless.
 *
 * <p>What it does not cover: a loss in Redis that {@link Check#LOCAL} cannot know of yet (use
 * {@link Check#REDIS}); a pause between the check and the resources' commit (a long GC, a slow
 * two-phase commit) during which the lease runs out; only a resource that checks
 * {@linkplain FencedLock fencing tokens} closes that window.
 *
 * <p>Thread-safety: the methods may be called from any thread that has a transaction; the
 * check runs on the thread that completes the transaction.
 */
public final class CommitGuard {
  /** How the hold is checked before the commit. */
  public enum Check {
    /**
     * Without I/O: the hold must not have been reported lost and must be within its local
     * deadline (the time its last confirmed lease is trusted for). A loss in Redis that no
     * renewal has noticed yet (another client's {@code forceUnlock} a moment ago) passes.
     */
    LOCAL,
    /**
     * {@link #LOCAL}, then one round trip that confirms the holder's entry in Redis, answered
     * within the local deadline; a hold found gone is reported lost ({@link LockLost}, once).
     * Blocks the committing thread for that round trip (at most the client's
     * {@code holdfast.redis.timeout}); a Redis that does not answer confirms nothing, so the
     * transaction rolls back (the hold itself is not declared lost for that).
     */
    REDIS
  }

  private CommitGuard() {
  }

  /**
   * Guards the transaction active on this thread with {@code hold}. The transaction
   * synchronization registry is looked up through CDI ({@code CDI.current()}), then JNDI
   * ({@code java:comp/TransactionSynchronizationRegistry}).
   *
   * @param hold  the hold the transaction relies on
   * @param check how to check it before the commit
   * @throws IllegalStateException if no transaction is active on this thread, or no registry
   *     can be found
   * @throws LockLostException if {@code hold} is already lost or released; the transaction is
   *     then marked rollback-only
   */
  public static void register(LockHold hold, Check check) {
    register(TransactionGuard.lookupRegistry(), hold, check);
  }

  /**
   * Guards the transaction active on this thread with this thread's hold of {@code lock} (any
   * kind, composites included), looking up the registry as {@link #register(LockHold, Check)}.
   *
   * @param lock  the lock whose hold by this thread the transaction relies on
   * @param check how to check it before the commit
   * @throws IllegalStateException if no transaction is active, or no registry can be found
   * @throws LockLostException if this thread does not hold {@code lock}; the transaction is then
   *     marked rollback-only
   */
  public static void register(DistributedLock lock, Check check) {
    register(TransactionGuard.lookupRegistry(), lock, check);
  }

  /**
   * {@link #register(LockHold, Check)} with the given registry: for plain Java with a
   * standalone transaction manager.
   *
   * @param registry the transaction manager's synchronization registry
   * @param hold     the hold the transaction relies on
   * @param check    how to check it before the commit
   * @throws IllegalStateException if no transaction is active on this thread
   * @throws LockLostException if {@code hold} is already lost or released
   */
  public static void register(TransactionSynchronizationRegistry registry, LockHold hold,
      Check check) {
    Objects.requireNonNull(hold, "hold");
    TransactionGuard.register(registry, HoldCheck.of(hold), redis(check));
  }

  /**
   * {@link #register(DistributedLock, Check)} with the given registry: for plain Java with a
   * standalone transaction manager.
   *
   * @param registry the transaction manager's synchronization registry
   * @param lock     the lock whose hold by this thread the transaction relies on
   * @param check    how to check it before the commit
   * @throws IllegalStateException if no transaction is active on this thread
   * @throws LockLostException if this thread does not hold {@code lock}
   */
  public static void register(TransactionSynchronizationRegistry registry, DistributedLock lock,
      Check check) {
    Objects.requireNonNull(lock, "lock");
    TransactionGuard.register(registry, HoldCheck.ofThread(lock), redis(check));
  }

  private static boolean redis(Check check) {
    return Objects.requireNonNull(check, "check") == Check.REDIS;
  }
}
