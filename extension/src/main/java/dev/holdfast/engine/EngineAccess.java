package dev.holdfast.engine;

import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * How {@code dev.holdfast.cdi} reaches the engine behind a {@link LockClient} (for
 * {@code @Locked} templates and health checks, and the end of a {@link LockHold}) without the public API exposing it: the JDK's
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
   * {@return the owner id that {@code hold}'s {@link dev.holdfast.LockLost} reports as
   * {@code threadId}}, or {@code null} for a hold of another implementation
   */
  public static Long ownerId(LockHold hold) {
    return hold instanceof OwnedLockHold owned ? owned.ownerId : null;
  }

  /** {@return the engine behind {@code client}} */
  public static LockEngine engine(LockClient client) {
    return engines.apply(Objects.requireNonNull(client, "client"));
  }
}
