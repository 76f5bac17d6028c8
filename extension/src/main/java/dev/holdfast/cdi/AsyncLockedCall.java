package dev.holdfast.cdi;

import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.LockLostException;
import dev.holdfast.Locked;
import java.util.concurrent.Callable;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;

/**
 * One call of a {@code @Locked} method whose work ends when the result it returns completes
 * (a {@code CompletionStage}, {@code CompletableFuture} or, through {@link UniLocked}, a
 * {@code Uni}): acquires without blocking the caller, proceeds on the thread that completes the
 * acquisition once the lock is held (with the caller's context where the container's context
 * service or Mutiny's callback decorators carry it: the interceptor wraps {@code proceed}), and
 * releases when the method's result completes, fails or the call's {@link #result} is
 * cancelled. The result completes after the release (or after
 * handing it to the minimum hold): with the method's value or failure, or with the release's
 * failure (suppressed onto the method's, when both failed) — the policy of the blocking
 * interceptor.
 *
 * <p>Cancelling {@link #result} before the lock is held gives up the acquisition (a hold granted
 * meanwhile is released and the method does not run); after, it cancels the method's result
 * (best effort: work that goes on regardless goes on without the lock) and releases at once.
 *
 * <p>Thread-safe: the acquisition, the method's completion and a cancellation may race; the hold
 * is released exactly once.
 */
final class AsyncLockedCall {
  private static final System.Logger LOG = System.getLogger(LockedInterceptor.class.getName());

  private final LockedOperation operation;
  private final Callable<Object> proceed;
  private final Function<Object, CompletionStage<?>> toStage;
  /** {@code onLoss = CANCEL}: a loss of the hold while the work runs cancels it. */
  private final boolean cancelOnLoss;
  /** What the caller gets: the method's outcome, after the release. */
  private final CompletableFuture<Object> result = new CompletableFuture<>();
  private final AtomicBoolean released = new AtomicBoolean();
  private volatile CompletionStage<LockHold> acquisition;
  private volatile LockHold hold;
  private volatile CompletionStage<?> work;
  private volatile long startedNanos;
  /** {@code onLoss = CANCEL} and the hold was lost: the work must be cancelled. */
  private volatile boolean lost;

  private AsyncLockedCall(LockedOperation operation, Callable<Object> proceed,
      Function<Object, CompletionStage<?>> toStage) {
    this.operation = operation;
    this.proceed = proceed;
    this.toStage = toStage;
    this.cancelOnLoss = operation.onLoss() == Locked.OnLoss.CANCEL;
  }

  /**
   * Starts the call; never blocks.
   *
   * @param proceed  invokes the method (the interceptor chain's {@code proceed})
   * @param toStage  the method's return value as a stage ({@code null} stands for a result of
   *                 {@code null}); called on the thread that proceeded
   * @return the call's result; failures (also a name that cannot be rendered) complete it
   *     exceptionally rather than being thrown
   */
  static CompletableFuture<Object> start(LockedOperation operation, LockClient client,
      LockTracing tracing, Object[] args, Callable<Object> proceed,
      Function<Object, CompletionStage<?>> toStage) {
    AsyncLockedCall call = new AsyncLockedCall(operation, proceed, toStage);
    call.result.whenComplete((value, failure) -> {
      if (call.result.isCancelled()) {
        call.cancelled();
      }
    });
    try {
      call.acquisition = operation.acquireAsync(client, tracing, args, call::acquired);
    } catch (RuntimeException | Error e) {
      call.result.completeExceptionally(e);
    }
    if (call.result.isCancelled()) {
      call.cancelled(); // cancelled before the acquisition was known
    }
    return call.result;
  }

  /** The stage of a method that returns a {@code CompletionStage}. */
  static CompletionStage<?> stageOf(Object returned) {
    return (CompletionStage<?>) returned;
  }

  private void acquired(LockHold granted, Throwable failure) {
    if (failure != null) {
      result.completeExceptionally(failure);
      return;
    }
    if (granted == null) {
      result.complete(null); // skipped: busy elsewhere
      return;
    }
    hold = granted;
    if (result.isDone()) {
      release(null, null); // cancelled while acquiring: the method does not run
      return;
    }
    if (cancelOnLoss) {
      LossActions.Watch watch = LossActions.watch(granted, this::lost);
      result.whenComplete((ignoredValue, ignoredFailure) -> watch.close());
      if (released.get()) {
        return; // lost already
      }
    }
    startedNanos = System.nanoTime();
    CompletionStage<?> stage;
    // The method, and for a Uni the subscription to its result (whose synchronous part runs
    // now), run with the token current.
    Callable<CompletionStage<?>> invoke = () -> {
      Object returned = proceed.call();
      return returned == null ? null : toStage.apply(returned);
    };
    // Seen by the commit guard of a transaction that begins in the method (@Transactional):
    // it checks this hold when it commits, on return or when the result completes.
    LockedCalls.Running running = LockedCalls.enter(granted, operation);
    try {
      stage = operation.fenced()
          ? FencingToken.callWith(LockedOperation.token(granted), invoke) : invoke.call();
    } catch (Throwable t) {
      LockedCalls.exit(running);
      release(null, t);
      return;
    }
    LockedCalls.exit(running);
    if (stage == null) {
      release(null, null);
      return;
    }
    work = stage;
    stage.whenComplete((value, error) -> release(value, LockedOperation.unwrap(error)));
    if (result.isCancelled() || lost) {
      cancelWork(); // cancelled, or lost, while the method ran
    }
  }

  /** Releases the hold once, then completes the result with the method's outcome. */
  private void release(Object value, Throwable failure) {
    if (!released.compareAndSet(false, true)) {
      return; // cancelled: released already
    }
    CompletionStage<Void> release;
    try {
      release = operation.releaseAsync(hold, startedNanos);
    } catch (RuntimeException | Error e) {
      release = CompletableFuture.failedFuture(e);
    }
    release.whenComplete((ignored, error) -> {
      Throwable releaseFailure = LockedOperation.unwrap(error);
      if (releaseFailure != null) {
        if (failure == null) {
          result.completeExceptionally(releaseFailure); // e.g. lost while the work ran
          return;
        }
        if (failure != releaseFailure) {
          failure.addSuppressed(releaseFailure);
        }
      }
      if (failure != null) {
        result.completeExceptionally(failure);
      } else {
        result.complete(value);
      }
    });
  }

  /**
   * {@code onLoss = CANCEL}: the hold was lost while the work ran. Cancels the work and
   * completes the result with a {@link CancellationException} whose cause names the lock; the
   * release, which can only report the loss again, is done but not waited for.
   */
  private void lost(String reason) {
    if (!released.compareAndSet(false, true)) {
      return; // the work ended first
    }
    lost = true;
    String lockName = hold.lockName();
    LockLostException cause = new LockLostException(lockName, "Lock '" + lockName
        + "' was lost while the @Locked(onLoss = CANCEL) call ran: " + reason);
    CancellationException cancelled = new CancellationException("The call was cancelled: lock '"
        + lockName + "' was lost");
    cancelled.initCause(cause);
    cancelWork();
    operation.releaseAsync(hold, startedNanos).whenComplete((ignored, error) ->
        result.completeExceptionally(cancelled));
  }

  /** The caller cancelled {@link #result}. */
  private void cancelled() {
    CompletionStage<LockHold> pending = acquisition;
    if (pending != null) {
      pending.toCompletableFuture().cancel(false); // gives up a wait; no-op once acquired
    }
    cancelWork();
    if (hold != null && released.compareAndSet(false, true)) {
      operation.releaseAsync(hold, startedNanos).whenComplete((ignored, error) -> {
        if (error != null) {
          LOG.log(System.Logger.Level.WARNING, () -> "Releasing lock '" + hold.lockName()
              + "' after its call was cancelled failed", LockedOperation.unwrap(error));
        }
      });
    }
  }

  private void cancelWork() {
    CompletionStage<?> running = work;
    if (running != null) {
      try {
        running.toCompletableFuture().cancel(true);
      } catch (UnsupportedOperationException e) {
        // a stage that cannot be cancelled: it runs on, without the lock
      }
    }
  }
}
