package dev.holdfast;

/**
 * The root of Holdfast's own failures, most often Redis being unreachable or answering with an
 * error. The Redis client's exception, when there is one, is the {@linkplain #getCause() cause}.
 *
 * <p>JDK contracts keep their JDK exceptions: unlocking a lock the thread does not hold is an
 * {@link IllegalMonitorStateException}, an interrupted wait an {@link InterruptedException}, and a
 * bad argument or configuration value an {@link IllegalArgumentException}.
 */
public class LockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A failure without an underlying exception.
   *
   * @param message what failed, naming the lock or the Redis node when there is one
   */
  public LockException(String message) {
    super(message);
  }

  /**
   * A failure caused by another exception, typically the Redis client's.
   *
   * @param message what failed, naming the lock or the Redis node when there is one
   * @param cause the underlying exception
   */
  public LockException(String message, Throwable cause) {
    super(message, cause);
  }
}
