package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.engine.LockObserver.LossCause;
import dev.holdfast.engine.LockObserver.Outcome;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.function.Supplier;
import redis.clients.jedis.exceptions.JedisException;

/**
 * A {@link DistributedLock} handle: the lock's names and its engine, nothing else. All state lives
 * in Redis and in the engine's hold registry, so handles are interchangeable.
 *
 * <p><b>Owners.</b> A hold belongs to an owner id: the thread's id for the {@code Lock} methods,
 * or a {@link dev.holdfast.LockHold}'s negative owner id ({@link OwnedLockHold}) for
 * {@link #acquire(Duration, Duration)}. The acquisition loop and the release run the same for
 * both, keyed by that id (registry entry, hash field, waiter, handoff); only where a thread is
 * implied ({@code unlock()}, {@code getHoldCount()} …) is the calling thread's id used.
 *
 * <p><b>How a call stays exact.</b> Every acquisition and release carries the count the client
 * believes the thread holds, and the script answers what it found; the hold registry changes only
 * on such an answer. A call that gets no answer is <em>uncertain</em>: an acquisition re-sends
 * the same request (sealed, so no copy can apply twice) while it may keep trying, and otherwise
 * settles it with {@link LockScripts#RESOLVE} — undone if it ran — before it returns; if even that
 * cannot reach Redis, a re-entry's hold is declared lost and the settling goes on in the
 * background. An inner unlock that gets no answer is re-sent by the next unlock of that hold,
 * and settled first by a re-entry. A section that a composite acquisition ({@link MultiLock},
 * {@link RedLock}) took and gave back, and whose release failed, is no section of the
 * application's: the thread's next call on the lock finishes that release first, so that it never
 * takes the place of one of the application's unlocks.
 *
 * <p><b>How a hold ends in doubt.</b> From the moment the call that ends a hold is sent — the
 * final unlock, a handoff to a waiting thread ({@link LockScripts#TRANSFER}) or a keep
 * ({@link #unlockAfter}) — the hold is never renewed again. If that call gets no answer, the
 * hold is over for its thread ({@code unlock()} throws a {@link LockException} saying so, and
 * the thread holds nothing) and the call is settled in the background under its own request:
 * a release or handoff is completed (the thread's field removed if still there), a keep is
 * sealed (kept if it ran, else left to expire). Either way the lock is free at the latest when
 * the hold's lease ends, even if the thread lives on and never calls again. Calling
 * {@code unlock()} again settles it at once and succeeds; acquiring the lock again settles it
 * first. Nothing uncertain is ever left for the watchdog to renew.
 */
final class RedisLock implements FencedLock {
  private static final System.Logger LOG = System.getLogger(RedisLock.class.getName());
  /** The longest lease accepted: Redis and the local deadline arithmetic stay far from overflow. */
  static final long MAX_LEASE_MILLIS = Duration.ofDays(365).toMillis();
  /** Returned by {@link Attempt#tryOnce} when the lock was acquired. */
  private static final long ACQUIRED = Long.MIN_VALUE;
  /** Park bound while our subscription is not confirmed: unlock messages might not reach us. */
  private static final long UNSUBSCRIBED_PARK_MS = 100;
  /** Park bound for a lock without expiry (not set by Holdfast or Redisson). */
  private static final long NO_EXPIRY_PARK_MS = 1_000;
  /** Waits up to this long poll once at their end instead of subscribing. */
  static final long SHORT_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  /** Longest first park of an acquisition that queued for a local handoff without trying. */
  private static final long QUEUED_PARK_MS = 100;
  /**
   * Park bound of a local waiter behind its queue's head: it wakes when signalled (its turn, a
   * handoff, the client closing); this bound only re-checks its place, without Redis.
   */
  private static final long LOCAL_PARK_MS = 1_000;
  /** Retry interval while Redis cannot be reached during a wait. */
  private static final long OUTAGE_RETRY_MS = 200;
  private static final long WATCHDOG = Hold.WATCHDOG;
  private static final long FOREVER = -1;
  /** How long a lock's fencing token key outlives its last fenced grant. */
  static final long TOKEN_KEY_MILLIS = Duration.ofHours(1).toMillis();

  private final LockEngine engine;
  private final LockNames names;
  /** Whether acquisitions through this handle assign fencing tokens. */
  private final boolean fenced;
  /** What metrics and JFR events call this lock: its template, or its name. */
  private final String template;

  RedisLock(LockEngine engine, LockNames names, boolean fenced, String template) {
    this.engine = engine;
    this.names = names;
    this.fenced = fenced;
    this.template = template;
  }

  @Override
  public String getName() {
    return names.name();
  }

  /** The client this handle belongs to (for composite locks: identity and watchdog timeout). */
  /** What tells this lock's holds apart in its client: the key, and a read-write lock's side. */
  String holdKey() {
    return names.holdKey();
  }

  LockEngine engine() {
    return engine;
  }

  /** What kind of lock this handle is (exclusive, fair, a side of a read-write lock). */
  LockKind kind() {
    return names.kind();
  }

  @Override
  public void lock() {
    acquireUninterruptibly(WATCHDOG);
  }

  @Override
  public void lock(long leaseTime, TimeUnit unit) {
    acquireUninterruptibly(leaseMillis(leaseTime, unit));
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(FOREVER, WATCHDOG, true);
  }

  @Override
  public void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException {
    acquire(FOREVER, leaseMillis(leaseTime, unit), true);
  }

  @Override
  public boolean tryLock() {
    try {
      return acquire(0, WATCHDOG, false);
    } catch (InterruptedException e) {
      throw new AssertionError("a call that does not wait was interrupted", e);
    }
  }

  @Override
  public boolean tryLock(long waitTime, TimeUnit unit) throws InterruptedException {
    return acquire(waitNanos(waitTime, unit), WATCHDOG, true);
  }

  @Override
  public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit)
      throws InterruptedException {
    long lease = leaseMillis(leaseTime, unit);
    return acquire(waitNanos(waitTime, unit), lease, true);
  }

  @Override
  public Long lockAndGetToken() {
    requireFenced();
    lock();
    return heldToken();
  }

  @Override
  public Long lockAndGetToken(long leaseTime, TimeUnit unit) {
    requireFenced();
    lock(leaseTime, unit);
    return heldToken();
  }

  @Override
  public Long tryLockAndGetToken() {
    requireFenced();
    return tryLock() ? heldToken() : null;
  }

  @Override
  public Long tryLockAndGetToken(long waitTime, TimeUnit unit) throws InterruptedException {
    requireFenced();
    return tryLock(waitTime, unit) ? heldToken() : null;
  }

  @Override
  public Long tryLockAndGetToken(long waitTime, long leaseTime, TimeUnit unit)
      throws InterruptedException {
    requireFenced();
    return tryLock(waitTime, leaseTime, unit) ? heldToken() : null;
  }

  /** A handle from {@code getLock} cast to FencedLock: refuse before acquiring anything. */
  private void requireFenced() {
    if (!fenced) {
      throw new UnsupportedOperationException("Lock '" + names.name() + "' was obtained with "
          + "LockClient.getLock: use LockClient.getFencedLock for fencing tokens");
    }
  }

  @Override
  public Long getToken() {
    Hold hold = holdOf(Thread.currentThread().getId());
    if (hold == null || hold.count() == 0 || !hold.believedAt(System.nanoTime())
        || hold.token() == 0) {
      return null;
    }
    return hold.token();
  }

  /**
   * The token of the hold just acquired through this fenced handle; a fenced acquisition always
   * assigns one, and a hold is never forgotten before its unlock.
   */
  private Long heldToken() {
    Hold hold = holdOf(Thread.currentThread().getId());
    return hold.token();
  }

  private void acquireUninterruptibly(long leaseMillis) {
    try {
      acquire(FOREVER, leaseMillis, false);
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquisition was interrupted", e);
    }
  }

  /**
   * The acquisition loop: try; if someone else holds the lock and there is time left, join the
   * lock's wait entry, try again (the unlock may have come before we subscribed), then park until
   * an unlock message, the holder's lease or our deadline, whichever comes first, and retry.
   * A call that waits rides out a Redis outage, from its first attempt on, for up to one
   * watchdog timeout (and never beyond its own wait).
   *
   * @param waitNanos {@link #FOREVER}, 0 for no waiting, else the most to wait
   */
  private boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    Thread current = Thread.currentThread();
    return acquire(current.getId(), current, waitNanos, leaseMillis, interruptible);
  }

  /**
   * The acquisition loop for owner {@code ownerId}: the calling thread's id and the thread, or a
   * {@link OwnedLockHold}'s negative owner id and that object (held weakly by the hold).
   */
  private boolean acquire(long ownerId, Object owner, long waitNanos, long leaseMillis,
      boolean interruptible) throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    checkOpen();
    boolean mayTry = names.kind().beforeAcquire(engine, names, ownerId,
        waitNanos != 0);
    // The event begins first: the wait it records then covers the whole measured wait.
    Object waitEvent = LockEvents.waitBegins();
    long start = System.nanoTime();
    Outcome outcome = Outcome.FAILED; // unless it returns or is interrupted
    Attempt attempt = new Attempt(ownerId, owner, leaseMillis, waitNanos != 0);
    attempt.interruptible = interruptible;
    WaitEntry.Waiter waiter = null;
    boolean parked = false;
    boolean acquired = false;
    boolean interrupted = false;
    try {
      if (!mayTry) {
        outcome = Outcome.TIMED_OUT; // refused without asking Redis, as a single try is
        return false;
      }
      long failingSince = 0;
      // Whether this thread headed its lock's local queue at its last look (or tried Redis
      // unqueued): a thread that becomes head while a thread of this client holds the lock
      // waits once for the handoff before it asks Redis.
      boolean head = true;
      while (true) {
        try {
          interrupted |= waitNanos != 0
              && yieldToRemote(waiter, start, waitNanos, attempt, interruptible);
        } catch (InterruptedException e) {
          outcome = Outcome.INTERRUPTED;
          throw e;
        }
        if (waiter == null && queuesLocally(waitNanos, attempt)) {
          // Other threads of this client wait for it already, or one holds it and hands it
          // over next: queue behind them rather than ask Redis what it would answer "held" to.
          waiter = engine.subscriptions().join(names, names.channel(), handsOff(),
              attempt.field, attempt.lease());
          head = false;
        }
        boolean wasHead = head;
        head = waiter == null || waiter.entry.isHead(waiter);
        long pttl;
        if (waiter != null && !attempt.uncertain && !head) {
          // Behind the head: no Redis call until its turn comes or it is handed the lock;
          // but when the head gave up on an outage that has lasted too long, so does this one.
          RuntimeException outage = waiter.entry.outageOver(System.nanoTime(),
              millisToNanos(engine.watchdogMillis()));
          if (outage != null && waitNanos != 0) {
            throw new RedisUnavailableException("Lock '" + names.name() + "' was not acquired: "
                + "Redis has been unavailable to its waiters for over the watchdog timeout",
                outage);
          }
          pttl = waiter.entry.parkMillis(System.nanoTime(), LOCAL_PARK_MS);
        } else if (waiter != null && !wasHead && handsOff() && !attempt.uncertain
            && waiter.entry.handedLocally() && waiter.entry.subscribed()
            && engine.holds().get(attempt.id) == null) {
          // A new head while a thread of this client holds it: the release hands it over.
          pttl = waiter.entry.parkMillis(System.nanoTime(), QUEUED_PARK_MS);
        } else {
          try {
            pttl = attempt.tryOnce(waitNanos == FOREVER ? RedisTopology.UNBOUNDED
                : Math.max(0, waitNanos - (System.nanoTime() - start)));
            failingSince = 0;
            if (waiter != null) {
              waiter.entry.answered();
              if (pttl != ACQUIRED) {
                waiter.entry.leaseSeen(System.nanoTime(), pttl);
              }
            }
          } catch (RedisUnavailableException | NotReplicatedException e) {
            // Ride it out like an outage; an unacknowledged grant is simply "not acquired"
            // once the wait is over.
            boolean notReplicated = e instanceof NotReplicatedException;
            long now = System.nanoTime();
            failingSince = failingSince == 0 ? now : failingSince;
            if (waiter != null && !notReplicated) {
              failingSince = waiter.entry.failing(failingSince); // the queue's one clock
            }
            if (waitNanos == 0 || (waitNanos != FOREVER && now - start >= waitNanos)) {
              if (notReplicated) {
                outcome = Outcome.TIMED_OUT;
                return false;
              }
              throw e;
            }
            if (now - failingSince > millisToNanos(engine.watchdogMillis())) {
              if (waiter != null && !notReplicated) {
                waiter.entry.gaveUp(e); // the waiters behind give up on the same clock
              }
              throw e;
            }
            pttl = OUTAGE_RETRY_MS;
          }
        }
        if (pttl == ACQUIRED) {
          if (waiter != null) {
            // Whatever the handle (fenced or not), the queue sees this hold's lease, counted
            // from its send: a stale, longer one would let the next head sleep past its end.
            waiter.entry.leaseSeen(attempt.sentAtOr(System.nanoTime()), attempt.lease());
            if (!handsOff()) {
              waiter.entry.handedLocally(false); // no handoff will come from this holder
            } else if (waiter.entry.hasOthers(waiter)) {
              // The next head waits for this thread's handoff rather than ask Redis at once,
              // but never past this hold's lease (it may end without a release of ours).
              waiter.entry.handedLocally(true);
            }
          }
          acquired = true;
          outcome = Outcome.ACQUIRED;
          return true;
        }
        long remaining = waitNanos == FOREVER ? Long.MAX_VALUE
            : waitNanos - (System.nanoTime() - start);
        if (remaining <= 0) {
          outcome = Outcome.TIMED_OUT;
          return false;
        }
        // A wait this short would be over about when the subscription is confirmed: retry
        // once at its end instead of paying the subscribe and unsubscribe round trips.
        if (waiter == null && failingSince == 0 && remaining > SHORT_WAIT_NANOS) {
          waiter = engine.subscriptions().join(names,
              names.kind().waitChannel(names, attempt.field), handsOff(), attempt.field,
              attempt.lease());
          continue;
        }
        long park = Math.min(ceilMillis(remaining), pttl >= 0 ? Math.max(1, pttl)
            : NO_EXPIRY_PARK_MS);
        park = Math.min(park, names.kind().maxParkMillis(engine));
        if (waiter == null || !waiter.subscribed()) {
          park = Math.min(park, failingSince != 0 ? OUTAGE_RETRY_MS : UNSUBSCRIBED_PARK_MS);
        }
        if (!parked) {
          parked = true;
          engine.waiting(1);
        }
        InterruptedException interruption = null;
        try {
          if (waiter != null) {
            if (!attempt.uncertain && engine.holds().get(attempt.id) == null) {
              waiter.offer(); // a releasing thread of this client may hand it over now
            }
            waiter.await(park);
          } else {
            Thread.sleep(park);
          }
        } catch (InterruptedException e) {
          interruption = e;
        }
        // Collect a handoff before anything else: a granted lock is taken even by a thread
        // that was interrupted or timed out meanwhile, an uncertain one is settled as ours.
        if (waiter != null && attempt.handedOver(waiter)) {
          acquired = true;
          outcome = Outcome.ACQUIRED;
          interrupted |= interruption != null;
          return true;
        }
        if (interruption != null) {
          if (interruptible) {
            outcome = Outcome.INTERRUPTED;
            throw interruption;
          }
          interrupted = true;
        }
        checkOpen();
      }
    } finally {
      if (parked) {
        engine.waiting(-1);
      }
      try {
        if (waiter != null) {
          engine.subscriptions().leave(waiter, acquired);
        }
        if (!acquired) {
          try {
            attempt.settle();
          } finally {
            if (attempt.waits) {
              names.kind().gaveUp(engine, names, attempt.field);
            }
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
        engine.observer().acquisition(template, outcome, System.nanoTime() - start);
        LockEvents.waitEnds(waitEvent, names.name(), template, outcome);
      }
    }
  }

  /**
   * Whether a releasing thread of this client may hand this lock directly to a waiter of this
   * handle: exclusive locks only (other kinds have their own queues or shared holds), and never
   * a fenced acquisition, whose grant must assign a token.
   */
  private boolean handsOff() {
    return names.kind() == LockKind.EXCLUSIVE && !fenced;
  }

  /**
   * Whether a fresh acquisition joins its lock's local queue without trying Redis first (see
   * {@link WaitEntry#isHead}): the call may wait longer than a short wait, is no re-entry and
   * owes nothing, the kind's waiters share the lock's channel (not a fair lock's own ones), and
   * — for a lock handed over locally (exclusive, not fenced) — a thread of this client was last
   * given it and the queue's subscription stands (after a release through Redis the lock may be
   * free: one look first, one script per acquisition, keeps the hot key's throughput), or — for
   * the other kinds — other threads of this client wait for the lock already. As a new head in
   * the first case its first park is bounded by {@link #QUEUED_PARK_MS}, so a holder that ends
   * otherwise than by a release of this client costs it at most that.
   */
  private boolean queuesLocally(long waitNanos, Attempt attempt) {
    if (waitNanos == 0 || attempt.uncertain
        || (waitNanos != FOREVER && waitNanos <= SHORT_WAIT_NANOS)
        || !names.kind().waitChannel(names, attempt.field).equals(names.channel())) {
      return false;
    }
    WaitEntry entry = engine.subscriptions().peek(names);
    if (entry == null || holdsAnySide(attempt.id.threadId())) {
      return false;
    }
    if (handsOff()) {
      // Queued behind a thread of this client that holds it; else (its last release went
      // through Redis, where the lock may be free) one look at Redis first.
      return entry.handedLocally() && entry.subscribed();
    }
    return entry.hasWaiters();
  }

  /**
   * Whether owner {@code ownerId} has any hold of this lock: a re-entry, or either side of a
   * read-write lock (a write holder taking the read lock to downgrade). Such an acquisition
   * never queues locally: the waiters ahead of it may wait for its own hold, so it would never
   * become head; it asks Redis, which grants it at once.
   */
  private boolean holdsAnySide(long ownerId) {
    if (holdOf(ownerId) != null) {
      return true;
    }
    if (names.kind() instanceof ReadWriteLockKind) {
      for (LockKind side : new LockKind[] {ReadWriteLockKind.READ, ReadWriteLockKind.WRITE}) {
        if (engine.holds().get(new Hold.Id(names.key() + side.idSuffix(), ownerId)) != null) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Right after the local-handoff budget sent this lock's release through Redis, a fresh or
   * woken attempt of this client pauses briefly so that a remote waiter can win (see
   * {@link WaitEntry#YIELD_NANOS}). A re-entry never pauses.
   *
   * @return whether an uninterruptible call was interrupted meanwhile (the flag is restored on
   *     return from the acquisition)
   */
  private boolean yieldToRemote(WaitEntry.Waiter waiter, long start, long waitNanos,
      Attempt attempt, boolean interruptible) throws InterruptedException {
    if (names.kind() != LockKind.EXCLUSIVE) {
      return false;
    }
    WaitEntry entry = waiter != null ? waiter.entry : engine.subscriptions().peek(names);
    if (entry == null) {
      return false;
    }
    long now = System.nanoTime();
    long pause = entry.yieldNanos(now);
    if (pause <= 0 || engine.holds().get(attempt.id) != null) {
      return false;
    }
    if (waitNanos != FOREVER) {
      pause = Math.min(pause, waitNanos - (now - start));
    }
    if (pause <= 0) {
      return false;
    }
    try {
      TimeUnit.NANOSECONDS.sleep(pause);
      return false;
    } catch (InterruptedException e) {
      if (interruptible) {
        throw e;
      }
      return true;
    }
  }

  /**
   * One acquisition call of one thread: the request it has in flight, if any, and how to settle
   * it if the call ends without an answer.
   */
  private final class Attempt {
    private final long threadId;
    /** The owner the hold is made for: the thread, or an {@link OwnedLockHold}. */
    private final Object owner;
    private final long leaseMillis;
    final Hold.Id id;
    final String field;
    /** Whether the call waits when refused (else it is a single try). */
    final boolean waits;
    /** The request being tried; kept until answered, so that re-sends are the same request. */
    private String requestId;
    private int requestExpected;
    /**
     * When {@link #requestId} was first sent (nanoTime): the earliest its grant can have run, so
     * a fixed lease granted by any of its sends ends no later than this plus the lease.
     */
    private long requestSentAt;
    /** Whether {@link #requestId} was sent and never answered. */
    boolean uncertain;
    /** Whether an interrupt ends the call's waits (for a connection too). */
    boolean interruptible;

    Attempt(long threadId, Object owner, long leaseMillis, boolean waits) {
      this.waits = waits;
      this.threadId = threadId;
      this.owner = owner;
      this.leaseMillis = leaseMillis;
      this.id = new Hold.Id(names.holdKey(), threadId);
      this.field = names.field(engine.fieldOf(threadId));
    }

    /** The lease in ms this acquisition sets. */
    long lease() {
      return leaseMillis == WATCHDOG ? engine.watchdogMillis() : leaseMillis;
    }

    /**
     * The thread woke from a park as a handoff candidate: collects what a releasing thread of
     * this client did meanwhile. Granted: the hold is opened exactly as for a grant of this
     * thread's own request sent when the handoff was. Uncertain: the request made for this
     * thread becomes its own unanswered request, so the next attempt re-sends it sealed (its
     * marker answers "granted" if the handoff ran) and giving up settles it (undone if it ran).
     *
     * @return whether the lock is now held
     */
    /** When the request that was granted was first sent (nanoTime), or {@code fallback}. */
    long sentAtOr(long fallback) {
      return requestSentAt != 0 ? requestSentAt : fallback;
    }

    boolean handedOver(WaitEntry.Waiter waiter) {
      int outcome = waiter.withdraw();
      if (outcome != WaitEntry.Waiter.GRANTED && outcome != WaitEntry.Waiter.UNCERTAIN) {
        return false;
      }
      WaitEntry.Grant g = waiter.grant();
      // Ours from now on: settled (undone) like any unanswered request unless opened below.
      requestId = g.requestId();
      requestExpected = 0;
      requestSentAt = g.sentAt();
      uncertain = true;
      if (outcome == WaitEntry.Waiter.GRANTED
          && opened(null, 0, lease(), g.sentAt(), g.pttl(), 0, false) == ACQUIRED) {
        uncertain = false;
        return true;
      }
      return false;
    }

    /**
     * One run of the acquire script (after settling what this thread's hold owes).
     *
     * @param refusalNanos how long a refused call (slot migration) is re-sent: the caller's
     *     remaining wait
     * @return {@link #ACQUIRED}, or the holder's remaining lease in ms (-1: no expiry)
     * @throws RedisUnavailableException if Redis did not answer
     * @throws LockException if this thread's hold was lost and this was a re-entry
     */
    long tryOnce(long refusalNanos) {
      checkOpen();
      Hold hold = engine.holds().get(id);
      long now = System.nanoTime();
      if (hold != null && hold.endedInDoubt()) {
        // Its final call got no answer: settled before the thread takes the lock again, so
        // that no copy of it can end the new hold.
        engine.settleNow(hold);
        engine.forgetEnded(hold);
        hold = null;
      } else if (hold != null && !hold.active()) {
        if (hold.count() > 0) {
          throw lostBeforeReentry(hold);
        }
        if (!engine.nothingOwed(hold)) {
          engine.settleNow(hold); // a release left pending included: sealed before a new hold
        }
        engine.holds().remove(id, hold);
        hold = null;
      } else if (hold != null && !hold.believedAt(now)) {
        engine.expire(hold);
        throw lostBeforeReentry(hold);
      } else if (hold != null && hold.giveBackOwed()) {
        // A composite acquisition's give-back that failed: finished before this re-entry counts.
        hold = finishGiveBack(hold, threadId);
        if (hold != null && !hold.active()) {
          throw lostBeforeReentry(hold);
        }
      } else if (hold != null && hold.pendingRelease() != null) {
        hold = settlePendingRelease(hold);
      }
      int expected = hold == null ? 0 : hold.count();
      if (uncertain && requestExpected != expected) {
        settle(); // never drop an unanswered request: it could still apply
      }
      boolean resend = uncertain;
      if (!resend) {
        requestId = engine.nextRequestId();
        requestExpected = expected;
        requestSentAt = System.nanoTime();
      }
      long lease = leaseMillis == WATCHDOG ? engine.watchdogMillis() : leaseMillis;
      String request = requestId;
      String assignToken = fenced && (hold == null || hold.token() == 0) ? "1" : "0";
      RedisTopology.Replicated replicated;
      List<?> reply;
      // The client's connections are a queue, not an error: wait for one within the call's own
      // wait (a single try waits about one command, as for its reply), else "not acquired".
      if (!engine.topology().enterAcquisition(!waits ? engine.topology().timeout.toNanos()
          : refusalNanos, interruptible)) {
        return 0;
      }
      // A Sentinel check another thread is asking for: waited for here, where an interrupt or
      // the call's own wait ends it, not in the borrow, which heeds neither.
      if (waits && (interruptible || refusalNanos != RedisTopology.UNBOUNDED)
          && !engine.topology().awaitMasterCheck(refusalNanos)) {
        engine.topology().leaveAcquisition();
        return 0;
      }
      long sentAt = System.nanoTime();
      int[] sends = {0}; // how often the call below sends it (a refused or unanswered re-send)
      if (hold != null) {
        hold.beginCall();
      }
      try {
        replicated = engine.topology().evalReplicated(names.kind().acquire(),
            keys(names.key(), names.markerPrefix() + request, names.tokenKey()),
            sealed -> {
              sends[0]++;
              return acquireArgs(field, waits, Long.toString(lease), field,
                  Integer.toString(expected),
                  sealed ? "1" : "0", Long.toString(engine.markerMillis(sealed)), assignToken,
                  Long.toString(TOKEN_KEY_MILLIS + lease));
            },
            resend, refusalNanos);
        reply = (List<?>) replicated.reply();
        uncertain = false;
      } catch (RedisUnavailableException e) {
        uncertain |= e.mayHaveRun(); // a refused re-send leaves an earlier send's doubt
        if (!e.mayHaveRun() && RedisTopology.exhausted(e.getCause())) {
          return 0; // no connection came free within the wait: not acquired, as for a permit
        }
        throw e;
      } finally {
        engine.topology().leaveAcquisition();
        if (hold != null) {
          hold.endCall();
        }
      }
      long status = number(reply.get(0));
      long value = number(reply.get(1));
      if (status == 0) {
        return value;
      }
      if (status == 1 && value == expected + 1) {
        if (!replicated.confirmed()) {
          rollBack(replicated);
        }
        return opened(hold, expected, lease, sentAt, number(reply.get(2)), number(reply.get(3)),
            sends[0] > 1);
      }
      if (status == -1 && hold != null) {
        engine.lose(hold, LossCause.GONE,
            "a re-entry found the lock no longer held by this thread: it expired, "
            + "was force-unlocked, or was lost in a Redis restart or failover");
        throw lostBeforeReentry(hold);
      }
      // Redis has a count for this thread that none of its calls can explain (or a request
      // settled earlier answered): give up whatever Redis holds under this thread's name.
      String reason = "Redis has hold count " + value + " for this thread where the client "
          + "expected " + expected + " (status " + status + ")";
      if (hold == null) {
        engine.register(Hold.owing(names, threadId, field,
            new Hold.Cleanup(engine.nextRequestId(), 0, "abandon",
                engine.leaseOverAfter(engine.watchdogMillis()))));
        throw new LockException("Lock '" + names.name() + "' was not acquired: " + reason
            + "; the stale hold is being removed");
      }
      if (engine.lose(hold, LossCause.COUNT_MISMATCH, reason)) {
        engine.oweAbandon(hold, expected, engine.watchdogMillis());
      }
      throw lostBeforeReentry(hold);
    }

    /**
     * The grant was not acknowledged by the replicas: a failover now could hand the lock to
     * someone else, so undo it and report it not granted.
     */
    private void rollBack(RedisTopology.Replicated replicated) {
      try {
        engine.resolve(names, field, requestId, requestExpected, "acquire",
            RedisTopology.ATTEMPTS);
      } catch (RuntimeException e) {
        // Unanswered, or refused with an error (a busy node): the grant may stand, and
        // settling the request undoes it, now or in the background.
        uncertain = true;
        throw e;
      }
      requestId = null;
      throw new NotReplicatedException("Lock '" + names.name() + "' was not granted: "
          + replicated.acknowledged() + " of " + replicated.replicas() + " replicas acknowledged "
          + "the acquisition in time (holdfast.redis.sync-replicas), so it was rolled back");
    }

    /**
     * Opens the section a grant answered: {@code sentAt} is when the send whose answer this is
     * went out, {@code pttl} the TTL that answer reports (a replay reports what the hold has left
     * then, not the lease), so the hold is believed no longer than Redis keeps it; the section's
     * own fixed lease counts from the request's first send, the earliest its grant can have run.
     *
     * <p>A grant whose time was already over when its answer came is never returned as
     * acquired: the caller would hold a lock that may be someone else's by now, with no token to
     * show (a hold no longer believed has none) — whether the answer is a replay (it reports
     * less time than the lease: it ran at an earlier send), the answer to a call sent more than
     * once (its lease counts from the first send), or a single send answered late. A fresh
     * acquisition undoes it and tries again as a new request; a re-entry's hold is lost. Only a
     * lease too short to be believed at all (within the clock-drift margin) is opened anyway,
     * when its answer is to a single send and no replay, so that it is reported lost at once,
     * as before, rather than tried for ever.
     *
     * @param resent whether the call was sent more than once since {@code sentAt}: the answer
     *     may be to a later send
     * @return {@link #ACQUIRED}, or 0 (not acquired: try again) for a stale grant
     */
    private long opened(Hold hold, int expected, long lease, long sentAt, long pttl,
        long token, boolean resent) {
      // -1: a key without expiry, which the lease bounds; anything else that is not a TTL
      // (a hold with no time left) confirms nothing.
      long ttl = pttl == -1 ? lease : Math.max(pttl, 0);
      long until = LockEngine.confirmedUntil(sentAt, ttl);
      boolean believable = LockEngine.confirmedUntil(sentAt, lease) - sentAt > 0;
      if (until - System.nanoTime() <= 0 && (ttl < lease || resent || believable)) {
        return staleGrant(hold, expected, lease);
      }
      Hold h = hold;
      if (h == null) {
        h = new Hold(names, threadId, field, template, owner);
        Hold previous = engine.holds().putIfAbsent(id, h);
        if (previous != null) {
          throw new IllegalStateException("Hold registry changed under thread " + threadId);
        }
      } else if (!h.active()) {
        // Its deadline passed while the re-entry was in flight: the hold stays lost, and the
        // count the re-entry added must go too.
        engine.oweAbandon(h, expected + 1, lease);
        throw lostBeforeReentry(h);
      }
      if (token > 0) {
        h.token(token);
      }
      long firstSent = sentAt - requestSentAt > 0 ? requestSentAt : sentAt;
      h.opened(new Hold.Section(leaseMillis == WATCHDOG, lease,
          firstSent + millisToNanos(lease)), until);
      engine.watchDeadline(h);
      if (engine.forcedSince(names.key(), firstSent)) {
        // Answered after this client force-unlocked the key: it may have run before the delete
        // (then it was acquired and force-unlocked, and is reported lost).
        loseForcedHolds(List.of(h), true, true);
      }
      return ACQUIRED;
    }

    /**
     * A replayed grant answered too late to be believed (see {@link #opened}): a fresh
     * acquisition's grant is undone (settled like an unanswered request: a copy still on its
     * way can never apply) and the caller tries again as a new request; a re-entry's hold is
     * lost, and the count it added is removed with it.
     *
     * @return 0: not acquired, the lock may be free now
     * @throws LockException for a re-entry
     */
    private long staleGrant(Hold hold, int expected, long lease) {
      if (hold == null) {
        uncertain = true;
        settle();
        return 0;
      }
      engine.lose(hold, LossCause.LEASE_EXPIRED, "a re-entry was answered only after the "
          + "hold's lease had run out");
      engine.oweAbandon(hold, expected + 1, lease);
      throw lostBeforeReentry(hold);
    }

    /**
     * The call ends without the lock: settle a request that got no answer, so that whatever it
     * did is undone and a delayed copy of it can never apply.
     */
    void settle() {
      if (!uncertain || engine.closed()) {
        return;
      }
      uncertain = false;
      Hold hold = engine.holds().get(id);
      int expected = requestExpected;
      if (hold != null && (!hold.active() || hold.count() != expected)) {
        hold = expected > 0 ? hold : null;
      }
      try {
        // One attempt: Redis just failed to answer this call; the background retries the rest.
        List<?> reply = engine.resolve(names, field, requestId, expected, "acquire", 1);
        long count = number(reply.get(0));
        if (expected > 0 && count != expected) {
          engine.lose(hold, count == 0 ? LossCause.GONE : LossCause.COUNT_MISMATCH, count == 0
              ? "a re-entry found the lock no longer held by this thread while Redis was "
                  + "unreachable"
              : "Redis has hold count " + count + " for this thread where the client expected "
                  + expected);
        }
      } catch (RuntimeException e) {
        long giveUp = engine.leaseOverAfter(Math.max(engine.watchdogMillis(),
            leaseMillis == WATCHDOG ? 0 : leaseMillis));
        Hold.Cleanup undo = new Hold.Cleanup(requestId, expected, expected > 0 ? "abandon"
            : "acquire", giveUp);
        if (expected > 0 && hold != null) {
          engine.lose(hold, LossCause.UNCERTAIN,
              "the outcome of a re-entry could not be confirmed while Redis was "
              + "unreachable, so the hold is given up");
          engine.owe(hold, undo);
        } else if (expected == 0) {
          engine.register(Hold.owing(names, threadId, field, undo));
        }
      }
    }

    /**
     * An earlier unlock of this hold got no answer. Find out whether it ran, and make sure a
     * delayed copy never runs later; the hold then reflects it.
     *
     * @return the hold, or null if that unlock was its last
     */
    private Hold settlePendingRelease(Hold hold) {
      Hold.Pending p = hold.pendingRelease();
      List<?> reply = engine.resolve(names, field, p.requestId(), p.expected(), "release",
          RedisTopology.ATTEMPTS);
      long count = number(reply.get(0));
      boolean ran = "d".equals(text(reply.get(1))) || (count == p.expected() - 1 && count > 0);
      hold.pendingRelease(null);
      if (ran && count == 0) {
        hold.closeNewest();
        if (p.expected() == 1) {
          engine.forget(hold);
          return null;
        }
        engine.lose(hold, LossCause.LEASE_EXPIRED,
            "its lease ran out while an inner section held it; the lock was "
            + "released at the inner unlock()");
        throw lostBeforeReentry(hold);
      }
      if (ran) {
        hold.closeNewest();
        hold.settledByReentry(p.requestId());
        if (p.leaseMillis() > 0) {
          // Capped when it went unanswered; renewals since count too.
          hold.believeAtLeastUntil(LockEngine.confirmedUntil(p.sentAt(), p.leaseMillis()));
          engine.watchDeadline(hold);
        }
        return hold;
      }
      if (count == p.expected()) {
        return hold; // it never ran, and now never will: the section is still open
      }
      engine.lose(hold, count == 0 ? LossCause.GONE : LossCause.COUNT_MISMATCH, count == 0
          ? "the lock was no longer held by this thread when its unlock() was settled"
          : "Redis has hold count " + count + " for this thread where the client expected "
              + p.expected());
      throw lostBeforeReentry(hold);
    }
  }

  private LockException lostBeforeReentry(Hold hold) {
    return new LockException("Lock '" + names.name() + "' was lost by " + thread()
        + " before this re-entry: " + hold.lostReason() + ". Nothing was acquired; unlock() "
        + "the open sections (each reports the loss) before acquiring it again");
  }

  @Override
  public void unlock() {
    release(Thread.currentThread().getId(), true);
  }

  /**
   * {@link #unlock()} for owner {@code ownerId}: the calling thread's id, or a {@link
   * OwnedLockHold}'s owner id (which serialises its calls).
   */
  void release(long ownerId) {
    release(ownerId, true);
  }

  /**
   * Gives back the hold the calling thread took of this lock as a member of a composite
   * acquisition ({@link MultiLock}) that gives up: an unlock, except that when this was the
   * thread's only section — taken by that acquisition, never seen by the application — and it
   * is found gone (force-unlocked, expired), nothing is reported: the thread never held the
   * composite lock, and what it asked for (the member released) is done; and when that release
   * fails (refused), the hold ends as a final release in doubt does ({@link #oweFailedRelease}):
   * nobody will unlock it. Otherwise exactly {@link #unlock()}.
   */
  void giveBack() {
    long threadId = Thread.currentThread().getId();
    Hold hold = holdOf(threadId);
    if (hold == null || hold.count() != 1) {
      returnTaken(threadId);
      return;
    }
    try {
      release(threadId, false);
    } catch (IllegalMonitorStateException e) {
      // Lost while the acquisition went on (reported then): nothing is left to give back.
    } catch (RuntimeException e) {
      oweFailedRelease(threadId, 1);
      throw e;
    }
  }

  /**
   * Gives back a section the calling thread took of this lock as a member of a composite
   * acquisition that gives up ({@link RedLock}'s lost round): exactly {@link #unlock()}, except
   * that a re-entered section whose release fails (not run, or no answer) stays owed as a
   * give-back ({@link #finishGiveBack}), so that it never takes the place of one of the
   * application's own unlocks.
   */
  void giveBackSection() {
    returnTaken(Thread.currentThread().getId());
  }

  /**
   * An unlock of the section a composite acquisition took; if it fails while the hold still
   * counts that section, the application does not know of it and will not unlock it
   * ({@link #oweFailedRelease}): with other sections it is marked owed on the hold
   * ({@link Hold#giveBackOwed()}), finished by the thread's next call on this lock; if it was
   * the hold's last (a final release refused), the hold ends as a final release in doubt does.
   */
  private void returnTaken(long threadId) {
    Hold hold = holdOf(threadId);
    if (hold != null && hold.giveBackOwed()) {
      Hold owing = hold;
      try {
        hold = finishGiveBack(hold, threadId); // an earlier one first, so the count is ours
      } catch (RuntimeException e) {
        oweFailedRelease(threadId, releaseStartsFrom(owing)); // this section is owed too
        throw e;
      }
    }
    int before = releaseStartsFrom(hold);
    try {
      release(threadId, true);
    } catch (IllegalMonitorStateException e) {
      throw e; // lost (its section closed): nothing is owed
    } catch (RuntimeException e) {
      oweFailedRelease(threadId, before);
      throw e;
    }
  }

  /**
   * {@return the count a thread's next release of a lock starts from: its {@code hold}'s count,
   * less the give-backs owed (finished first); 0 if none}
   */
  static int releaseStartsFrom(Hold hold) {
    return hold == null ? 0 : hold.count() - hold.giveBacksOwed();
  }

  /**
   * After a {@link RedLock}'s unlock() that ended without this member's release (a majority
   * released, or not held): the section its failed release left counted (started from {@code
   * from}, {@link #releaseStartsFrom}) is the application's no more. If the application holds
   * other sections, it is owed as a give-back, finished by the thread's next call on this lock;
   * if it was the application's last one (a give-back owed before failed again, so the final
   * release was never tried), nobody will call again: the hold ends here as a final release in
   * doubt does — never renewed, its field removed in the background whatever its count, no loss
   * reported. A hold lost meanwhile (its deadline passed: reported now, as an unlock reports it)
   * has the section closed here instead, and, if it was the last, is forgotten: its loss was
   * reported and no unlock will come to close it. Owner thread.
   */
  void oweFailedRelease(long threadId, int from) {
    Hold hold = holdOf(threadId);
    if (!leftCounted(hold, from)) {
      return; // went through, ended in doubt already, or closed as lost
    }
    if (hold.active() && !hold.believedAt(System.nanoTime())) {
      engine.expire(hold);
    }
    if (!hold.active()) {
      if (from == 1) {
        hold.takeGiveBacksOwed(); // lost: nothing is left to give back either
        while (hold.count() > 0) {
          hold.closeNewest();
        }
      } else {
        hold.closeNewest();
      }
      engine.forgetIfDone(hold);
      return;
    }
    if (from > 1) {
      hold.oweGiveBack();
      return;
    }
    hold.takeGiveBacksOwed();
    while (hold.count() > 1) {
      hold.closeNewest();
    }
    long leaseLeft = hold.leaseLeftMillis(System.nanoTime(), engine.watchdogMillis());
    hold.ending(true);
    engine.endInDoubt(hold, engine.abandonRequest(hold), "abandon", leaseLeft);
  }

  /** Marks the newest section of {@code hold} owed as a give-back if the failed call left it. */
  private void owedIfStillCounted(Hold hold, int before) {
    if (before > 1 && leftCounted(hold, before)) {
      hold.oweGiveBack();
    }
  }

  /**
   * {@return whether a failed release of {@code hold} that started from {@code from} sections
   * (give-backs owed not counted) left its section counted: still the thread's hold, not ended
   * in doubt, and its count less the give-backs owed still {@code from}}
   */
  private boolean leftCounted(Hold hold, int from) {
    return hold != null && from >= 1 && hold.count() - hold.giveBacksOwed() == from
        && !hold.endedInDoubt() && holdOf(hold.threadId) == hold;
  }

  /**
   * Finishes the give-backs owed by {@code hold} ({@link #returnTaken}, {@link
   * #oweFailedRelease}) before a call of the thread's own, one by one: re-sends the release left
   * in doubt (sealed, under its request) or sends it anew if it did not run. If the hold was
   * lost meanwhile, the given-back section is closed silently (the loss was reported when
   * found, and the caller's own call says it). Owner thread.
   *
   * @return the hold as it is now (its next call may go on), or null if it is gone
   * @throws RuntimeException if a give-back failed again: it and those not tried stay owed, and
   *     the caller's own call is not made
   */
  private Hold finishGiveBack(Hold hold, long ownerId) {
    int owed = hold.takeGiveBacksOwed();
    for (int i = 0; i < owed; i++) {
      int before = hold.count();
      try {
        release(ownerId, true);
      } catch (IllegalMonitorStateException e) {
        // Lost: the given-back section is closed; the thread's own sections report the loss.
      } catch (RuntimeException e) {
        owedIfStillCounted(hold, before);
        for (int left = i + 1; left < owed; left++) {
          hold.oweGiveBack(); // not tried: still counted
        }
        throw e;
      }
    }
    return engine.holds().get(hold.id);
  }

  /** {@link #release(long)}; {@code reportLoss} false: see {@link #giveBack()}. */
  private void release(long ownerId, boolean reportLoss) {
    checkOpen();
    Hold.Id id = new Hold.Id(names.holdKey(), ownerId);
    Hold found = engine.holds().get(id);
    if (found != null && found.giveBackOwed()) {
      found = finishGiveBack(found, ownerId); // never in place of this unlock
    }
    Hold hold = found;
    if (hold != null && hold.endedInDoubt()) {
      // The retry of an unlock whose final call got no answer: settle it now, then it is done.
      engine.settleNow(hold);
      engine.forgetEnded(hold);
      return;
    }
    if (hold == null || hold.count() == 0) {
      throw new IllegalMonitorStateException("Lock '" + names.name() + "' is not held by "
          + (ownerId < 0 ? "LockHold " + ownerId : thread()));
    }
    long now = System.nanoTime();
    if (hold.active() && !hold.believedAt(now)) {
      engine.expire(hold);
    }
    if (!hold.active()) {
      throw closeLost(hold);
    }
    int expected = hold.count();
    Hold.Pending pending = hold.pendingRelease();
    boolean resend = pending != null && pending.expected() == expected;
    String requestId = resend ? pending.requestId() : engine.nextRequestId();
    long lease = resend ? pending.leaseMillis() : expected == 1 ? WATCHDOG
        : hold.leaseAfterNewest(now, engine.watchdogMillis());
    long ttl = lease == WATCHDOG ? engine.watchdogMillis() : lease;
    long sentAt = resend ? pending.sentAt() : now;
    WaitEntry budgetOver = null;
    WaitEntry entry = null;
    long leaseLeft = hold.leaseLeftMillis(now, engine.watchdogMillis());
    if (expected == 1) {
      hold.ending(true); // whatever comes of it, the hold is never renewed again
    }
    if (expected == 1 && pending == null && handsOff() && hold.token() == 0) {
      entry = engine.subscriptions().peek(names);
      if (entry != null) {
        if (!entry.mayHandOff(now)) {
          budgetOver = entry; // this one goes through Redis, where a remote waiter can win
        } else {
          WaitEntry.Waiter waiter = entry.claimCandidate();
          if (waiter != null) {
            handOff(hold, waiter, entry, leaseLeft, reportLoss);
            return;
          }
        }
        entry.handedLocally(false); // the lock may be free soon: new acquirers ask Redis
      }
    }
    long left;
    hold.beginCall();
    try {
      RedisTopology.Replicated replicated = engine.topology().evalReplicated(
          names.kind().release(), keys(names.key(), names.markerPrefix() + requestId),
          sealed -> args(hold.field, hold.field, Long.toString(ttl), Integer.toString(expected),
              engine.topology().publishCommand(), Long.toString(engine.markerMillis(sealed)),
              names.channel(), sealed ? "1" : "0"),
          resend);
      left = number(replicated.reply());
      if (left == 0 && expected == 1) {
        hold.ended();
      }
      if (!replicated.confirmed()) {
        unconfirmed("unlock()", replicated);
      }
    } catch (RedisUnavailableException e) {
      if (expected == 1) {
        // Ran or not (refused by a migration to the end), the caller asked to end the hold: it
        // is over for the thread, never renewed, and released in the background.
        throw endInDoubt(hold, requestId, "abandon", leaseLeft,
            inDoubt(hold, "unlock()", "the release completes", leaseLeft, e));
      }
      if (e.mayHaveRun()) { // else nothing ran: the section stays open, as before the call
        hold.pendingRelease(new Hold.Pending(requestId, expected, ttl, sentAt));
        // If it ran, it set the key's expiry to what the sections left need, maybe shorter than
        // what the hold was believed for: believed no longer than that.
        hold.believeAtMostUntil(LockEngine.confirmedUntil(sentAt, ttl));
        engine.watchDeadline(hold);
      }
      throw e;
    } catch (RuntimeException e) {
      if (expected == 1) {
        endRefused(hold);
      }
      throw e;
    } finally {
      hold.endCall();
    }
    hold.pendingRelease(null);
    // Pause this client's own attempts only if someone else is there to take the lock: with no
    // other subscriber the pause would leave the lock idle (unsubscribed remote waiters of 5 ms
    // or less still get their chance at each of these releases).
    if (left == 0 && expected == 1 && budgetOver != null && engine.topology().othersSubscribed(
        names.key(), names.channel(), budgetOver.subscribed() ? 1 : 0)) {
      budgetOver.yieldToRemote();
    }
    released(hold, expected, left, sentAt, ttl, reportLoss, resend);
  }

  /**
   * Applies the answer of a release (or handoff) of {@code hold} that was sent with
   * {@code expected}: the count left, 0 if the hold ended, -1 if it was not held, -2 if Redis
   * had another count.
   */
  private void released(Hold hold, int expected, long left, long sentAt, long ttl,
      boolean reportLoss, boolean resent) {
    if (left == 0 && expected == 1) {
      engine.forget(hold);
      if (!hold.active()) {
        // Its deadline passed while the release was in flight; the release still removed it.
        throw new IllegalMonitorStateException(lostMessage(hold));
      }
      return;
    }
    if (!hold.active()) {
      throw closeLost(hold);
    }
    if (left == expected - 1 && left > 0) {
      hold.closeNewest();
      if (resent) {
        // Capped when its first send went unanswered; renewals since count too.
        hold.believeAtLeastUntil(LockEngine.confirmedUntil(sentAt, ttl));
      } else {
        hold.confirm(LockEngine.confirmedUntil(sentAt, ttl));
      }
      engine.watchDeadline(hold);
      return;
    }
    if (left == 0) {
      // The sections still open had no lease left: this unlock ended the hold.
      hold.closeNewest();
      engine.lose(hold, LossCause.LEASE_EXPIRED,
          "its lease of " + hold.fixedLeaseMillis() + "ms ran out while an inner "
          + "section held it; the lock was released at the inner unlock()");
      return;
    }
    if (left == -1 && !reportLoss && expected == 1) {
      engine.forgetUnreported(hold, "given back by a composite acquisition, found gone");
      return;
    }
    if (left == -1) {
      engine.lose(hold, LossCause.GONE,
          "unlock() found the lock no longer held by " + hold.thisOwner() + ": it expired, "
          + "was force-unlocked, or was lost in a Redis restart or failover");
    } else if (engine.lose(hold, LossCause.COUNT_MISMATCH,
        "Redis has another hold count for " + hold.thisOwner() + " than the "
        + expected + " the client expected")) {
      engine.oweAbandon(hold, expected, engine.watchdogMillis());
    }
    throw closeLost(hold);
  }

  /**
   * The final unlock of {@code hold}, handing the lock to {@code waiter} (claimed, a thread of
   * this client parked for this lock) in one {@link LockScripts#TRANSFER} call. The releaser's
   * side is exactly a final release's: answered, it ends or reports the hold; unanswered, it is
   * left pending under the transfer's release request, whose marker answers the re-send. The
   * waiter learns the outcome before this returns: granted (confirmed by the replicas when they
   * are required), declined (nothing changed), or uncertain, which it settles as its own
   * unanswered acquisition under the request made for it.
   */
  private void handOff(Hold hold, WaitEntry.Waiter waiter, WaitEntry entry, long leaseLeft,
      boolean reportLoss) {
    String releaseId = engine.nextRequestId();
    String grantId = engine.nextRequestId();
    long ttl = engine.watchdogMillis(); // as a final release records it when unanswered
    int outcome = WaitEntry.Waiter.UNCERTAIN;
    long sentAt = System.nanoTime();
    // Sent now whatever the outcome: an uncertain grant's lease counts from here too.
    WaitEntry.Grant grant = new WaitEntry.Grant(grantId, sentAt, 0);
    long status;
    long value;
    hold.beginCall();
    try {
      RedisTopology.Replicated replicated = engine.topology().evalReplicated(
          LockScripts.TRANSFER, List.of(names.key(), names.markerPrefix() + releaseId,
              names.markerPrefix() + grantId),
          sealed -> List.of(hold.field, waiter.field, Long.toString(waiter.leaseMillis),
              Long.toString(engine.markerMillis(true))),
          false);
      List<?> reply = (List<?>) replicated.reply();
      status = number(reply.get(0));
      value = number(reply.get(1));
      if (status == 0) {
        hold.ended(); // an earlier copy handed it over; the waiter's hold has ended since
        outcome = WaitEntry.Waiter.DECLINED;
      } else if (status == 1) {
        hold.ended();
        if (replicated.confirmed()) {
          entry.leaseSeen(sentAt, waiter.leaseMillis); // before the waiter can leave the queue
          entry.handedLocally(true);
          outcome = WaitEntry.Waiter.GRANTED;
          grant = new WaitEntry.Grant(grantId, sentAt, value);
        } else {
          // The waiter's sealed re-send waits for the replicas again, and rolls back if it
          // is still unconfirmed; for the releaser the hold is over either way.
          unconfirmed("unlock() handing the lock to another thread", replicated);
        }
      } else if (status == -1 || status == -2) {
        outcome = WaitEntry.Waiter.DECLINED;
      }
    } catch (RedisUnavailableException e) {
      if (!e.mayHaveRun()) {
        outcome = WaitEntry.Waiter.DECLINED; // nothing ran: the waiter goes on waiting
      }
      // The releaser's hold ends either way and is released in the background; an uncertain
      // waiter settles its side as its own unanswered acquisition (see finally).
      throw endInDoubt(hold, releaseId, "abandon", leaseLeft,
          inDoubt(hold, "unlock() handing the lock to another thread", "the release completes",
              leaseLeft, e));
    } catch (RuntimeException e) {
      endRefused(hold);
      throw e;
    } finally {
      hold.endCall();
      if (outcome != WaitEntry.Waiter.GRANTED) {
        entry.handedLocally(false);
      }
      waiter.outcome(outcome, grant);
    }
    if (status == -3) {
      // Unreachable with fresh request ids; if it happens, settle it as a handoff in doubt.
      engine.endInDoubt(hold, releaseId, "abandon", leaseLeft);
      throw new LockException("Lock '" + names.name() + "': the handoff to another thread "
          + "found its requests settled already; the release completes in the background");
    }
    if (status == 1) {
      engine.handedOff();
      entry.handedOff(sentAt);
    }
    released(hold, 1, status >= 0 ? 0 : status, sentAt, ttl, reportLoss, false);
  }

  /**
   * The exception of a call that would have ended the hold and got no answer; the hold was
   * handed to {@link LockEngine#endInDoubt}.
   */
  private LockException inDoubt(Hold hold, String call, String completion, long leaseLeft,
      RedisUnavailableException cause) {
    // Refused to the end (a slot migration) is "did not run", and says so (mayHaveRun false).
    return new RedisUnavailableException(call + " of lock '" + names.name() + "' by "
        + owner(hold) + (cause.mayHaveRun()
            ? " got no answer from Redis, so whether it ran is unknown."
            : " was refused by Redis until its time was up, so it did not run.")
        + " The hold is "
        + "over for this thread and no longer renewed; " + completion + " in the background "
        + "as soon as Redis answers, and the lock expires within " + leaseLeft + "ms at the "
        + "latest (calling unlock() again settles it now). Cause: " + cause.getMessage(), cause,
        cause.mayHaveRun());
  }

  /**
   * Like {@link #unlock()}, but when this unlock would end the hold the lock stays held in Redis
   * for {@code remainingMillis} more and then expires: renewal stops and the hold is forgotten
   * here, without a loss. A nested section, or nothing remaining, is a plain unlock.
   */
  void unlockAfter(long remainingMillis) {
    unlockAfter(Thread.currentThread().getId(), remainingMillis);
  }

  /** {@link #unlockAfter(long)} for owner {@code ownerId}, as {@link #release(long)}. */
  void unlockAfter(long ownerId, long remainingMillis) {
    checkOpen();
    Hold found = holdOf(ownerId);
    if (found != null && found.giveBackOwed()) {
      found = finishGiveBack(found, ownerId); // never in place of this unlock
    }
    Hold hold = found;
    if (remainingMillis <= 0 || hold == null || hold.count() != 1 || !hold.active()
        || hold.pendingRelease() != null || !hold.believedAt(System.nanoTime())) {
      release(ownerId); // reports whatever is wrong, as unlock() does
      return;
    }
    long keep = Math.min(remainingMillis, MAX_LEASE_MILLIS);
    long leaseLeft = hold.leaseLeftMillis(System.nanoTime(), engine.watchdogMillis());
    String requestId = engine.nextRequestId();
    long kept;
    hold.ending(true); // whatever comes of it, the hold is never renewed again
    hold.beginCall();
    try {
      RedisTopology.Replicated replicated = engine.topology().evalReplicated(names.kind().keep(),
          keys(names.key(), names.markerPrefix() + requestId),
          sealed -> args(hold.field, hold.field, Long.toString(keep), "1",
              Long.toString(engine.markerMillis(true)), engine.topology().publishCommand(),
              names.channel()), false);
      kept = number(replicated.reply());
      if (!replicated.confirmed()) {
        unconfirmed("unlock() keeping the lock " + keep + "ms", replicated);
      }
    } catch (RedisUnavailableException e) {
      // Sealed, not undone: kept as asked if it ran, else the field expires with its lease.
      throw endInDoubt(hold, requestId, "release", Math.max(leaseLeft, keep),
          inDoubt(hold, "unlock() keeping the lock " + keep + "ms", "the keep is settled",
              Math.max(leaseLeft, keep), e));
    } catch (RuntimeException e) {
      endRefused(hold);
      throw e;
    } finally {
      hold.endCall();
    }
    if (kept == 1) {
      engine.forget(hold);
      return;
    }
    if (kept == -3) {
      // Unreachable with a fresh request id; if it happens, settle it as a keep in doubt.
      engine.endInDoubt(hold, requestId, "release", Math.max(leaseLeft, keep));
      throw new LockException("Lock '" + names.name() + "': keeping the lock found its request "
          + "settled already; it is settled in the background");
    }
    if (kept == -2) {
      if (engine.lose(hold, LossCause.COUNT_MISMATCH, "Redis has another hold count for this "
          + "thread than the 1 the client expected")) {
        engine.oweAbandon(hold, 1, engine.watchdogMillis());
      }
      throw closeLost(hold);
    }
    engine.lose(hold, LossCause.GONE, "unlock() found the lock no longer held by "
        + hold.thisOwner() + ": it expired, was force-unlocked, or was lost in a Redis restart "
        + "or failover");
    throw closeLost(hold);
  }

  private void unconfirmed(String call, RedisTopology.Replicated replicated) {
    LOG.log(System.Logger.Level.WARNING, () -> call + " of lock '" + names.name() + "' was "
        + "acknowledged by " + replicated.acknowledged() + " of " + replicated.replicas()
        + " replicas in time: after a failover the lock may be held again until its lease ends");
  }

  /**
   * The final call of {@code hold} got no answer: ends the hold in doubt ({@link
   * LockEngine#endInDoubt}) and returns what the caller throws: {@code inDoubt}, or, if the
   * hold was declared lost while that call was in flight (its lease passed: the call was
   * refused or unanswered for longer, and its LockLost is out), the loss, as an unlock of a
   * lost hold reports it; a retry would find nothing left to say it.
   */
  private RuntimeException endInDoubt(Hold hold, String requestId, String kind, long leaseMillis,
      LockException inDoubt) {
    engine.endInDoubt(hold, requestId, kind, leaseMillis);
    if (!hold.active()) {
      IllegalMonitorStateException lost = new IllegalMonitorStateException(lostMessage(hold));
      lost.addSuppressed(inDoubt);
      return lost;
    }
    return inDoubt;
  }

  /** An unlock of a lost hold: closes the section locally and says why it was lost. */
  private IllegalMonitorStateException closeLost(Hold hold) {
    String message = lostMessage(hold);
    hold.closeNewest();
    engine.forgetIfDone(hold);
    return new IllegalMonitorStateException(message);
  }

  private String lostMessage(Hold hold) {
    return "Lock '" + names.name() + "' was lost by " + owner(hold) + " before "
        + (hold.ownedByObject() ? "release()" : "unlock()") + ": " + hold.lostReason();
  }

  /**
   * A hold owned by a new {@link OwnedLockHold}: the acquisition loop runs for that object's
   * owner id on the calling thread, as it would for the thread (waiting, local handoff, settling,
   * fencing), and the hold is then that object's.
   */
  @Override
  public LockHold acquire(Duration waitTime, Duration leaseTime) throws InterruptedException {
    long lease = leaseMillis(leaseTime);
    return acquireOwned(waitTime, waitNanos(waitTime), lease);
  }

  private OwnedLockHold acquireOwned(Duration waitTime, long waitNanos, long lease)
      throws InterruptedException {
    OwnedLockHold owned = new OwnedLockHold(this, engine.nextOwnerId());
    if (!acquire(owned.ownerId, owned, waitNanos, lease, true)) {
      throw new LockNotAcquiredException(names.name(), waitTime, null);
    }
    owned.acquired(holdOf(owned.ownerId), fenced);
    return owned;
  }

  /**
   * Runs {@link #acquire(Duration, Duration)} on the client's asynchronous executor
   * ({@link LockEngine#asyncExecutor()}); cancelling the returned future interrupts that
   * acquisition while it runs (nothing is then held), and a hold granted anyway is released.
   */
  @Override
  public CompletionStage<LockHold> acquireAsync(Duration waitTime, Duration leaseTime) {
    long lease = leaseMillis(leaseTime);
    long wait = waitNanos(waitTime);
    AsyncAcquisition acquisition = new AsyncAcquisition(waitTime, wait, lease);
    try {
      engine.asyncExecutor().execute(acquisition);
    } catch (RejectedExecutionException | IllegalStateException e) {
      acquisition.result.completeExceptionally(new IllegalStateException(
          "The lock client is closed (lock '" + names.name() + "')", e));
    }
    return acquisition.result;
  }

  /**
   * One {@link #acquireAsync}: the future it returned, and the thread running it while it may be
   * interrupted by a cancellation. The worker is interrupted only while it is in the
   * acquisition, and its interrupt flag is cleared before it goes on (to a release of a hold
   * granted too late, or to the executor's next task).
   */
  private final class AsyncAcquisition implements Runnable {
    final CompletableFuture<LockHold> result = new CompletableFuture<>();
    private final Duration waitTime;
    private final long waitNanos;
    private final long lease;
    /** The thread in the acquisition, or null; guarded by this. */
    private Thread worker;

    AsyncAcquisition(Duration waitTime, long waitNanos, long lease) {
      this.waitTime = waitTime;
      this.waitNanos = waitNanos;
      this.lease = lease;
      result.whenComplete((h, t) -> {
        if (result.isCancelled()) {
          interruptWorker();
        }
      });
    }

    private synchronized void interruptWorker() {
      if (worker != null) {
        worker.interrupt();
      }
    }

    @Override
    public void run() {
      synchronized (this) {
        if (result.isDone()) {
          return; // cancelled before it started
        }
        worker = Thread.currentThread();
      }
      OwnedLockHold owned = null;
      Throwable failure = null;
      try {
        owned = acquireOwned(waitTime, waitNanos, lease);
      } catch (InterruptedException e) {
        failure = engine.closed() // interrupted by the close
            ? new IllegalStateException("The lock client is closed (lock '" + names.name()
                + "')", e)
            : new LockNotAcquiredException(names.name(), waitTime, e);
      } catch (Throwable t) {
        failure = t;
      } finally {
        synchronized (this) {
          worker = null;
        }
        Thread.interrupted(); // a cancellation's interrupt is for the acquisition only
      }
      if (owned == null) {
        result.completeExceptionally(failure);
      } else if (!result.complete(owned)) {
        try {
          owned.release(); // cancelled while it was being granted
        } catch (RuntimeException e) {
          LOG.log(System.Logger.Level.DEBUG, () -> "Releasing lock '" + names.name()
              + "' acquired for a cancelled acquireAsync failed: " + e.getMessage());
        }
      }
    }
  }

  /** A lease given as a Duration: null for the watchdog, else as {@link #leaseMillis}. */
  private static long leaseMillis(Duration leaseTime) {
    if (leaseTime == null) {
      return WATCHDOG;
    }
    if (leaseTime.compareTo(Duration.ofMillis(MAX_LEASE_MILLIS)) > 0) {
      throw new IllegalArgumentException("leaseTime must be between 1 ms and "
          + MAX_LEASE_MILLIS + " ms (365 days), but was " + leaseTime);
    }
    if (leaseTime.isNegative() || leaseTime.isZero()) {
      throw new IllegalArgumentException("leaseTime must be between 1 ms and "
          + MAX_LEASE_MILLIS + " ms (365 days), but was " + leaseTime
          + "; use null for a watchdog-renewed lock");
    }
    return leaseMillis(leaseTime.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** A wait given as a Duration: null for no bound, else as {@link #waitNanos(long, TimeUnit)}. */
  private static long waitNanos(Duration waitTime) {
    if (waitTime == null) {
      return FOREVER;
    }
    if (waitTime.isNegative() || waitTime.isZero()) {
      return 0;
    }
    try {
      return waitTime.toNanos();
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("DistributedLock has no conditions");
  }

  @Override
  public boolean forceUnlock() {
    checkOpen();
    String field = names.field(engine.fieldOf(Thread.currentThread().getId()));
    String marker = names.markerPrefix() + engine.nextRequestId();
    List<String> keys = new java.util.ArrayList<>(keys(names.key()));
    keys.add(marker);
    List<String> args = new java.util.ArrayList<>(args(field, engine.topology().publishCommand(),
        names.channel()));
    args.add(Long.toString(engine.markerMillis(true)));
    RedisTopology.Replicated replicated;
    try {
      replicated = engine.topology().evalReplicated(names.kind().forceRelease(), keys,
          sealed -> args, false);
    } catch (RuntimeException e) {
      if (!(e instanceof RedisUnavailableException u) || u.mayHaveRun()) {
        // A send may have run, or may still run, until the request is sealed: holds found gone
        // are lost now; one that cannot be asked about is decided when the seal lands.
        engine.forced(names.key(), System.nanoTime());
        loseForcedHolds(true, false);
        engine.oweSeal(new ForceSeal(marker, System.nanoTime()));
      }
      throw e;
    }
    engine.forced(names.key(), System.nanoTime());
    boolean deleted = number(replicated.reply()) == 1;
    if (deleted && !replicated.confirmed()) {
      unconfirmed("forceUnlock()", replicated);
    }
    // A retry is answered with what the request did (it runs once), but an acquisition in
    // flight may have run before or after the delete, and a read-write lock's other side may
    // hold it: each of this client's holds is asked about. One answered later checks itself
    // (see forcedSince).
    loseForcedHolds(deleted, true);
    return deleted;
  }

  /**
   * After a {@code forceUnlock()} of this key by this client: each of its holds of the key is
   * lost unless Redis still has its field (asked in one query). Not while its owner is releasing
   * it (the release may have taken the field; it reports what it finds).
   *
   * @param mayHaveDeleted whether the call deleted the key, or may have (no answer)
   * @param unknownIsLost whether a hold Redis cannot be asked about is lost (the call ran: a
   *     hold it may have deleted must not be believed), or left for the seal to decide (the
   *     call got no answer)
   */
  private void loseForcedHolds(boolean mayHaveDeleted, boolean unknownIsLost) {
    List<Hold> mine = new java.util.ArrayList<>();
    for (Hold h : engine.holds().values()) {
      if (h.names.key().equals(names.key()) && h.count() > 0) {
        mine.add(h);
      }
    }
    loseForcedHolds(mine, mayHaveDeleted, unknownIsLost);
  }

  /**
   * A final call of {@code hold} was answered with an error: nothing changed, the hold goes on —
   * unless a force-unlock's check of this client found its field gone meanwhile and skipped it
   * (the call was to report what it found): checked again now. Recorded on the hold, under its
   * lock, so that no order of the two threads loses the check.
   */
  private void endRefused(Hold hold) {
    if (hold.endRefused()) {
      loseForcedHolds(List.of(hold), true, true);
    }
  }

  /** {@link #loseForcedHolds(boolean, boolean)} for {@code mine}, holds of this key. */
  private void loseForcedHolds(List<Hold> mine, boolean mayHaveDeleted, boolean unknownIsLost) {
    if (mine.isEmpty()) {
      return;
    }
    List<String> counts;
    try {
      counts = engine.topology().query(() -> engine.topology().commands().hmget(names.key(),
          mine.stream().map(h -> h.field).toArray(String[]::new)));
    } catch (RuntimeException e) {
      if (!unknownIsLost) {
        return;
      }
      counts = java.util.Collections.nCopies(mine.size(), null);
    }
    for (int i = 0; i < mine.size(); i++) {
      loseIfForced(mine.get(i), counts.get(i) != null, mayHaveDeleted);
    }
  }

  /**
   * {@code hold} is lost unless {@code present} in Redis after a {@code forceUnlock()} of its
   * key by this client — unless its owner's final call is in flight.
   */
  private void loseIfForced(Hold hold, boolean present, boolean mayHaveDeleted) {
    if (!present && hold.count() > 0 && !hold.skipWhileEnding()) {
      if (mayHaveDeleted) {
        engine.lose(hold, LossCause.FORCE_UNLOCKED, "forceUnlock() was called on this client");
      } else {
        engine.lose(hold, LossCause.GONE, "forceUnlock() on this client found the lock not "
            + "held: it had expired, been force-unlocked, or been lost in a Redis restart or "
            + "failover");
      }
    }
  }

  /**
   * The seal of an unanswered {@code forceUnlock()} request, owed until it lands, so that a copy
   * still on its way can never delete a lock taken since. If a copy had run before the seal,
   * this client's holds of the key are checked again, and so is every acquisition answered
   * after that. As every request marker, the seal covers copies delayed up to its lifetime
   * (the seal time, at least a minute).
   */
  private final class ForceSeal implements LockEngine.SealOwed {
    private final String marker;
    private final long sentAt;

    ForceSeal(String marker, long sentAt) {
      this.marker = marker;
      this.sentAt = sentAt;
    }

    @Override
    public void settle() {
      Object copyRan = engine.topology().eval(LockScripts.FORCE_SEAL, List.of(marker),
          List.of(Long.toString(engine.markerMillis(true))));
      if (number(copyRan) == 1) { // a copy ran before the seal: what it deleted is lost
        engine.forced(names.key(), System.nanoTime());
        loseForcedHolds(true, true);
      }
    }

    @Override
    public long sentAt() {
      return sentAt;
    }

    @Override
    public String toString() {
      return "an unanswered forceUnlock() of '" + names.name() + "'";
    }
  }

  @Override
  public boolean isLocked() {
    return query(() -> names.kind().isLocked(engine, names));
  }

  @Override
  public boolean isHeldByCurrentThread() {
    return isHeldByThread(Thread.currentThread().getId());
  }

  @Override
  public boolean isHeldByThread(long threadId) {
    if (!believed(threadId)) {
      return false;
    }
    return query(() -> fieldInRedis(names.field(engine.fieldOf(threadId))));
  }

  @Override
  public int getHoldCount() {
    long threadId = Thread.currentThread().getId();
    Hold hold = holdOf(threadId);
    if (hold != null && hold.giveBackOwed()) {
      // A composite's failed give-back is finished first, as by any call of the thread's: until
      // then Redis may count a section the application never took.
      finishGiveBack(hold, threadId);
    }
    if (!believed(threadId)) {
      return 0;
    }
    String count = query(() -> engine.topology().commands()
        .hget(names.key(), names.field(engine.fieldOf(threadId))));
    return count == null ? 0 : Integer.parseInt(count);
  }

  /**
   * For a composite lock's {@code unlock()} that finishes an earlier one in which this lock's
   * section was already released ({@link MultiLock#unlock()}): whether the calling thread's hold
   * of this lock has been lost since, with sections still open. A hold past its local deadline
   * is declared lost now, as {@code unlock()} would. Nothing is sent and no section is closed:
   * the open sections are the composite lock's outer ones, whose own unlocks report the loss
   * again. Owner thread.
   *
   * @return the exception an {@code unlock()} of the hold would throw, or null if the hold is
   *     not lost (or there is none)
   */
  IllegalMonitorStateException lostSinceReleased() {
    Hold hold = holdOf(Thread.currentThread().getId());
    if (hold == null || hold.count() == 0 || hold.endedInDoubt()) {
      return null;
    }
    if (hold.active() && !hold.believedAt(System.nanoTime())) {
      engine.expire(hold);
    }
    return hold.active() ? null : new IllegalMonitorStateException(lostMessage(hold));
  }

  /** {@return the registry's record of the thread's (or owner's) hold of this lock, or null} */
  Hold holdOf(long threadId) {
    return engine.holds().get(new Hold.Id(names.holdKey(), threadId));
  }

  /**
   * The commit guard's check of {@code hold} ({@link HoldCheck}): believed (not lost, not
   * released nor being released, within its local deadline; no I/O), then, with
   * {@code inRedis}, its field confirmed in Redis by an answer that came within the local
   * deadline. A field Redis no longer has is a loss, reported as a renewal would report it —
   * unless the owner's final call is in flight ({@link Hold#ending()}), which removes the field
   * itself: a release is never reported as a loss. Any thread.
   *
   * @param untilReleased whether the check relies on the hold only until its owner releases it
   *     (a {@code @Locked} call's hold): a hold that ended by its release, never lost, passes
   * @return null if the hold passed, else why not, as what befell the lock ("was lost: …")
   */
  String commitCheck(Hold hold, boolean inRedis, boolean untilReleased) {
    if (hold == null) {
      return "was not held";
    }
    if (untilReleased && hold.releasedUnlost()) {
      return null;
    }
    String reason = notLive(hold);
    if (reason != null || !inRedis) {
      return reason;
    }
    boolean present;
    try {
      present = engine.topology().query(() -> fieldInRedis(hold.field));
    } catch (RuntimeException e) {
      boolean unreachable = e instanceof redis.clients.jedis.exceptions.JedisConnectionException;
      engine.observer().redisError("query", unreachable);
      return "could not be confirmed in Redis: " + (unreachable ? "Redis did not answer"
          : "Redis answered with an error") + " (" + e.getMessage() + "); the hold itself is "
          + "not known to be lost";
    }
    // Absent while the owner's final call is in flight, or after it: the release took it.
    if (!present && !hold.ending() && hold.count() > 0 && holdOf(hold.threadId) == hold) {
      engine.lose(hold, LossCause.GONE, "the check before a commit found the lock no longer "
          + "held in Redis: it expired, was force-unlocked, or was lost in a Redis restart or "
          + "failover");
    }
    if (untilReleased && hold.releasedUnlost()) {
      return null;
    }
    return notLive(hold); // also: an answer after the local deadline confirms nothing
  }

  /** Null if {@code hold} is live ({@link LockEngine#live}) and not being released, else why. */
  private String notLive(Hold hold) {
    if (engine.live(hold) && holdOf(hold.threadId) == hold) {
      return hold.ending() ? "was being released" : null;
    }
    return hold.active() ? "was released" : "was lost: " + hold.lostReason();
  }

  /** Whether this client believes the thread holds the lock; a lease past its deadline is lost. */
  private boolean believed(long threadId) {
    checkOpen();
    return engine.live(holdOf(threadId));
  }

  @Override
  public long remainTimeToLive() {
    return query(() -> engine.topology().commands().pttl(names.key()));
  }

  /** {@return whether Redis has {@code field} in this lock's hash} Through a query's permit. */
  private boolean fieldInRedis(String field) {
    return engine.topology().commands().hexists(names.key(), field);
  }

  private <T> T query(Supplier<T> command) {
    checkOpen();
    try {
      // With a permit, as acquisitions: unbounded in number, queries must not starve renewals.
      return engine.topology().query(command);
    } catch (JedisException e) {
      engine.observer().redisError("query",
          e instanceof redis.clients.jedis.exceptions.JedisConnectionException);
      throw new LockException("Redis query on lock '" + names.name() + "' failed: "
          + e.getMessage(), e);
    }
  }

  /** The standard keys of a call followed by the kind's extra keys. */
  private List<String> keys(String... standard) {
    return withExtras(standard, names.kind().extraKeys(names));
  }

  /** An acquisition's standard arguments followed by the kind's extra ones. */
  private List<String> acquireArgs(String field, boolean waits, String... standard) {
    return withExtras(standard, names.kind().acquireExtraArgs(engine, names, field, waits));
  }

  /** The standard arguments of a call by {@code field} followed by the kind's extra ones. */
  private List<String> args(String field, String... standard) {
    return withExtras(standard, names.kind().extraArgs(engine, names, field));
  }

  /** No copy for the exclusive lock, whose kind adds nothing: this is every call's path. */
  private static List<String> withExtras(String[] standard, List<String> extra) {
    if (extra.isEmpty()) {
      return List.of(standard);
    }
    List<String> all = new java.util.ArrayList<>(standard.length + extra.size());
    all.addAll(List.of(standard));
    all.addAll(extra);
    return all;
  }

  /** The hold's owner for messages: the calling thread, or the LockHold. */
  private static String owner(Hold hold) {
    return hold.ownedByObject() ? hold.ownerName() : thread();
  }

  private static String thread() {
    Thread t = Thread.currentThread();
    return "thread " + t.getName() + " (id " + t.getId() + ")";
  }

  private void checkOpen() {
    if (engine.closed()) {
      throw new IllegalStateException("The lock client is closed (lock '" + names.name() + "')");
    }
  }

  private static long number(Object o) {
    return ((Number) o).longValue();
  }

  private static String text(Object o) {
    return o instanceof byte[] b ? new String(b, java.nio.charset.StandardCharsets.UTF_8)
        : String.valueOf(o);
  }

  static long leaseMillis(long leaseTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    long millis = unit.toMillis(leaseTime);
    if (leaseTime <= 0 || millis > MAX_LEASE_MILLIS) {
      throw new IllegalArgumentException("leaseTime must be between 1 ms and "
          + MAX_LEASE_MILLIS + " ms (365 days), but was " + leaseTime + " " + unit
          + (leaseTime <= 0 ? "; use the methods without a lease for a watchdog-renewed lock"
              : ""));
    }
    // Round sub-millisecond leases up: Redis counts in milliseconds.
    return unit.convert(millis, TimeUnit.MILLISECONDS) < leaseTime ? millis + 1 : millis;
  }

  private static long waitNanos(long waitTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    return waitTime <= 0 ? 0 : unit.toNanos(waitTime); // saturates at Long.MAX_VALUE
  }

  private static long millisToNanos(long millis) {
    return TimeUnit.MILLISECONDS.toNanos(millis); // saturates
  }

  /** Whole milliseconds covering {@code nanos}, without overflow. */
  private static long ceilMillis(long nanos) {
    long millis = TimeUnit.NANOSECONDS.toMillis(nanos);
    return TimeUnit.MILLISECONDS.toNanos(millis) < nanos ? millis + 1 : millis;
  }

  @Override
  public String toString() {
    return names.kind().handleName() + "[" + names.name() + "]";
  }
}
