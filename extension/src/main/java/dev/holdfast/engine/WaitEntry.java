package dev.holdfast.engine;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import redis.clients.jedis.HostAndPort;

/**
 * The local waiters of one lock on one channel: shared by every thread of the client that waits
 * for that lock there, reference counted by {@link UnlockSubscriptions}. An entry belongs to a
 * lock ({@link Key}), never to a channel alone: two locks may share a channel (lock {@code a}
 * and lock {@code {a}}, see {@link LockNames}), and one lock's waiters, handoff candidates and
 * handoff budget must never serve the other. Each waiting thread registers its own
 * {@link Waiter}, kept in order from join to leave: a local FIFO queue whose head alone tries
 * Redis ({@link #isHead}). An unlock message signals the head, so one waiter retries; a
 * (re)subscription signals every registered waiter, and the head re-polls.
 *
 * <p>An exclusive lock's releasing thread may hand the lock directly to a registered waiter (see
 * {@link Waiter#claim()} and {@link RedisLock}); the per-lock budget that bounds such local
 * handoffs lives here too ({@link #mayHandOff}).
 *
 * <p>Thread-safe: waiters are kept in a concurrent queue, signals and handoff states are atomic.
 */
final class WaitEntry {
  /**
   * The most consecutive local handoffs of one lock before its next final release goes through
   * Redis (delete and publish), so that a waiter of another process can win it. 32 handoffs cost
   * about 32 Redis round trips, a few milliseconds: long enough that the one extra publish and
   * the {@link #YIELD_NANOS} pause cost little of the local throughput.
   */
  static final int MAX_HANDOFFS = 32;
  /**
   * The longest a streak of local handoffs of one lock lasts before its next final release goes
   * through Redis, in ms: a remote waiter (another process, or Redisson) waits at most about
   * this long plus the holders' critical sections for its chance, even when each hold is long.
   */
  static final long MAX_STREAK_MILLIS = 20;
  /**
   * After a release the budget sent through Redis, this client's own attempts on that lock wait
   * this long before trying Redis, so that a remote waiter woken by the unlock message (a publish,
   * a wake-up and one round trip away) can actually win it rather than a local thread that is
   * already running.
   */
  static final long YIELD_NANOS = TimeUnit.MILLISECONDS.toNanos(3);

  final Key key;
  final String channel;
  private final ConcurrentLinkedQueue<Waiter> waiters = new ConcurrentLinkedQueue<>();
  /** Guarded by the owning {@link UnlockSubscriptions}. */
  int references;
  /** Guarded by the owning {@link UnlockSubscriptions}. */
  HostAndPort node;
  private volatile boolean subscribed;
  private volatile boolean closed;
  /** Local handoffs since the last release through Redis; guarded by this. */
  private int streak;
  /** When the current streak began (nanoTime); guarded by this. */
  private long streakStart;
  /** Until when local attempts yield to remote waiters (nanoTime); 0 for not. */
  private volatile long yieldUntil;
  /**
   * Whether the lock's last change was a handoff to a thread of this client that may still hold
   * it: a new local acquirer then queues for the next handoff without asking Redis first.
   */
  private volatile boolean handedLocally;

  /**
   * Since when (nanoTime) Redis has failed this lock's head, 0 while it answers: one outage
   * clock for the whole local queue, so a new head inherits it and the queued waiters fail
   * together about one watchdog timeout into an outage, not one after the other. Guarded by this.
   */
  private long failingSince;
  /** The failure that made a head give up on the outage; read by the waiters behind it. */
  private volatile RuntimeException outage;
  /**
   * When the current holder's lease ends as last seen (nanoTime), 0 for unknown: bounds the
   * park of the waiters behind the head, so no wait outlasts the holder's remaining lease.
   */
  private volatile long leaseEndsAt;

  WaitEntry(Key key, HostAndPort node) {
    this.key = key;
    this.channel = key.channel();
    this.node = node;
  }

  /**
   * What a wait entry belongs to: a lock (its key and kind) waited for on one channel.
   *
   * @param lockKey the lock's key (with the key prefix)
   * @param kind the lock's kind (compared by identity: kinds are singletons)
   * @param channel the channel its waiters listen on (the lock's, or a fair waiter's own)
   */
  record Key(String lockKey, LockKind kind, String channel) {
    /** The entry key of lock {@code names} waited for on {@code channel}. */
    static Key of(LockNames names, String channel) {
      return new Key(names.key(), names.kind(), channel);
    }
  }

  /** Whether an unlock message would reach this entry now. */
  boolean subscribed() {
    return subscribed;
  }

  void subscribed(boolean value) {
    this.subscribed = value;
  }

  /** Registers a waiter; called by {@link UnlockSubscriptions#join} under its monitor. */
  void add(Waiter waiter) {
    waiters.add(waiter);
    if (closed) {
      waiter.signal();
    }
  }

  /** Unregisters a waiter; called by {@link UnlockSubscriptions#leave} under its monitor. */
  void remove(Waiter waiter) {
    waiters.remove(waiter);
  }

  /**
   * Signals the head: the one waiter that may try Redis (see {@link #isHead}). The others wait
   * for their turn or a handoff, so waking them would cost nothing but a re-park.
   */
  void wakeOne() {
    Waiter head = waiters.peek();
    if (head != null) {
      head.signal();
    }
  }

  /**
   * The head left the queue (see {@link UnlockSubscriptions#leave}): signals the new head, so
   * that it tries at once or passes on a wake-up the old head consumed — except after a grant of
   * a lock handed over locally ({@code acquired} and {@link #handedLocally}) to a new head whose
   * park ends by the holder's lease as seen: it looks again in time on its own, while a wake-up
   * would take it out of the handoff candidates just when the holder may release (the release
   * would then go through Redis, and the hot key loses its local handoffs).
   */
  void passTurn(boolean acquired) {
    Waiter next = waiters.peek();
    if (next == null) {
      return;
    }
    if (acquired && handedLocally && next.parkEndsBy(leaseEndsAt)) {
      return;
    }
    next.signal();
  }

  /**
   * Whether {@code waiter} heads the local queue: of the threads of this client waiting for this
   * lock, only the head contends in Redis; the others wait in join order (FIFO) until they are
   * handed the lock by a releasing thread of this client or become head themselves. So the Redis
   * calls of one lock's local waiters do not grow with their number. A head that leaves, with or
   * without the lock, signals the next one ({@link UnlockSubscriptions#leave}).
   */
  boolean isHead(Waiter waiter) {
    return waiters.peek() == waiter;
  }

  /** Whether a thread other than {@code waiter} waits here now. */
  boolean hasOthers(Waiter waiter) {
    for (Waiter w : waiters) {
      if (w != waiter) {
        return true;
      }
    }
    return false;
  }

  /** Whether some thread waits here now. */
  boolean hasWaiters() {
    return !waiters.isEmpty();
  }

  /** Signals every registered waiter, parked or about to park: none can miss it. */
  void wakeAll() {
    for (Waiter w : waiters) {
      w.signal();
    }
  }

  /** The client is closing: every waiter returns from {@link Waiter#await} now and from now on. */
  void close() {
    closed = true;
    wakeAll();
  }

  /**
   * Claims the longest registered waiter that is parked as a handoff candidate.
   *
   * @return the claimed waiter (now {@link Waiter#CLAIMED}), or null if none is
   */
  Waiter claimCandidate() {
    for (Waiter w : waiters) {
      if (w.claim()) {
        return w;
      }
    }
    return null;
  }

  /** Waiters parked as handoff candidates now, for tests. */
  int candidates() {
    int n = 0;
    for (Waiter w : waiters) {
      n += w.state.get() == Waiter.WAITING ? 1 : 0;
    }
    return n;
  }

  /**
   * Whether the budget allows one more local handoff now ({@link #MAX_HANDOFFS},
   * {@link #MAX_STREAK_MILLIS}). When it does not, the streak is over: the caller releases
   * through Redis and then calls {@link #yieldToRemote}.
   */
  synchronized boolean mayHandOff(long now) {
    if (streak == 0) {
      return true;
    }
    if (streak >= MAX_HANDOFFS
        || now - streakStart >= TimeUnit.MILLISECONDS.toNanos(MAX_STREAK_MILLIS)) {
      streak = 0;
      return false;
    }
    return true;
  }

  /** A local handoff happened at {@code now}. */
  synchronized void handedOff(long now) {
    if (streak++ == 0) {
      streakStart = now;
    }
  }

  /** Whether a thread of this client was handed the lock and may still hold it. */
  boolean handedLocally() {
    return handedLocally;
  }

  void handedLocally(boolean value) {
    if (handedLocally != value) {
      handedLocally = value;
    }
  }

  /**
   * Redis failed the head at {@code now}, whose own clock started at {@code since}: returns
   * the queue's outage start, the earliest of the recorded one and {@code since}.
   */
  synchronized long failing(long since) {
    if (failingSince == 0 || since - failingSince < 0) {
      failingSince = since;
    }
    return failingSince;
  }

  /** Redis answered the head: the outage (if any) is over. */
  synchronized void answered() {
    failingSince = 0;
    outage = null;
  }

  /**
   * A head gave up on the outage with {@code failure}: every waiter wakes, checks the shared
   * clock ({@link #outageOver}) and gives up too.
   */
  void gaveUp(RuntimeException failure) {
    outage = failure;
    wakeAll();
  }

  /**
   * The failure a queued waiter gives up with at {@code now}: the head's, once Redis has failed
   * this queue for longer than {@code limitNanos}; else null.
   */
  synchronized RuntimeException outageOver(long now, long limitNanos) {
    RuntimeException failure = outage;
    return failure != null && failingSince != 0 && now - failingSince > limitNanos
        ? failure : null;
  }

  /** The holder's lease was seen to end in {@code pttlMillis} at {@code now}. */
  void leaseSeen(long now, long pttlMillis) {
    leaseEndsAt = pttlMillis >= 0 ? now + TimeUnit.MILLISECONDS.toNanos(pttlMillis) : 0;
  }

  /**
   * How long a queued waiter may park at {@code now}: at most {@code millis}, and not past the
   * holder's lease as last seen.
   */
  long parkMillis(long now, long millis) {
    long end = leaseEndsAt;
    if (end == 0) {
      return millis;
    }
    long left = end - now;
    // Past it: stale (renewed, or taken by another since); the head looks and updates it.
    return left <= 0 ? millis : Math.min(millis, TimeUnit.NANOSECONDS.toMillis(left) + 1);
  }

  /** The budget just sent a release through Redis: local attempts wait a moment. */
  void yieldToRemote() {
    yieldUntil = System.nanoTime() + YIELD_NANOS;
  }

  /** How long local attempts should still wait before trying Redis, in ns; 0 for not at all. */
  long yieldNanos(long now) {
    long until = yieldUntil;
    return until == 0 || now - until >= 0 ? 0 : until - now;
  }

  /**
   * One waiting thread: its signal, and — if it waits for an exclusive lock without a fencing
   * token — what a releasing thread needs to hand it the lock.
   *
   * <p><b>Handoff states.</b> {@link #IDLE} while the waiter runs its own attempt (never a
   * candidate then, so a handoff never races its own Redis call); {@link #WAITING} while parked
   * as a candidate; a releasing thread moves it to {@link #CLAIMED} and, within its own Redis
   * call, to {@link #GRANTED}, {@link #UNCERTAIN} or {@link #DECLINED}; the waiter moves
   * {@code WAITING} back to {@code IDLE} when it wakes and reads (then resets) an outcome.
   */
  static final class Waiter {
    static final int IDLE = 0;
    static final int WAITING = 1;
    static final int CLAIMED = 2;
    static final int GRANTED = 3;
    static final int UNCERTAIN = 4;
    static final int DECLINED = 5;

    final WaitEntry entry;
    private final Thread thread;
    /** Whether this waiter may be handed the lock (exclusive kind, no fencing token). */
    final boolean candidate;
    /** The waiter's hash field. */
    final String field;
    /** The lease in ms the waiter's acquisition sets (the watchdog's, or its fixed one). */
    final long leaseMillis;
    private final AtomicBoolean signalled = new AtomicBoolean();
    private final AtomicInteger state = new AtomicInteger(IDLE);
    /** The outcome of a handoff; written before {@link #state} leaves {@code CLAIMED}. */
    private volatile Grant grant;
    /** Until when (nanoTime) the waiter parks in {@link #await}; 0 while it runs. */
    private volatile long parkEnd;

    Waiter(WaitEntry entry, boolean candidate, String field, long leaseMillis) {
      this.entry = entry;
      this.thread = Thread.currentThread();
      this.candidate = candidate;
      this.field = field;
      this.leaseMillis = leaseMillis;
    }

    /** Whether an unlock message would reach this waiter now. */
    boolean subscribed() {
      return entry.subscribed();
    }

    /** Sets the signal; false if one was pending already. */
    boolean signal() {
      if (signalled.compareAndSet(false, true)) {
        LockSupport.unpark(thread);
        return true;
      }
      return false;
    }

    /**
     * Parks until signalled (consuming the signal), the client closes, or {@code millis} pass.
     * Called by the waiting thread only.
     *
     * @return whether a signal arrived
     */
    boolean await(long millis) throws InterruptedException {
      long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
      parkEnd = end;
      try {
        return awaitUntil(end);
      } finally {
        parkEnd = 0;
      }
    }

    /**
     * Whether this waiter is parked ({@link #await}) until no later than {@code deadline}
     * (nanoTime; 0 for unknown, which is never "by").
     */
    boolean parkEndsBy(long deadline) {
      long end = parkEnd;
      return end != 0 && deadline != 0 && end - deadline <= 0;
    }

    private boolean awaitUntil(long end) throws InterruptedException {
      while (true) {
        if (signalled.compareAndSet(true, false) || entry.closed || state.get() >= GRANTED) {
          return true;
        }
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
        long left = end - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        LockSupport.parkNanos(this, left);
      }
    }

    /** The waiter parks as a handoff candidate (it holds nothing and has nothing in flight). */
    void offer() {
      if (candidate) {
        state.set(WAITING);
      }
    }

    /**
     * The waiter is awake: it stops being a candidate. Returns {@link #IDLE} if no handoff
     * was claimed; else waits for the claiming thread's outcome (its Redis call is bounded) and
     * returns it ({@link #GRANTED}, {@link #UNCERTAIN} or {@link #DECLINED}), with
     * {@link #grant()} set for the first two. Uninterruptible: an outcome must be collected.
     */
    int withdraw() {
      if (state.get() == IDLE || state.compareAndSet(WAITING, IDLE)) {
        return IDLE;
      }
      int s;
      boolean interrupted = false;
      while ((s = state.get()) == CLAIMED) {
        interrupted |= Thread.interrupted(); // else parking would return at once, spinning
        LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(10));
      }
      state.set(IDLE);
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
      return s;
    }

    /** A releasing thread claims this waiter for a handoff. */
    boolean claim() {
      return state.compareAndSet(WAITING, CLAIMED);
    }

    /** The claiming thread reports the handoff's outcome and wakes the waiter. */
    void outcome(int outcome, Grant g) {
      grant = g;
      state.set(outcome);
      LockSupport.unpark(thread);
    }

    Grant grant() {
      return grant;
    }
  }

  /**
   * What a handoff gave the waiter.
   *
   * @param requestId the request made for the waiter (its marker answers a re-send)
   * @param sentAt when the handoff was sent (nanoTime): the waiter's lease counts from then
   * @param pttl the lock's TTL the handoff reported; 0 if unknown
   */
  record Grant(String requestId, long sentAt, long pttl) {
  }
}
