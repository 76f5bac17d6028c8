package dev.holdfast.engine;

import dev.holdfast.LockException;

/**
 * An acquisition ran but the replicas did not acknowledge it as {@code holdfast.redis.sync-replicas}
 * asks, so it was rolled back: the lock was not granted. A waiting call tries again.
 */
final class NotReplicatedException extends LockException {
  private static final long serialVersionUID = 1L;

  NotReplicatedException(String message) {
    super(message);
  }
}
