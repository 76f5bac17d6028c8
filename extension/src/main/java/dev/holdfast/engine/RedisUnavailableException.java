package dev.holdfast.engine;

import dev.holdfast.LockException;

/**
 * Redis did not run a call: no attempt got an answer (connection refused, reset or timed out),
 * so whether the call ran is unknown ({@link #mayHaveRun()}), or every attempt was turned away
 * before the script ran (a cluster redirection or {@code TRYAGAIN} during a slot migration,
 * retried until the call's time was up). Other failures (a script error, an ACL refusal) are
 * plain {@link LockException}s: they are answers, and retrying them changes nothing.
 */
final class RedisUnavailableException extends LockException {
  private static final long serialVersionUID = 1L;

  private final boolean mayHaveRun;

  RedisUnavailableException(String message, Throwable cause) {
    this(message, cause, true);
  }

  RedisUnavailableException(String message, Throwable cause, boolean mayHaveRun) {
    super(message, cause);
    this.mayHaveRun = mayHaveRun;
  }

  /**
   * Whether some attempt may have run: false only when every attempt was refused before its
   * script ran ({@code MOVED}, {@code ASK}, {@code TRYAGAIN}), so nothing changed in Redis.
   */
  boolean mayHaveRun() {
    return mayHaveRun;
  }
}
