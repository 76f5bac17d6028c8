package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * How {@code dev.holdfast.cdi} reaches the engine behind a {@link LockClient} (for
 * {@code @Locked} templates and health checks, the end of a {@link LockHold}, and what a loss
 * does to a running {@code @Locked} call) without the public API exposing it: the JDK's
 * "shared secrets" idiom. {@code LockClient} installs the accessor when its class initialises,
 * which has happened before anyone holds a client.
 *
 * <p>Not API.
 */
public final class EngineAccess {
  private static volatile Function<LockClient, LockEngine> engines;

  private EngineAccess() {
  }

  /**
   * Called once, by {@code LockClient}'s static initialiser.
   *
   * @throws IllegalStateException if an accessor is installed already
   */
  public static synchronized void install(Function<LockClient, LockEngine> accessor) {
    if (engines != null) {
      throw new IllegalStateException("The engine accessor is installed already");
    }
    engines = Objects.requireNonNull(accessor, "accessor");
  }

  /**
   * Ends {@code hold} for the asynchronous {@code @Locked}: releases it now if
   * {@code remainingMillis} ≤ 0, else keeps the lock held in Redis for that much longer, without
   * renewal, and lets it expire then (as {@code holdAtLeast} does for a thread's hold); at most
   * once together with the hold's own release methods. Never blocks the caller: runs on the
   * client's asynchronous executor, like {@link LockHold#releaseAsync()}, and the stage
   * completes there, exceptionally as {@link LockHold#release()} would throw. A hold of another
   * implementation is released with its {@code releaseAsync()}.
   */
  public static CompletionStage<Void> releaseAfter(LockHold hold, long remainingMillis) {
    Objects.requireNonNull(hold, "hold");
    if (hold instanceof OwnedLockHold owned) {
      return owned.releaseAfterAsync(remainingMillis);
    }
    return hold.releaseAsync();
  }

  /**
   * Runs {@code action} with the reason, once, if the calling thread's hold of {@code lock} — the
   * hold it has now, never a later one — is lost before the returned removal runs; for
   * {@code @Locked(onLoss = INTERRUPT)}. The action runs on the client's event thread after the
   * {@link dev.holdfast.LockLost} listeners of that loss (at once if the hold was lost already),
   * and must be quick. The hold's first watch is kept: while one is set (a reentrant call of the
   * same lock), and for a thread that holds nothing or a lock of another implementation, the
   * removal does nothing and the action never runs.
   */
  public static Runnable watchLoss(DistributedLock lock, Consumer<String> action) {
    if (lock instanceof RedisLock redis) {
      return redis.engine().watchLoss(redis.holdOf(Thread.currentThread().getId()), action);
    }
    return () -> { };
  }

  /**
   * {@link #watchLoss(DistributedLock, Consumer)} for {@code hold}, on any thread; for
   * {@code @Locked(onLoss = CANCEL)}.
   */
  public static Runnable watchLoss(LockHold hold, Consumer<String> action) {
    if (hold instanceof OwnedLockHold owned) {
      return owned.lock().engine().watchLoss(owned.hold(), action);
    }
    return () -> { };
  }

  /** {@return the engine behind {@code client}} */
  public static LockEngine engine(LockClient client) {
    return engines.apply(Objects.requireNonNull(client, "client"));
  }
}
