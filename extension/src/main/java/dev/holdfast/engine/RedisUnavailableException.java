package dev.holdfast.engine;

import dev.holdfast.LockException;

/**
 * Redis did not answer a call (connection refused, reset or timed out), so whether the call ran
 * is unknown. Other failures (a script error, an ACL refusal) are plain {@link LockException}s:
 * they are answers, and retrying them changes nothing.
 */
final class RedisUnavailableException extends LockException {
  private static final long serialVersionUID = 1L;

  RedisUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
