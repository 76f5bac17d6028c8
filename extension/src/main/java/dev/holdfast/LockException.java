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

  public LockException(String message) {
    super(message);
  }

  public LockException(String message, Throwable cause) {
    super(message, cause);
  }
}
