package dev.holdfast.cdi;

import jakarta.enterprise.context.Initialized;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Instance;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;
import jakarta.transaction.TransactionScoped;
import jakarta.transaction.TransactionSynchronizationRegistry;

/**
 * Guards every transaction that begins inside running {@code @Locked} calls
 * ({@link TransactionGuard#guardRunningCalls}): the transaction manager's CDI integration fires
 * {@code @Initialized(TransactionScoped.class)} when a transaction begins through it — at
 * {@code @Transactional} methods (on the same method as {@code @Locked}, whose lock is taken
 * first, or called from it) and at {@code begin()} of the container's {@code TransactionManager}
 * bean (Narayana's CDI integration in Weld and WildFly: its {@code NarayanaTransactionManager}
 * fires it, which its {@code @Transactional} interceptors use; Quarkus, whose
 * {@code UserTransaction} fires it too). A transaction begun where the event is not fired is
 * guarded only through {@link dev.holdfast.CommitGuard}.
 *
 * <p>Registered by both extensions only when the JTA API is on the class path. Public for
 * container-generated code; not API.
 */
@Singleton
public class TransactionBegun {
  private final Instance<TransactionSynchronizationRegistry> registries;

  /** For the container. */
  @Inject
  public TransactionBegun(Instance<TransactionSynchronizationRegistry> registries) {
    this.registries = registries;
  }

  /** A transaction began on this thread. Cheap when no locked call is running. */
  public void begun(@Observes @Initialized(TransactionScoped.class) Object transaction) {
    if (!LockedCalls.anyRunning()) {
      return;
    }
    TransactionGuard.guardRunningCalls(registries.isResolvable() ? registries.get()
        : TransactionGuard.lookupRegistry());
  }
}
