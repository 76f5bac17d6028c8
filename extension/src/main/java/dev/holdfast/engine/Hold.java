package dev.holdfast.engine;

import java.lang.ref.WeakReference;
import java.util.ArrayDeque;
import java.util.LinkedHashSet;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceFieldUpdater;

/**
 * What this client believes one thread holds of one lock: a mirror of what the scripts did.
 *
 * <p><b>Sections.</b> Each successful acquisition opens a section with the lease it asked for
 * (the watchdog's, or a fixed one with its own deadline); each unlock closes the newest. The key's
 * TTL is kept at least what the open sections need, and the watchdog renews the hold while any
 * open section is a watchdog one.
 *
 * <p><b>Belief.</b> The hold is believed held until {@link #confirmedUntil()}: the TTL that Redis
 * last acknowledged, counted from when that call was <em>sent</em>, less a margin for clock
 * drift — so the client stops believing before Redis can let anyone else in, even when it cannot
 * reach Redis at all. A hold that ends any other way than by its final unlock is <em>lost</em>,
 * once, with a reason; its open sections still need their unlocks, which report the loss.
 *
 * <p><b>Threads.</b> Sections, count and the pending release are written only by the holding
 * thread. The watchdog and the deadline timer read the volatile fields and apply what they learn
 * under this object's monitor, after checking {@link #epoch} — odd while the holder has a call in
 * flight — so that a renewal answered after the holder changed the hold is never applied to it.
 */
final class Hold {
  /** Lease of a watchdog section. */
  static final long WATCHDOG = -1;

  final LockNames names;
  final long threadId;
  final String field;
  final Id id;
  /** The template the hold is measured under (metrics, JFR). */
  final String template;
  /**
   * The holding thread, null for a hold made on another thread or owned by an object. Strong,
   * so that whether it is alive never depends on the garbage collector: a virtual thread parked
   * on something only its own stack reaches may be collected while it lives, which a weak
   * reference would report as ended. Holds of ended threads are forgotten by the watchdog, so
   * this keeps none for long.
   */
  private final Thread thread;
  /**
   * For a hold owned by an object ({@link OwnedLockHold}, negative {@link #threadId}): that
   * object, weakly, so that a hold dropped without release is noticed; else null.
   */
  private final WeakReference<OwnedLockHold> holdOwner;
  /** When the first section opened (nanoTime); 0 for a record of owed work. Owner thread. */
  private volatile long acquiredAt;
  /** The JFR {@code LockHeld} event begun at acquisition, or null. Owner thread. */
  private Object heldEvent;

  private final ArrayDeque<Section> sections = new ArrayDeque<>();
  private volatile Pending pendingRelease; // read by the loss paths of other threads
  /**
   * The request ids of the newest pending releases ({@value #SETTLED_KEPT} at most) that a
   * re-entry settled as having run: their sections closed without an unlock() call, so whoever
   * sent them (a multi-lock's failed unlock) must not release them again. Null until the first.
   * Owner thread.
   */
  private LinkedHashSet<String> releasesSettledByReentry;
  /**
   * How many settled releases a hold remembers: a multi-lock's record refers to one only if the
   * thread re-entered the member between its failed unlock and that unlock's retry, and an older
   * one would need as many more failed unlocks, each settled by a re-entry, in between.
   */
  private static final int SETTLED_KEPT = 16;
  /**
   * How many of the newest sections are ones the application does not hold any more, whose
   * release failed (did not run, or is {@link #pendingRelease}): a composite acquisition took
   * and gave them back, or a RedLock's unlock() ended without them. The thread's next call on
   * this lock finishes them first. Owner thread.
   */
  private int giveBacksOwed;

  private volatile int count;
  private volatile long token;
  /** How many open sections are watchdog sections (written by the owner). */
  private volatile int watchdogSections;
  /** Whether the newest open section is a watchdog section (written by the owner). */
  private volatile boolean newestIsWatchdog;
  private volatile long confirmedUntil;
  private final AtomicReference<String> lostReason = new AtomicReference<>();
  private volatile long lostAt;
  // Oldest first. A debt is never replaced by a newer one: the older request may have been
  // sent, and unsettled, a late copy of it could apply to the thread's next hold.
  private final Queue<Cleanup> cleanups = new ConcurrentLinkedQueue<>();
  /** Guarded by this. */
  private long epoch;
  /** Guarded by this. */
  private int renewalsInFlight;
  /** Released by its final unlock; guarded by this. */
  private boolean retired;
  /** Redis answered that the holder's call ended the hold; guarded by this. */
  private boolean ended;
  /**
   * A final call of the holder (the release, handoff or keep that ends the hold) was sent: the
   * hold is never renewed again, whatever the answer, or if none comes. Written under this.
   */
  private volatile boolean ending;
  /** When {@link #ending} was set (nanoTime). */
  private volatile long endingSince;
  /**
   * A force-unlock's check found this hold's field gone while its final call was in flight, and
   * left the hold to that call ({@link #skipWhileEnding}); guarded by this.
   */
  private boolean goneWhileEnding;
  /** What to do if this hold is lost ({@link LossWatch}); null if nobody watches. */
  private volatile LossWatch lossWatch;
  private static final AtomicReferenceFieldUpdater<Hold, LossWatch> LOSS_WATCH =
      AtomicReferenceFieldUpdater.newUpdater(Hold.class, LossWatch.class, "lossWatch");
  /**
   * When the open at-risk episode began (nanoTime, never 0), or 0 if none: a renewal of this
   * watchdog hold could not be confirmed and none has been since. Written under this by the
   * watchdog; read without a lock on the renewal path, so that a hold not at risk costs a field
   * read.
   */
  private volatile long atRiskSince;
  /** A {@code LockLost} of this hold was handed to the listeners; event thread only. */
  boolean lossReported;
  /** A {@code LockAtRisk} was handed to the listeners and no recovery since; event thread only. */
  boolean riskReported;
  /** Guarded by this. */
  ScheduledFuture<?> deadlineTask;
  /** When {@link #deadlineTask} fires (nanoTime); guarded by this. */
  long deadlineTaskAt;

  Hold(LockNames names, long threadId, String field, String template) {
    this(names, threadId, field, template, null);
  }

  /**
   * A hold of owner {@code threadId}: a thread id, or a negative owner id whose owner object is
   * {@code owner} ({@link OwnedLockHold}); for a thread id the owner is the calling thread if it
   * is that thread ({@code owner} is then ignored).
   */
  Hold(LockNames names, long threadId, String field, String template, Object owner) {
    this.names = names;
    this.threadId = threadId;
    this.field = field;
    this.template = template;
    this.id = new Id(names.holdKey(), threadId);
    Thread current = Thread.currentThread();
    this.thread = threadId >= 0 && current.getId() == threadId ? current : null;
    this.holdOwner = threadId < 0 && owner instanceof OwnedLockHold h
        ? new WeakReference<>(h) : null;
  }

  /**
   * A record of Redis work owed by a thread that holds nothing: an acquisition whose outcome is
   * unknown must be settled before the thread acquires this lock again.
   */
  static Hold owing(LockNames names, long threadId, String field, Cleanup cleanup) {
    Hold h = new Hold(names, threadId, field, names.name());
    h.lostReason.set("never granted: the outcome of its acquisition is being settled");
    h.lostAt = System.nanoTime();
    h.cleanups.add(cleanup);
    return h;
  }

  int count() {
    return count;
  }

  /** The hold's fencing token; 0 if none was assigned. */
  long token() {
    return token;
  }

  void token(long token) {
    this.token = token;
  }

  boolean watchdog() {
    return watchdogSections > 0;
  }

  long confirmedUntil() {
    return confirmedUntil;
  }

  boolean active() {
    return lostReason.get() == null;
  }

  String lostReason() {
    return lostReason.get();
  }

  long lostAt() {
    return lostAt;
  }

  /** Whether the hold is active and its lease certainly not over at {@code now}. */
  boolean believedAt(long now) {
    return active() && now - confirmedUntil < 0;
  }

  /**
   * Whether the hold ended by its owner's final release (or keep) and was never lost: whatever
   * relied on it until that release was not let down.
   */
  synchronized boolean releasedUnlost() {
    return retired && active();
  }

  /**
   * Sets {@code watch} as this hold's watch, unless it has one.
   *
   * @return whether it was set; the caller must then see whether the hold was lost already
   */
  boolean watch(LossWatch watch) {
    return LOSS_WATCH.compareAndSet(this, null, watch);
  }

  /** Removes {@code watch}, if it is this hold's watch. */
  void unwatch(LossWatch watch) {
    LOSS_WATCH.compareAndSet(this, watch, null);
  }

  /** {@return this hold's watch, or null} Read after {@link #lose} marked the hold. */
  LossWatch lossWatch() {
    return lossWatch;
  }

  /**
   * Marks the hold lost.
   *
   * @return whether this call did it (the caller reports it); false if it was lost already
   */
  boolean lose(String reason) {
    if (lostReason.compareAndSet(null, reason)) {
      lostAt = System.nanoTime();
      return true;
    }
    return false;
  }

  /**
   * Whether the owner may still release the hold: its thread is alive, or, for a hold owned by
   * an object, that object is still reachable and was not released.
   */
  boolean threadAlive() {
    if (holdOwner != null) {
      OwnedLockHold h = holdOwner.get();
      return h != null && !h.released();
    }
    Thread t = thread;
    return t != null && t.isAlive();
  }

  /**
   * The holding thread, or null if the hold was made on another thread or is owned by an
   * object.
   */
  Thread thread() {
    return thread;
  }

  /** Whether the owner is an object ({@link OwnedLockHold}) rather than a thread. */
  boolean ownedByObject() {
    return threadId < 0;
  }

  /** The owner in a loss message: "this thread" or "this LockHold". */
  String thisOwner() {
    return ownedByObject() ? "this LockHold" : "this thread";
  }

  /** What the owner is, for messages: "thread 42" or "LockHold -3". */
  String ownerName() {
    return ownedByObject() ? "LockHold " + threadId : "thread " + threadId;
  }

  long acquiredAt() {
    return acquiredAt;
  }

  Object heldEvent() {
    return heldEvent;
  }

  // ---- owner thread ----

  /** Opens a section that Redis confirmed until {@code until} (nanoTime). */
  void opened(Section section, long until) {
    if (sections.isEmpty() && acquiredAt == 0) {
      acquiredAt = System.nanoTime();
      heldEvent = LockEvents.holdBegins();
    }
    sections.push(section);
    count = sections.size();
    if (section.watchdog()) {
      watchdogSections++;
    }
    newestIsWatchdog = section.watchdog();
    confirmedUntil = until;
  }

  /** Closes the newest section (a successful or a reporting unlock). */
  void closeNewest() {
    Section closed = sections.poll();
    count = sections.size();
    if (closed != null && closed.watchdog()) {
      watchdogSections--;
    }
    Section newest = sections.peek();
    newestIsWatchdog = newest != null && newest.watchdog();
  }

  /**
   * The lease, in ms, that the sections other than the newest need at {@code now}: the larger of
   * the watchdog lease (if one of them is a watchdog section) and what the latest fixed deadline
   * still has; 0 if their leases are over; {@link #WATCHDOG} if no other section is open.
   */
  long leaseAfterNewest(long now, long watchdogMillis) {
    long latest = Long.MIN_VALUE;
    boolean renewed = false;
    boolean first = true;
    for (Section s : sections) {
      if (first) {
        first = false;
        continue;
      }
      if (s.watchdog()) {
        renewed = true;
      } else if (latest == Long.MIN_VALUE || s.deadline() - latest > 0) {
        latest = s.deadline();
      }
    }
    if (latest == Long.MIN_VALUE && !renewed) {
      return WATCHDOG; // no section remains: the lease does not matter
    }
    long left = latest == Long.MIN_VALUE ? 0 : latest - now;
    long fixedLeft = left <= 0 ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(left));
    return renewed ? Math.max(watchdogMillis, fixedLeft) : fixedLeft;
  }

  /**
   * The longest, in ms from {@code now}, that the key can still live by this hold's doing: the
   * watchdog lease if a watchdog section is open, else what the latest fixed deadline has left.
   */
  long leaseLeftMillis(long now, long watchdogMillis) {
    long left = 0;
    for (Section s : sections) {
      left = Math.max(left, s.watchdog() ? watchdogMillis
          : Math.max(0, TimeUnit.NANOSECONDS.toMillis(s.deadline() - now) + 1));
    }
    return left;
  }

  /** The lease of the newest fixed-lease section, for messages; 0 if none. */
  long fixedLeaseMillis() {
    for (Section s : sections) {
      if (!s.watchdog()) {
        return s.leaseMillis();
      }
    }
    return 0;
  }

  void confirm(long until) {
    confirmedUntil = until;
  }

  /**
   * Believed at least until {@code until} (nanoTime), unless lost: the answer to a release whose
   * earlier send {@link #believeAtMostUntil capped} the belief — renewals confirmed since count
   * as much.
   */
  synchronized void believeAtLeastUntil(long until) {
    if (until - confirmedUntil > 0) {
      confirmedUntil = until;
    }
  }

  /** Believed no longer than {@code until} (nanoTime): what a call that may have run set. */
  synchronized void believeAtMostUntil(long until) {
    if (confirmedUntil - until > 0) {
      confirmedUntil = until;
    }
  }

  /**
   * Whether the watchdog renews this hold: a section of it is a watchdog section — not counting
   * the newest while a release of it is pending, which may have ended it (the lease that release
   * set, or a late copy of it sets, must then be the last word).
   */
  boolean renewed() {
    int besidesNewest = watchdogSections - (newestIsWatchdog ? 1 : 0);
    return pendingRelease == null ? watchdogSections > 0 : besidesNewest > 0;
  }

  Pending pendingRelease() {
    return pendingRelease;
  }

  void pendingRelease(Pending pending) {
    this.pendingRelease = pending;
  }

  boolean giveBackOwed() {
    return giveBacksOwed > 0;
  }

  int giveBacksOwed() {
    return giveBacksOwed;
  }

  /** {@return whether a re-entry settled the pending release {@code requestId} as run} */
  boolean releaseSettledByReentry(String requestId) {
    return releasesSettledByReentry != null && releasesSettledByReentry.contains(requestId);
  }

  void settledByReentry(String requestId) {
    if (releasesSettledByReentry == null) {
      releasesSettledByReentry = new LinkedHashSet<>();
    }
    releasesSettledByReentry.add(requestId);
    if (releasesSettledByReentry.size() > SETTLED_KEPT) {
      releasesSettledByReentry.remove(releasesSettledByReentry.iterator().next()); // the oldest
    }
  }

  /** One more section owed as a give-back. */
  void oweGiveBack() {
    giveBacksOwed++;
  }

  /** {@return the sections owed as give-backs, which the caller is about to give back} */
  int takeGiveBacksOwed() {
    int owed = giveBacksOwed;
    giveBacksOwed = 0;
    return owed;
  }

  synchronized void beginCall() {
    epoch++;
  }

  /** Whether the holder has a call in flight now: no renewal of this hold can be sent. */
  synchronized boolean callInFlight() {
    return (epoch & 1) != 0;
  }

  synchronized void endCall() {
    epoch++;
  }

  /**
   * The holder is about to send the call that ends the hold (a final release, a handoff, a
   * keep): from now on no renewal starts, and one in flight is not applied, so that a release
   * in doubt is never kept alive — it ends at its deadline at worst. {@code false} undoes it
   * when Redis answered with an error (the call changed nothing; the hold goes on).
   */
  synchronized void ending(boolean on) {
    ending = on;
    endingSince = System.nanoTime();
    goneWhileEnding = false;
  }

  /**
   * For a check that found this hold's field gone: whether its final call is in flight, in
   * which case the check leaves the hold to that call's answer and says so ({@link #endRefused}).
   */
  synchronized boolean skipWhileEnding() {
    if (ending) {
      goneWhileEnding = true;
    }
    return ending;
  }

  /**
   * The final call was answered with an error (it changed nothing): the hold goes on, as
   * {@code ending(false)}.
   *
   * @return whether a check found the field gone meanwhile and left the hold to this call: the
   *     caller must check it again
   */
  synchronized boolean endRefused() {
    boolean recheck = goneWhileEnding;
    ending(false);
    return recheck;
  }

  /** Whether the call that ends this hold was sent; see {@link #ending(boolean)}. */
  boolean ending() {
    return ending;
  }

  /**
   * Whether this is what is left of a hold whose final call got no answer: its thread holds
   * nothing, and {@link #cleanup()} (until settled) decides in Redis what that call did.
   */
  boolean endedInDoubt() {
    return ending && count == 0 && active();
  }

  long endingSince() {
    return endingSince;
  }

  /**
   * Redis answered that the call in flight ended the hold (a final release or a handoff): from
   * now on no renewal starts, and one that finds the field gone is no loss. Called by the
   * holder between {@link #beginCall} and {@link #endCall}, so that no renewal can slip in
   * between that answer and the hold leaving the registry.
   */
  synchronized void ended() {
    ended = true;
  }

  // ---- watchdog ----

  /**
   * Registers a renewal about to be sent.
   *
   * @return the epoch to check its answer against, or -1 if it must not be sent: the holder has
   *     a call in flight (which renews the lease itself) or the hold was released
   */
  synchronized long startRenewal() {
    if ((epoch & 1) != 0 || retired || ended || ending || !active() || !renewed()) {
      return -1;
    }
    renewalsInFlight++;
    return epoch;
  }

  synchronized boolean unchangedSince(long snapshot) {
    return epoch == snapshot && !ended && !ending;
  }

  /**
   * Applies a renewal confirmed until {@code until}, unless the hold changed since; a renewal
   * applied ends the open at-risk episode.
   *
   * @return when the episode it ended began (nanoTime), or 0 if it ended none
   */
  synchronized long renewed(long snapshot, long until) {
    if (epoch != snapshot || watchdogSections == 0 || ending || !active()) {
      return 0;
    }
    if (until - confirmedUntil > 0) {
      confirmedUntil = until;
    }
    long since = atRiskSince;
    atRiskSince = 0;
    return since;
  }

  /**
   * Opens an at-risk episode at {@code now}: a renewal of this hold could not be confirmed.
   * Nothing opens for a hold that is not renewed (fixed lease, ending, released), is already
   * at risk, or is no longer believed at {@code now} (its deadline timer is about to declare it
   * lost).
   *
   * @param inFlightOnly open it only if a renewal of this hold is in flight now (one that has
   *     not been answered for a whole renewal period)
   * @return whether this call opened it
   */
  synchronized boolean atRisk(long now, boolean inFlightOnly) {
    if (atRiskSince != 0 || (inFlightOnly && renewalsInFlight == 0) || retired || ended
        || ending || watchdogSections == 0 || !believedAt(now)) {
      return false;
    }
    atRiskSince = now == 0 ? 1 : now;
    return true;
  }

  /** Whether an at-risk episode is open (see {@link #atRisk}). */
  boolean atRisk() {
    return atRiskSince != 0;
  }

  synchronized void renewalEnded() {
    renewalsInFlight--;
    notifyAll();
  }

  /**
   * The final unlock succeeded: no renewal may start from now on, and this waits until none is
   * in flight, so that none can extend a later hold of the same thread (a renewal checks only
   * that the thread's field exists).
   */
  synchronized void retire(long maxNanos) {
    retired = true;
    long end = System.nanoTime() + maxNanos;
    boolean interrupted = false;
    while (renewalsInFlight > 0) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        break;
      }
      try {
        TimeUnit.NANOSECONDS.timedWait(this, left);
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  // ---- Redis work owed ----

  /** {@return the oldest Redis work this hold owes, or null if it owes none} */
  Cleanup cleanup() {
    return cleanups.peek();
  }

  /** Adds {@code owed} to what this hold owes, after anything owed before. */
  void owe(Cleanup owed) {
    cleanups.add(owed);
  }

  /** {@return whether {@code done} was owed, and is no more} */
  boolean settled(Cleanup done) {
    return cleanups.remove(done);
  }

  @Override
  public String toString() {
    return "Hold[" + names.name() + ", " + ownerName() + ", count " + count
        + (active() ? "" : ", lost: " + lostReason()) + "]";
  }

  /** Identifies a hold: one lock key, one owner (a thread id, or a negative owner id). */
  record Id(String key, long threadId) {
  }

  /** One open acquisition: renewed by the watchdog, or a fixed lease ending at a deadline. */
  record Section(boolean watchdog, long leaseMillis, long deadline) {
  }

  /**
   * An unlock whose reply never came: the next unlock re-sends it, a re-entry settles it first.
   *
   * @param leaseMillis the lease it set for the sections left (0: it ended the hold)
   * @param sentAt when it was first sent (nanoTime), the earliest its TTL can count from
   */
  record Pending(String requestId, int expected, long leaseMillis, long sentAt) {
  }

  /**
   * A {@link LockScripts#RESOLVE} call owed to Redis.
   *
   * @param kind {@code acquire} (undo an uncertain acquisition), {@code abandon} (remove the
   *     thread's field: also how a final release or handoff in doubt completes) or
   *     {@code release} (only seal the request: how a keep in doubt settles, leaving the field
   *     to expire with its lease if the keep never ran)
   * @param leaseOverAt when whatever it would remove has expired (nanoTime): after that only its
   *     seal is at stake (a late copy of the request must not apply to a later hold), so it stays
   *     owed, retried less often, and the thread's next acquisition settles it first
   */
  record Cleanup(String requestId, int expected, String kind, long leaseOverAt) {
  }
}
