package dev.holdfast.engine;

import dev.holdfast.LockClient;
import java.util.Objects;
import java.util.function.Function;

/**
 * How {@code dev.holdfast.cdi} reaches the engine behind a {@link LockClient} (for
 * {@code @Locked} templates and health checks) without the public API exposing it: the JDK's
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

  /** {@return the engine behind {@code client}} */
  public static LockEngine engine(LockClient client) {
    return engines.apply(Objects.requireNonNull(client, "client"));
  }
}
