package dev.holdfast;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * A warning that a lock this client holds may soon be lost: the first stage before
 * {@link LockLost}, as a ZooKeeper session is <em>suspended</em> before it is <em>lost</em>.
 *
 * <p>Raised once per episode, when a lease renewal of a hold that the watchdog keeps could not
 * be confirmed (Redis unreachable, the reply did not come in time, the node is failing over):
 * the renewal failed, or it was still unanswered when the next one was due (a third of the
 * watchdog timeout after it was sent; the socket timeout may be longer), or, with
 * {@code holdfast.redis.sync-replicas}, too few replicas acknowledged it; or nothing has
 * confirmed the hold for over half its lease while its holder's own call is in flight (no
 * renewal can be sent meanwhile). The hold is still
 * believed until its local deadline, {@code timeLeft} from {@code detectedAt}, but unless a
 * renewal gets through before then it will be reported lost; a failed renewal is tried again a
 * twelfth of the watchdog timeout later. A renewal that reaches Redis and finds the hold gone
 * is no risk but a loss: {@link LockLost} alone. An episode ends in one of two ways, exactly one
 * of which is reported:
 * <ul>
 *   <li>a later renewal confirms the hold in Redis: {@link LockRecovered} for the same lock and
 *       holder, and the hold is as safe as before;</li>
 *   <li>the hold is lost (its local deadline passes, a renewal finds it gone, or any other cause
 *       listed at {@link LockLost}): {@link LockLost}, and no {@code LockRecovered}.</li>
 * </ul>
 * A hold released by its holder during an episode ends it silently, and so does closing the
 * client. Holds with a fixed lease (not renewed) are never at risk in this sense: their end is
 * known in advance; a hold whose renewed sections are all unlocked while fixed-lease ones remain
 * is renewed no more, so an episode open then ends with its release or its loss.
 *
 * <p>The reports of one client ({@code LockAtRisk}, {@link LockRecovered}, {@link LockLost})
 * reach its listeners on its event thread in the order they were detected, so a listener sees
 * each hold's episode begin before it ends.
 *
 * <p>What to do with it: stop starting new work that relies on the lock, or flush what must be
 * written while the lock is still believed; the {@code @Locked} commit guard and fencing tokens
 * do not depend on it.
 *
 * @param lockName   the name given to {@link LockClient#getLock(String)}
 * @param template   the {@code @Locked} template the name was rendered from, or the lock name
 *     when the lock was taken in code
 * @param threadId   the id of the thread that holds the lock, or the negative owner id of the
 *     {@link LockHold} that holds it
 * @param timeLeft   how long the hold is still believed without a confirmed renewal, from
 *     {@code detectedAt}; never negative
 * @param lastError  what the failing renewal saw, for humans (no secrets)
 * @param detectedAt when the failing renewal was noticed
 */
public record LockAtRisk(String lockName, String template, long threadId, Duration timeLeft,
    String lastError, Instant detectedAt) {
  /**
   * A report; Holdfast creates them, applications only receive them.
   *
   * @param lockName   the lock's name
   * @param template   the {@code @Locked} template, or the lock name
   * @param threadId   the holding thread's id, or a {@link LockHold}'s owner id
   * @param timeLeft   how long the hold is still believed, from {@code detectedAt}
   * @param lastError  what the failing renewal saw
   * @param detectedAt when the failing renewal was noticed
   * @throws NullPointerException if any reference is {@code null}
   * @throws IllegalArgumentException if {@code timeLeft} is negative
   */
  public LockAtRisk {
    Objects.requireNonNull(lockName, "lockName");
    Objects.requireNonNull(template, "template");
    Objects.requireNonNull(timeLeft, "timeLeft");
    Objects.requireNonNull(lastError, "lastError");
    Objects.requireNonNull(detectedAt, "detectedAt");
    if (timeLeft.isNegative()) {
      throw new IllegalArgumentException("timeLeft must not be negative: " + timeLeft);
    }
  }
}
