package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import jakarta.annotation.Priority;
import jakarta.inject.Inject;
import jakarta.interceptor.AroundInvoke;
import jakarta.interceptor.Interceptor;
import jakarta.interceptor.InvocationContext;

/**
 * Runs {@link Locked} methods under their lock. All decisions were made at deployment; a call
 * only renders the name, acquires, proceeds and releases.
 */
@Locked
@Interceptor
@Priority(Locked.PRIORITY)
public class LockedInterceptor {
  private final LockClient client;
  private final LockedOperations operations;

  @Inject
  public LockedInterceptor(LockClient client, LockedOperations operations) {
    this.client = client;
    this.operations = operations;
  }

  @AroundInvoke
  public Object lockAround(InvocationContext ctx) throws Exception {
    DistributedLock lock = operations.of(ctx).acquire(client, ctx.getParameters());
    Throwable failure = null;
    try {
      return ctx.proceed();
    } catch (Throwable t) {
      failure = t;
      throw t;
    } finally {
      try {
        lock.unlock();
      } catch (RuntimeException e) {
        if (failure == null) {
          throw e; // e.g. the lock was lost while the method ran: the caller must know
        }
        failure.addSuppressed(e);
      }
    }
  }
}
