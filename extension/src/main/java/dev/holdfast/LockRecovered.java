package dev.holdfast;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * The end of a {@link LockAtRisk} episode without a loss: a lease renewal confirmed the hold in
 * Redis again before its local deadline. Raised once per episode that ends this way, for the same
 * lock and holder as the {@code LockAtRisk} it ends, and never after a {@link LockLost} of that
 * hold. It is the watchdog's next confirmed renewal that ends the episode: a call of the holder
 * that reaches Redis meanwhile (a re-entry, an inner unlock) renews the lease too, but the
 * recovery is reported with the renewal that follows, within a third of the watchdog
 * timeout.
 *
 * @param lockName   the name given to {@link LockClient#getLock(String)}
 * @param template   the {@code @Locked} template the name was rendered from, or the lock name
 *     when the lock was taken in code
 * @param threadId   the id of the holding thread, or the negative owner id of a {@link LockHold}
 * @param atRiskFor  how long the episode lasted, from its {@code LockAtRisk} to this report
 * @param detectedAt when the confirming renewal was answered
 */
public record LockRecovered(String lockName, String template, long threadId, Duration atRiskFor,
    Instant detectedAt) {
  /**
   * A report; Holdfast creates them, applications only receive them.
   *
   * @param lockName   the lock's name
   * @param template   the {@code @Locked} template, or the lock name
   * @param threadId   the holding thread's id, or a {@link LockHold}'s owner id
   * @param atRiskFor  how long the episode lasted
   * @param detectedAt when the confirming renewal was answered
   * @throws NullPointerException if any reference is {@code null}
   */
  public LockRecovered {
    Objects.requireNonNull(lockName, "lockName");
    Objects.requireNonNull(template, "template");
    Objects.requireNonNull(atRiskFor, "atRiskFor");
    Objects.requireNonNull(detectedAt, "detectedAt");
  }
}
