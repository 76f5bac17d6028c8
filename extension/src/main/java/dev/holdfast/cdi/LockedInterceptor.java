package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import jakarta.annotation.Priority;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.Intercepted;
import jakarta.enterprise.inject.spi.Bean;
import jakarta.inject.Inject;
import jakarta.interceptor.AroundInvoke;
import jakarta.interceptor.Interceptor;
import jakarta.interceptor.InvocationContext;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * Runs {@link Locked} methods under their lock. All decisions were made at deployment: a call
 * looks up the operation prepared for its bean class and method, renders the name, acquires
 * (or skips the call, for a busy {@code skipIfBusy} lock), proceeds — for a fenced operation
 * with the hold's token as {@link FencingToken#current()} — and releases (or leaves the lock
 * held until {@code holdAtLeast} after the method started). A method returning a
 * {@code CompletionStage}, {@code CompletableFuture} or {@code Uni} is called once the lock is
 * held, without blocking the caller, and holds it until its result completes
 * ({@link AsyncLockedCall}, {@link UniLocked}).
 *
 * <p>While a call's method runs, the call is on its thread's list of {@link LockedCalls}, whose
 * holds the commit guard checks before a transaction begun inside the call commits
 * ({@link TransactionBegun}) — also after the call, if the hold was lost while it ran. With
 * {@code onLoss = INTERRUPT} a blocking call's hold is watched for a loss ({@link LossActions}),
 * and the interrupt a loss set is taken back before the call returns.
 *
 * <p>An interceptor instance belongs to one instance of one bean, so the bean class's operations
 * are looked up once, at construction. The bean class is the one the container reports
 * ({@code @Intercepted Bean}), never the runtime class of the target, which is a
 * container-generated subclass ({@code Foo$Proxy$_$$_WeldSubclass}, {@code Foo_Subclass}).
 */
@Locked
@Interceptor
@Priority(Locked.PRIORITY)
public class LockedInterceptor {
  private final LockClient client;
  private final LockedOperations prepared;
  private final Class<?> beanClass;
  private final Map<Method, LockedOperation> operations;
  private final LockTracing tracing;

  @Inject
  public LockedInterceptor(LockClient client, LockedOperations prepared,
      @Intercepted Bean<?> bean, Instance<Object> beans) {
    this.client = client;
    this.tracing = LockTracing.of(beans);
    this.prepared = prepared;
    this.beanClass = bean.getBeanClass();
    Map<Method, LockedOperation> ops = prepared.forBeanClass(beanClass);
    this.operations = ops == null ? Map.of() : ops;
  }

  @AroundInvoke
  public Object lockAround(InvocationContext ctx) throws Exception {
    LockedOperation operation = operation(ctx);
    switch (operation.returns()) {
      case STAGE, FUTURE -> {
        return AsyncLockedCall.start(operation, client, tracing, ctx.getParameters(),
            withCallerContext(ctx::proceed), AsyncLockedCall::stageOf);
      }
      case UNI -> {
        // UniLocked is loaded only here: a method returning Uni means Mutiny is there.
        return UniLocked.around(operation, client, tracing, ctx.getParameters(), ctx::proceed,
            this::withCallerContext);
      }
      default -> {
        return lockAroundCall(ctx, operation);
      }
    }
  }

  /** A method whose work is done when it returns. */
  private Object lockAroundCall(InvocationContext ctx, LockedOperation operation)
      throws Exception {
    DistributedLock lock = operation.acquire(client, tracing, ctx.getParameters());
    if (lock == null) {
      return null; // skipped: busy elsewhere, and the (void) method said to skip then
    }
    long started = System.nanoTime();
    Throwable failure = null;
    // Seen by the commit guard of transactions that begin inside this call.
    LockedCalls.Running running = LockedCalls.enter(lock, operation);
    LossActions.Watch interruption = operation.onLoss() == Locked.OnLoss.INTERRUPT
        ? new LossActions.Interruption(lock) : null;
    try {
      return operation.fenced()
          ? FencingToken.callWith(LockedOperation.token(lock), ctx::proceed)
          : ctx.proceed();
    } catch (Throwable t) {
      failure = t;
      throw t;
    } finally {
      if (interruption != null) {
        interruption.close(); // the thread leaves without the interrupt Holdfast set
      }
      LockedCalls.exit(running);
      try {
        operation.release(client, lock, started);
      } catch (RuntimeException e) {
        if (failure == null) {
          throw e; // e.g. the lock was lost while the method ran: the caller must know
        }
        failure.addSuppressed(e);
      }
    }
  }

  /**
   * {@code proceed}, to run on another thread with the context of this one (the caller's):
   * through the container's Jakarta Concurrency context service (WildFly, other Jakarta EE
   * servers), then Mutiny's callback decorators (Quarkus' context propagation), each where it is.
   */
  private Callable<Object> withCallerContext(Callable<Object> proceed) {
    return prepared.callerContext().apply(proceed);
  }

  private LockedOperation operation(InvocationContext ctx) {
    Method method = ctx.getMethod();
    LockedOperation op = operations.get(method);
    if (op == null && ctx.getTarget() != null) {
      // A bean whose reported class is not the one that was prepared: map the instance's
      // class to its nearest prepared superclass.
      op = prepared.nearest(ctx.getTarget().getClass(), method);
    }
    if (op == null) {
      throw new IllegalStateException("No @Locked operation was prepared for " + method
          + " on bean class " + beanClass.getName() + ": Holdfast prepares the @Locked methods of"
          + " managed beans at deployment; instances intercepted otherwise (InterceptionFactory)"
          + " are not supported");
    }
    return op;
  }
}
