package dev.holdfast.example.stock;

import dev.holdfast.LockClient;
import dev.holdfast.LockLostException;
import dev.holdfast.Locked;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.transaction.HeuristicMixedException;
import jakarta.transaction.HeuristicRollbackException;
import jakarta.transaction.NotSupportedException;
import jakarta.transaction.RollbackException;
import jakarta.transaction.Status;
import jakarta.transaction.Synchronization;
import jakarta.transaction.SystemException;
import jakarta.transaction.TransactionSynchronizationRegistry;
import jakarta.transaction.Transactional;
import jakarta.transaction.UserTransaction;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Accounts whose entries are posted in JTA transactions under the account's lock: the commit
 * guard's demo. An entry reaches the ledger only when its transaction commits (a
 * {@link Synchronization} applies it in {@code afterCompletion(STATUS_COMMITTED)}), so a
 * transaction rolled back because the lock was lost leaves no trace but the rollback count.
 *
 * <p>A posting can hold still between recording its entry and committing: for up to
 * {@code holdMillis}, or until {@link #endHold} — a window in which a test takes the lock away.
 * {@link #postAsync} holds still without a thread: its result completes when the hold ends.
 *
 * <p>Thread-safe; the committed ledger lives in this process (a database would take part in the
 * transaction the same way, as an XA or last resource).
 */
@ApplicationScoped
public class Ledger {
  /** The longest {@code holdMillis} a posting accepts. */
  static final long MAX_HOLD_MILLIS = 30_000;

  private static final AtomicLong IDS = new AtomicLong();

  private final Map<String, Account> accounts = new ConcurrentHashMap<>();
  private final Map<String, CompletableFuture<Void>> holds = new ConcurrentHashMap<>();
  private volatile Thread lastInterrupted;

  @Inject
  TransactionSynchronizationRegistry transactions;

  @Inject
  UserTransaction userTransaction;

  @Inject
  LockClient locks;

  /**
   * Posts {@code amount} to {@code account} under its lock, in a transaction begun inside the
   * lock ({@code @Locked} runs outside {@code @Transactional}). The lock is kept alive by the
   * watchdog; before the commit Holdfast checks locally that no renewal found it lost.
   *
   * @return the entry, committed once this method has returned
   * @throws RuntimeException if the lock was lost before the commit: the transaction manager's
   *     {@code RollbackException} (as the {@code @Transactional} interceptor passes it on), whose
   *     cause chain holds a {@link LockLostException} naming the lock and why
   */
  @Locked("ledger:{account}")
  @Transactional
  public Entry post(String account, long amount, long holdMillis) {
    return record(account, amount, holdMillis);
  }

  /**
   * {@link #post} with a fixed 30 s lease and {@code verify-before-commit=redis} (configured for
   * this method in {@code application.properties}): no renewal runs, so a lock taken away
   * meanwhile is found only by the round trip to Redis just before the commit.
   */
  @Locked(value = "ledger:{account}", leaseTime = "30s")
  @Transactional
  public Entry postVerified(String account, long amount, long holdMillis) {
    return record(account, amount, holdMillis);
  }

  /**
   * {@link #post} in a transaction this method begins and commits itself
   * ({@link UserTransaction}), inside the lock. Quarkus announces the transaction to CDI
   * ({@code @Initialized(TransactionScoped.class)}), so {@code @Locked} guards its commit as it
   * guards a {@code @Transactional} one, with nothing to add here.
   *
   * @throws LedgerTransactionException if the transaction could not begin or commit; if it was
   *     rolled back because the lock was lost, its cause chain holds a
   *     {@link LockLostException}
   */
  @Locked("ledger:{account}")
  public Entry postInOwnTransaction(String account, long amount, long holdMillis) {
    try {
      userTransaction.begin();
    } catch (NotSupportedException | SystemException e) {
      throw new LedgerTransactionException("Cannot begin a transaction for " + account, e);
    }
    Entry entry;
    try {
      entry = record(account, amount, holdMillis);
    } catch (RuntimeException | Error e) {
      rollback(account, e);
      throw e;
    }
    try {
      userTransaction.commit();
    } catch (RollbackException | HeuristicMixedException | HeuristicRollbackException
        | SystemException e) {
      throw new LedgerTransactionException("The posting to " + account + " did not commit", e);
    }
    return entry;
  }

  /**
   * {@link #post} that stops once the lock is lost: Holdfast interrupts the thread
   * ({@code onLoss = INTERRUPT}), the hold throws a {@link LockLostException}, the transaction
   * rolls back, and Holdfast takes its interrupt back before the thread returns to the
   * container's pool ({@link #lastInterrupted()} shows it).
   */
  @Locked(value = "ledger:{account}", onLoss = Locked.OnLoss.INTERRUPT)
  @Transactional
  public Entry postInterruptible(String account, long amount, long holdMillis) {
    return record(account, amount, holdMillis);
  }

  /**
   * {@link #post} whose work ends later: the entry is recorded while the method runs, and the
   * {@code Uni} it returns has its item once the hold ends, on the thread that ends it (no thread
   * waits meanwhile). Quarkus's {@code @Transactional} commits a {@code Uni} method's transaction
   * when the {@code Uni} completes, not when the method returns; {@code @Locked} releases after
   * that, so the commit guard checks the lock at the commit, however long after the return.
   *
   * @return the entry, committed once the {@code Uni} has its item
   * @throws RuntimeException (as the {@code Uni}'s failure) if the lock was lost before the
   *     commit: the transaction manager's {@code RollbackException}, whose cause chain holds a
   *     {@link LockLostException} naming the lock and why
   */
  @Locked("ledger:{account}")
  @Transactional
  public Uni<Entry> postAsync(String account, long amount, long holdMillis) {
    Entry entry = recordOnCommit(account, amount);
    return Uni.createFrom().completionStage(holdAsync(account, holdMillis)).replaceWith(entry);
  }

  /** {@return whether a posting to {@code account} is holding still now} */
  public boolean holding(String account) {
    CompletableFuture<Void> hold = holds.get(account);
    return hold != null && !hold.isDone();
  }

  /**
   * {@return the thread whose hold was last interrupted, and whether an interrupt is pending on
   * it now}; empty if none was
   */
  public Optional<InterruptedThread> lastInterrupted() {
    Thread thread = lastInterrupted;
    return thread == null ? Optional.empty()
        : Optional.of(new InterruptedThread(thread.getName(), thread.isInterrupted()));
  }

  /** Ends the hold of the posting to {@code account} now or the next one to hold. */
  public void endHold(String account) {
    holdOf(account).complete(null);
  }

  /** {@return what was committed to {@code account}, and how many postings rolled back} */
  public Statement statement(String account) {
    Account a = accounts.get(account);
    return a == null ? new Statement(account, 0, List.of(), 0)
        : new Statement(account, a.balance(), List.copyOf(a.entries), a.rolledBack.get());
  }

  private Entry record(String account, long amount, long holdMillis) {
    Entry entry = recordOnCommit(account, amount);
    hold(account, holdMillis);
    return entry;
  }

  /** A new entry, applied to {@code account} if the transaction active now commits. */
  private Entry recordOnCommit(String account, long amount) {
    Entry entry = new Entry(IDS.incrementAndGet(), amount);
    transactions.registerInterposedSynchronization(new ApplyOnCommit(account, entry));
    return entry;
  }

  private void rollback(String account, Throwable failure) {
    try {
      userTransaction.rollback();
    } catch (SystemException | RuntimeException e) {
      failure.addSuppressed(new LedgerTransactionException(
          "Cannot roll back the posting to " + account, e));
    }
  }

  private void hold(String account, long holdMillis) {
    if (holdMillis <= 0) {
      return;
    }
    CompletableFuture<Void> hold = holdOf(account);
    try {
      hold.get(holdMillis, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      // held still for holdMillis: the posting goes on
    } catch (ExecutionException e) {
      throw new IllegalStateException("A hold is only ever completed normally", e);
    } catch (InterruptedException e) {
      lastInterrupted = Thread.currentThread();
      Thread.currentThread().interrupt(); // for whoever interrupted: Holdfast takes back its own
      throw interrupted(account, e);
    } finally {
      holds.remove(account, hold);
    }
  }

  /** A hold that ends after {@code holdMillis}, or at {@link #endHold}. */
  private CompletableFuture<Void> holdAsync(String account, long holdMillis) {
    if (holdMillis <= 0) {
      return CompletableFuture.completedFuture(null);
    }
    CompletableFuture<Void> hold = holdOf(account);
    hold.completeOnTimeout(null, holdMillis, TimeUnit.MILLISECONDS)
        .whenComplete((ignored, failure) -> holds.remove(account, hold));
    return hold;
  }

  /** The hold of the posting to {@code account} now, or of the next one to hold. */
  private CompletableFuture<Void> holdOf(String account) {
    return holds.computeIfAbsent(account, a -> new CompletableFuture<>());
  }

  /**
   * The failure for a hold interrupted by {@code e}: a {@link LockLostException} if the lock was
   * lost (the interrupt of {@code onLoss = INTERRUPT}), else an {@link IllegalStateException}.
   */
  private RuntimeException interrupted(String account, InterruptedException e) {
    String lockName = "ledger:" + account; // the name @Locked renders
    RuntimeException failure = locks.getLock(lockName).isHeldByCurrentThread()
        ? new IllegalStateException("Interrupted while holding a posting to " + account)
        : new LockLostException(lockName, "Lock '" + lockName + "' was lost while posting to "
            + account + ": the posting stopped");
    failure.initCause(e);
    return failure;
  }

  private Account account(String name) {
    return accounts.computeIfAbsent(name, n -> new Account());
  }

  /** A transaction of {@link #postInOwnTransaction} that did not begin or commit. */
  public static final class LedgerTransactionException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    LedgerTransactionException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** A thread whose hold was interrupted, and whether an interrupt is pending on it. */
  public record InterruptedThread(String name, boolean interruptPending) {
  }

  /** An entry: its id and amount. */
  public record Entry(long id, long amount) {
  }

  /**
   * An account's committed entries, oldest first, and the number of its postings whose
   * transaction rolled back.
   */
  public record Statement(String account, long balance, List<Entry> entries, long rolledBack) {
  }

  private static final class Account {
    final List<Entry> entries = new CopyOnWriteArrayList<>();
    final AtomicLong rolledBack = new AtomicLong();

    long balance() {
      return entries.stream().mapToLong(Entry::amount).sum();
    }
  }

  /** Applies the entry when, and only if, its transaction commits. */
  private final class ApplyOnCommit implements Synchronization {
    private final String account;
    private final Entry entry;

    ApplyOnCommit(String account, Entry entry) {
      this.account = account;
      this.entry = entry;
    }

    @Override
    public void beforeCompletion() {
      // Nothing to flush: the entry is applied after the outcome is known.
    }

    @Override
    public void afterCompletion(int status) {
      if (status == Status.STATUS_COMMITTED) {
        account(account).entries.add(entry);
      } else {
        account(account).rolledBack.incrementAndGet();
      }
    }
  }
}
