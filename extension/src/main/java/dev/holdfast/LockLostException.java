package dev.holdfast;

import java.util.Objects;

/**
 * The work a lock protected was stopped because the lock was lost while it ran: the cause of a
 * transaction rolled back by the commit guard ({@link CommitGuard}, and {@code @Locked} methods
 * in a JTA transaction), and of the {@code CancellationException} a {@code @Locked} method with
 * {@link Locked.OnLoss#CANCEL} completes with. Its message names the lock and why it was lost.
 */
public class LockLostException extends LockException {
  private static final long serialVersionUID = 1L;

  /** The name of the lost lock. */
  private final String lockName;

  /**
   * An exception for lock {@code lockName}.
   *
   * @param lockName the lock's name
   * @param message  what happened, naming the lock and the reason
   * @throws NullPointerException if {@code lockName} or {@code message} is {@code null}
   */
  public LockLostException(String lockName, String message) {
    super(Objects.requireNonNull(message, "message"));
    this.lockName = Objects.requireNonNull(lockName, "lockName");
  }

  /** {@return the name of the lost lock} */
  public String lockName() {
    return lockName;
  }
}
