package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionStage;
import java.util.function.UnaryOperator;

/**
 * {@code @Locked} methods that return a Mutiny {@code Uni}, and the caller's context for every
 * asynchronous {@code @Locked} method ({@link #contextual}). The only class of Holdfast that
 * touches Mutiny: it is loaded when a {@code Uni} method is first called, which needs Mutiny on
 * the class path anyway, or when another asynchronous one is and Mutiny is there
 * ({@link OptionalApis#MUTINY}), so an application without Mutiny never loads it.
 */
final class UniLocked {
  private UniLocked() {
  }

  /**
   * A {@code Uni} that, at each subscription, acquires the lock without blocking the subscriber,
   * then calls the method and subscribes to the {@code Uni} it returns, and releases when that
   * one ends (item, failure or the subscriber's cancellation), as {@link AsyncLockedCall}.
   *
   * @param args the call's arguments, read again at each subscription
   * @param proceed calls the method (again at each subscription)
   * @param callerContext wraps {@code proceed} with the subscribing thread's context, at each
   *     subscription
   */
  static Object around(LockedOperation operation, LockClient client, LockTracing tracing,
      Object[] args, Callable<Object> proceed,
      UnaryOperator<Callable<Object>> callerContext) {
    return Uni.createFrom().completionStage(() -> AsyncLockedCall.start(operation, client,
        tracing, args, callerContext.apply(proceed), UniLocked::stageOf));
  }

  /**
   * {@code proceed} carrying the calling thread's context to the thread that will run it (the one
   * that completes the acquisition), as Mutiny carries it into its own callbacks: through the
   * callback decorators installed (in Quarkus, context propagation: the CDI request context, the
   * transaction and the like); unchanged where none is installed. Called on the caller's thread.
   */
  static Callable<Object> contextual(Callable<Object> proceed) {
    return Infrastructure.decorate(proceed);
  }

  /** Subscribes to the method's {@code Uni}; cancelling the stage cancels the subscription. */
  private static CompletionStage<?> stageOf(Object returned) {
    return ((Uni<?>) returned).subscribeAsCompletionStage();
  }
}
