package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.stream.Stream;

/**
 * All of several locks or none of them ({@code LockClient#getMultiLock}).
 *
 * <p><b>Why back-off and not only an order.</b> Taking the members in one global order is enough
 * to avoid deadlock only when every party uses that order — but the members may come from
 * several clients, the same name may exist in two deployments, and a plain holder of one member
 * takes part too. So each acquisition works in rounds: the first member of a round is waited for
 * as long as the caller allows (holding nothing, so that wait cannot deadlock), every other
 * member only for a short, randomised step; a member that is still busy then makes the round
 * release everything it took, and the next round starts by waiting for that member. Bounded
 * waits while holding something rule out deadlock; the randomised step breaks the symmetry of two
 * threads that collide in opposite orders (one of them gives up first, and the other, still
 * waiting, is woken by its unlock). Members are sorted by name so that multi-locks over the same
 * names usually do not collide at all.
 *
 * <p>Every member is used through {@link DistributedLock} on the calling thread (the locks are
 * thread-bound), so members may be of any kind and from any client. Thread-safe; the only state
 * is per thread and set of members (shared by every handle of the same members; see
 * {@link #owedEngines} for where it is kept): what a failed {@link #unlock()} still owes, and
 * the open acquisitions ({@link CompositeLock.Section}).
 */
final class MultiLock extends CompositeLock {
  private static final System.Logger LOG = System.getLogger(MultiLock.class.getName());
  /** The bounded wait for a member other than a round's first: randomised in [min, min+spread). */
  private static final long STEP_MIN_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  private static final long STEP_SPREAD_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  private final LockGroup group;
  /** The members in acquisition order: by name, then as given. */
  private final List<DistributedLock> order;
  /**
   * Where the rest of a failed unlock() is kept, per multi-lock (its members, whichever handle
   * names them: applications usually get a new handle for each use) and thread: the thread's
   * next unlock() of those members finishes it. An entry lives until then, or until the thread's
   * next acquisition of every member leaves nothing of it owed. A record that owes only locks of
   * this library (plain members, RedLocks, nested multi-locks of such locks) is kept by every
   * open engine of them, nested ones' included ({@link LockEngine#multiLockOwed()}): closing one
   * client (which drops that engine's records and ends its holds) leaves it with the others, and
   * closing them all ends what it owes. A record that owes a lock of another implementation,
   * directly or in a nested multi-lock, is kept in {@link #UNOWNED}: that release outlives this
   * library's clients.
   */
  private final List<LockEngine> owedEngines;
  /** Whether a member, or a member of a nested multi-lock, is of another implementation. */
  private final boolean foreignInside;
  /** Where records owing another implementation's lock are kept. */
  private static final Map<OwedKey, ThreadRecord<Owed>> UNOWNED = new ConcurrentHashMap<>();
  /** Where the open sections of a multi-lock with another implementation's lock are kept. */
  private static final Map<OwedKey, ThreadRecord<Deque<Section>>> UNOWNED_SECTIONS =
      new ConcurrentHashMap<>();
  /**
   * The record of a failed unlock() finished by an acquisition given back since (identity
   * matters; it owes nothing): the thread's next unlock() returns at once.
   */
  private static final Owed SETTLED =
      new Owed(List.of(), List.of(), List.of(), List.of(), false);
  /** The members' identities ({@link LockGroup#identity}), in acquisition order. */
  private final List<Object> identities;

  /** A multi-lock (its members' identities) and a thread. */
  record OwedKey(List<Object> members, long threadId) {
  }

  /**
   * What a failed unlock() left to do: the members still to release (acquisition order); the
   * members it released, whose holds may have been lost since (reported by the retry); and the
   * members it found not held (or lost) with their exceptions, reported when the rest is done.
   * {@code givenBack}: left by a give-back ({@link CompositeLock#giveBackSection()}: releases of
   * another implementation's locks, which cannot be owed on a hold), not by one of the
   * application's unlocks: the thread's next unlock() finishes it first, then closes a section
   * as usual, and an acquisition that finishes it did not finish a failed unlock of the
   * application's.
   */
  record Owed(List<Due> due, List<Due> released, List<RuntimeException> notHeld,
      List<DistributedLock> notHeldMembers, boolean givenBack) {
  }

  /**
   * A member and the thread's hold of it right after a failed unlock() (null for a member not of
   * this library, or none left), with the request id of the release that call left pending, if
   * any. Only that hold is the multi-lock's: once it is gone (a final release in doubt settled by
   * the thread's next acquisition of the member, or finished by the member's own unlock()), a
   * newer hold of the member is the thread's own; and a pending release that a re-entry of the
   * member found had run has closed the multi-lock's section already.
   *
   * <p>A RedLock member's due is made of its members' ({@code parts}), each with what the failed
   * call did to it ({@code outcome}): only a {@link Outcome#FAILED} one owes its release (one
   * whose release went through owes nothing, though its outer sections stay open). A member of
   * the multi-lock itself is always {@code FAILED}.
   */
  record Due(DistributedLock member, Hold hold, String pendingRequest, Outcome outcome,
      List<Due> parts) {

    /** What an unlock() did to a RedLock's member. */
    enum Outcome {
      /** Its release went through. */
      RELEASED,
      /** Not run, pending or in doubt: owed. */
      FAILED,
      /** Not held, or lost. */
      NOT_HELD
    }

    /**
     * The thread's holds of a RedLock's members just before its unlock(), the count each
     * release starts from (a give-back owed on the hold is finished first), and which members
     * that unlock() leaves alone: the section it closes did not win them
     * ({@link RedLock#newestSection}, null if none is open), so they owe it nothing, whatever
     * else fails.
     */
    record Before(List<Hold> holds, int[] counts, boolean[] without, boolean[] section) {
    }

    /** {@return the thread's holds of a RedLock's members now; null for another lock} */
    static Before before(DistributedLock member, long threadId) {
      if (!(member instanceof RedLock red)) {
        return null;
      }
      List<Hold> holds = new ArrayList<>();
      int[] counts = new int[red.members().size()];
      boolean[] without = new boolean[counts.length];
      boolean[] section = red.newestSection(threadId);
      for (int i = 0; i < counts.length; i++) {
        RedisLock part = (RedisLock) red.members().get(i);
        Hold hold = part.holdOf(threadId);
        holds.add(hold);
        counts[i] = RedisLock.releaseStartsFrom(hold);
        without[i] = section != null && !section[i];
      }
      return new Before(holds, counts, without, section);
    }

    /**
     * {@return what an unlock() of {@code member} that threw left owed ({@code before}: {@link
     * #before} taken just before it), or null if nothing: a RedLock none of whose members'
     * releases failed}
     */
    static Due left(DistributedLock member, long threadId, Before before) {
      if (!(member instanceof RedLock red)) {
        return single(member, threadId, Outcome.FAILED);
      }
      List<Due> parts = new ArrayList<>();
      for (int i = 0; i < red.members().size(); i++) {
        RedisLock part = (RedisLock) red.members().get(i);
        Hold was = before.holds().get(i);
        Hold now = part.holdOf(threadId);
        Outcome outcome;
        if (was == null || before.counts()[i] == 0 || !was.active()) {
          outcome = Outcome.NOT_HELD;
        } else if (before.without()[i]) {
          outcome = Outcome.RELEASED; // the closed section was not this member's: nothing owed
        } else if (now == was && (now.endedInDoubt() || now.count() >= before.counts()[i])) {
          outcome = Outcome.FAILED; // its count did not drop: not run, pending or in doubt
        } else {
          outcome = Outcome.RELEASED;
        }
        parts.add(single(part, threadId, outcome));
      }
      return parts.stream().anyMatch(p -> p.outcome == Outcome.FAILED)
          ? new Due(member, null, null, Outcome.FAILED, List.copyOf(parts)) : null;
    }

    /** {@return the thread's hold of {@code member} now, for a member that was released} */
    static Due released(DistributedLock member, long threadId) {
      return single(member, threadId, Outcome.RELEASED);
    }

    private static Due single(DistributedLock member, long threadId, Outcome outcome) {
      Hold hold = member instanceof RedisLock r ? r.holdOf(threadId) : null;
      Hold.Pending pending = hold == null ? null : hold.pendingRelease();
      return new Due(member, hold, pending == null ? null : pending.requestId(), outcome, null);
    }

    /**
     * {@return whether the member's unlock() still has this release to do for the thread: open
     * sections or a final release in doubt of the same hold, on an open client (closing a client
     * ends its holds: they expire with their lease), unless a re-entry settled the release as
     * run. A RedLock: while one of its members whose release failed owes by this rule (each
     * member alone: one taken alone meanwhile is the thread's own, the others still owe); a
     * nested multi-lock: while it keeps its own record of that failed unlock; true for any
     * other lock}
     */
    boolean owed(long threadId) {
      if (parts != null) {
        return parts.stream().anyMatch(p -> p.owedPart(threadId));
      }
      if (member instanceof MultiLock nested) {
        return nested.owes(threadId);
      }
      if (!(member instanceof RedisLock r)) {
        return true;
      }
      if (r.engine().closed()) {
        return false;
      }
      Hold now = r.holdOf(threadId);
      return now != null && now == hold && (now.count() > 0 || now.endedInDoubt())
          && (pendingRequest == null || !now.releaseSettledByReentry(pendingRequest));
    }

    private boolean owedPart(long threadId) {
      return outcome == Outcome.FAILED && owed(threadId);
    }

    /**
     * Once an acquisition re-entered this engine's member(s), gives back the sections this due
     * still owes: one of the member's, or of each of a RedLock's members whose release failed
     * and is still owed. One whose give-back fails stays owed on the member's hold, finished by
     * the thread's next call on it (never in place of an unlock()). Nothing for another lock.
     */
    void giveBack(long threadId) {
      if (parts != null) {
        parts.forEach(p -> p.giveBack(threadId));
      } else if (member instanceof RedisLock r && owedPart(threadId)) {
        try {
          r.giveBackSection();
        } catch (RuntimeException e) {
          LOG.log(System.Logger.Level.DEBUG, () -> "Giving back a section of " + r.getName()
              + " failed; it stays owed: " + e.getMessage());
        }
      }
    }

    /**
     * Does the release still owed (for a due {@link #owed} says is): a RedLock's members whose
     * release failed and is still owed get their unlock() again, each alone (a member whose
     * release went through is not released twice), and the RedLock is released if a majority
     * of its members is — as RedLock#unlock() judges it, a minority not held is no loss; any
     * other member its unlock() (re-sent or settled: a release that ran is not run twice).
     *
     * @return null if it is done; else what failed and what is left owed (null if only "not
     *     held": nothing is owed any more)
     */
    Retry retry(long threadId) {
      if (parts == null) {
        try {
          member.unlock();
          return null;
        } catch (IllegalMonitorStateException e) {
          return new Retry(e, null);
        } catch (RuntimeException e) {
          return new Retry(e, single(member, threadId, Outcome.FAILED));
        }
      }
      List<Due> now = new ArrayList<>(parts);
      List<RuntimeException> failures = new ArrayList<>();
      List<String> failedNames = new ArrayList<>();
      boolean stillOwed = false;
      int released = 0;
      for (int i = 0; i < parts.size(); i++) {
        Due p = parts.get(i);
        if (p.outcome != Outcome.FAILED || !p.owed(threadId)) {
          // Went through, or done meanwhile (settled, its client closed) unless lost since.
          boolean lost = p.hold != null && !p.hold.active();
          if (p.outcome == Outcome.RELEASED || (p.outcome == Outcome.FAILED && !lost)) {
            released++;
          }
          continue;
        }
        try {
          p.member.unlock();
          now.set(i, single(p.member, threadId, Outcome.RELEASED));
          released++;
        } catch (IllegalMonitorStateException e) {
          now.set(i, single(p.member, threadId, Outcome.NOT_HELD));
          failures.add(e);
          failedNames.add(p.member.getName());
        } catch (RuntimeException e) {
          now.set(i, single(p.member, threadId, Outcome.FAILED));
          stillOwed = true;
          failures.add(e);
          failedNames.add(p.member.getName());
        }
      }
      if (!stillOwed && released >= ((RedLock) member).quorum()) {
        return null; // a minority not held does not end a RedLock's hold
      }
      String message = "the release of RedLock " + member.getName() + " failed again on "
          + failedNames + " (" + released + " of " + parts.size() + " members released, "
          + ((RedLock) member).quorum() + " needed)"
          + (failures.isEmpty() ? "" : ": " + failures.get(0).getMessage());
      RuntimeException failure = stillOwed
          ? new LockException(message, failures.stream()
              .filter(e -> !(e instanceof IllegalMonitorStateException)).findFirst()
              .orElseThrow())
          : new IllegalMonitorStateException(message);
      failures.stream().filter(e -> e != failure.getCause()).forEach(failure::addSuppressed);
      return new Retry(failure, stillOwed
          ? new Due(member, null, null, Outcome.FAILED, List.copyOf(now)) : null);
    }

    /**
     * For a member the failed call released: {@return the loss of the same hold since (its
     * open sections are the multi-lock's outer ones), or null}
     */
    IllegalMonitorStateException lostSince(long threadId) {
      return member instanceof RedisLock r && hold != null && r.holdOf(threadId) == hold
          && !r.engine().closed() ? r.lostSinceReleased() : null;
    }
  }

  /** A {@link Due#retry} that failed: the exception, and the due left owed (or null). */
  record Retry(RuntimeException failure, Due left) {
  }

  MultiLock(DistributedLock... locks) {
    this.group = LockGroup.of("multi-lock", locks);
    List<DistributedLock> sorted = new ArrayList<>(group.members());
    sorted.sort(Comparator.comparing(DistributedLock::getName)); // stable: ties keep their order
    this.order = List.copyOf(sorted);
    this.identities = order.stream().map(LockGroup::identity).toList();
    this.owedEngines = order.stream().flatMap(MultiLock::engines).distinct().toList();
    this.foreignInside = order.stream().anyMatch(MultiLock::foreign);
  }

  /** {@return the engines of this library's locks in {@code lock}, a composite's members'} */
  private static Stream<LockEngine> engines(DistributedLock lock) {
    if (lock instanceof RedisLock r) {
      return Stream.of(r.engine());
    }
    if (lock instanceof RedLock red) {
      return red.members().stream().flatMap(MultiLock::engines);
    }
    if (lock instanceof MultiLock nested) {
      return nested.owedEngines.stream();
    }
    return Stream.empty();
  }

  /** {@return whether {@code lock} is, or (a nested multi-lock) has, another implementation's} */
  private static boolean foreign(DistributedLock lock) {
    return lock instanceof MultiLock nested ? nested.foreignInside
        : !(lock instanceof RedisLock || lock instanceof RedLock);
  }

  /** {@return {@code multi[a, b, …]}, the members' names in the order given} */
  @Override
  public String getName() {
    return "multi[" + group.names() + "]";
  }

  /**
   * The rounds described in the class comment.
   *
   * @param waitNanos {@link #NONE} for no bound, 0 to try each member once, else the bound
   * @param leaseMillis {@link #NONE} for the watchdog, else each member's lease
   * @param interruptible whether an interrupt ends the call; if not, it is remembered and the
   *     flag restored at the end
   */
  @Override
  boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    long threadId = Thread.currentThread().getId();
    OwedKey key = new OwedKey(identities, threadId);
    // What a failed unlock() left is carried through the acquisition, looked up once: finished
    // if it succeeds, kept otherwise (it may never have reached a member still owed).
    Owed taken = takeOwed(key);
    Owed owed = taken == SETTLED ? null : retryOwedElsewhere(key, taken, "acquired nothing");
    boolean acquired = false;
    try {
      acquired = acquireMembers(waitNanos, leaseMillis, interruptible);
      return acquired;
    } finally {
      if (acquired) {
        if (owed != null) {
          finishOwed(owed, threadId);
        }
        // Its section says whether it finished a failed unlock, in case it is given back.
        openSection(threadId, new Section(null, taken != null && !taken.givenBack()));
      } else if (taken != null) {
        // Kept for the retry the contract asks for, as far as it is left: all of it finished
        // before the acquisition leaves a record that owes nothing.
        keepOwed(key, owed != null ? owed : SETTLED);
      }
    }
  }

  private boolean acquireMembers(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    long start = System.nanoTime();
    int n = order.size();
    int first = 0;
    boolean interrupted = false;
    try {
      while (true) {
        List<DistributedLock> held = new ArrayList<>(n);
        int busy = -1;
        try {
          for (int k = 0; k < n && busy < 0; k++) {
            int i = (first + k) % n;
            long remaining = waitNanos == NONE ? NONE
                : Math.max(0, waitNanos - (System.nanoTime() - start));
            long wait = k == 0 || remaining == 0 ? remaining
                : remaining == NONE ? step() : Math.min(remaining, step());
            if (LockGroup.acquire(order.get(i), wait, leaseMillis)) {
              held.add(order.get(i));
            } else {
              busy = i;
            }
          }
        } catch (InterruptedException e) {
          LockGroup.giveBack(held, e);
          if (interruptible) {
            throw e;
          }
          interrupted = true; // lock() waits on: try the round again
          continue;
        } catch (RuntimeException | Error e) {
          // Redis unreachable, a lost re-entry, an illegal upgrade…: nothing stays held.
          LockGroup.giveBack(held, e);
          throw e;
        }
        if (busy < 0) {
          return true;
        }
        Throwable releaseFailure = LockGroup.giveBack(held, null);
        if (releaseFailure != null) {
          throw new LockException("Multi-lock " + getName() + " gave up its members after '"
              + order.get(busy).getName() + "' stayed busy, but could not release them all; "
              + "a member taken afresh whose release got no answer is released in the "
              + "background, and expires with its lease at the latest; a re-entered member's "
              + "release is finished by this thread's next call on it: "
              + releaseFailure.getMessage(),
              releaseFailure);
        }
        if (waitNanos != NONE && System.nanoTime() - start >= waitNanos) {
          return false;
        }
        first = busy; // wait for the busy member first, holding nothing
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static long step() {
    return STEP_MIN_NANOS + ThreadLocalRandom.current().nextLong(STEP_SPREAD_NANOS);
  }

  /**
   * Releases one hold of every member, newest-acquired first, trying every one whatever the
   * others do.
   *
   * <p>If this throws {@link LockException}, the thread's next call on this multi-lock
   * completes that same release, whichever it is (the thread cannot know what the failed call
   * did). An acquisition of the multi-lock completes it first — members whose release did not
   * run give a section back then (a RedLock, nested multi-lock or other library's lock gets its
   * unlock() again before the acquisition, which fails if that does) — so its own unlock()
   * follows as usual. The next {@code unlock()}
   * completes it: it calls again only the members whose release failed (re-sending a release
   * that did not run, or settling a final one left in doubt, as {@link DistributedLock#unlock()}
   * does), so no member is released twice — and only while the thread's hold of that member is
   * still the one the failed call left, and that release is still to do: a member the thread
   * took again alone meanwhile is the thread's own hold (that acquisition settles a release in
   * doubt, or a pending one that ran, first), not released here; a member whose client was
   * closed meanwhile is done (its holds expire). It reports then the members found not held
   * before, and those whose hold was lost since (a member released by the failed call may have
   * lost its hold in it: its release found the outer sections' fixed lease over and ended the
   * hold). Once a member's loss is known, the multi-lock is lost: that retry is an unlock of a
   * lost hold, like every later one of its open sections. A RedLock member is retried on those
   * of its members whose release failed, each alone. Limit: a member of another implementation
   * cannot be told from a hold the thread took of it alone meanwhile.
   *
   * @throws IllegalMonitorStateException if some members were not held by this thread (never
   *     held, or lost) and the others released fine; the members' exceptions are suppressed
   * @throws LockException if some release failed otherwise (Redis unreachable); every member's
   *     exception is suppressed or the cause. A member whose last release got no answer is no
   *     longer held by this thread either: it is released in the background, and expires with
   *     its lease at the latest (see {@link DistributedLock#unlock()})
   */
  @Override
  public void unlock() {
    unlock(false);
  }

  @Override
  void unlockGivingBack() {
    unlock(true);
  }

  /**
   * {@link #unlock()}; {@code givingBack}: run by {@link #giveBackSection()}, which gives
   * composite members back their own way (what they fail to release is owed on their members'
   * holds, not in this record).
   */
  private void unlock(boolean givingBack) {
    long threadId = Thread.currentThread().getId();
    OwedKey key = new OwedKey(identities, threadId);
    Owed rest = takeOwed(key);
    if (rest != null && rest.givenBack()) {
      // A give-back's leftover, not this unlock's to answer: finished first (or kept, and this
      // call closes nothing), then this unlock closes a section as usual.
      // (Its members of this library, if any, were owed on their holds when it was left.)
      retryOwedElsewhere(key, rest, "released nothing");
      rest = null;
    }
    if (rest == null) {
      closeSection(threadId); // a retry finishes a failed unlock, which closed its section
    }
    // A member whose owed hold is done meanwhile (settled, released, its client closed) has
    // nothing left to release: a newer hold of it is not the multi-lock's.
    List<Due> retries = rest == null ? null
        : rest.due().stream().filter(d -> d.owed(threadId)).toList();
    int targets = rest == null ? order.size() : retries.size();
    List<RuntimeException> failures = new ArrayList<>(rest == null ? List.of() : rest.notHeld());
    List<DistributedLock> failed =
        new ArrayList<>(rest == null ? List.of() : rest.notHeldMembers());
    if (rest != null) {
      lostSinceReleased(rest, threadId, failures, failed);
    }
    List<Due> unsettled = new ArrayList<>();
    List<Due> released = new ArrayList<>(rest == null ? List.of() : rest.released());
    for (int i = targets - 1; i >= 0; i--) {
      DistributedLock m;
      Retry outcome;
      if (rest == null) {
        m = order.get(i);
        Due.Before before = Due.before(m, threadId);
        try {
          if (givingBack && m instanceof CompositeLock c) {
            c.giveBackSection();
          } else {
            m.unlock();
          }
          outcome = null;
        } catch (IllegalMonitorStateException e) {
          // Not held (a RedLock lost on a majority keeps its other members' failed releases
          // owed on their holds itself)
          outcome = new Retry(e, null);
        } catch (RuntimeException e) {
          if (givingBack && m instanceof CompositeLock) {
            outcome = new Retry(e, null); // given back: owed on its members' holds
          } else {
            // Not run (still held), or in doubt (ended, settled by its retry): either way the
            // member's own unlock() is what finishes it, as for a single lock.
            outcome = new Retry(e, Due.left(m, threadId, before));
            if (m instanceof RedLock red) {
              red.forgetUnfinished(threadId); // this record finishes it, part by part
            }
          }
        }
      } else {
        m = retries.get(i).member();
        outcome = retries.get(i).retry(threadId);
      }
      if (outcome == null) {
        released.add(Due.released(m, threadId));
      } else {
        failures.add(outcome.failure());
        failed.add(m);
        if (outcome.left() != null) {
          unsettled.add(0, outcome.left());
        }
      }
    }
    if (!unsettled.isEmpty()) {
      List<RuntimeException> notHeld = new ArrayList<>();
      List<DistributedLock> notHeldMembers = new ArrayList<>();
      for (int i = 0; i < failures.size(); i++) {
        if (failures.get(i) instanceof IllegalMonitorStateException) {
          notHeld.add(failures.get(i));
          notHeldMembers.add(failed.get(i));
        }
      }
      Owed left = new Owed(List.copyOf(unsettled), List.copyOf(released), List.copyOf(notHeld),
          List.copyOf(notHeldMembers), givingBack);
      keepOwed(new OwedKey(identities, threadId), left);
    }
    if (failures.isEmpty()) {
      return;
    }
    List<String> failedNames = failed.stream().map(DistributedLock::getName).toList();
    boolean onlyNotHeld = failures.stream().allMatch(IllegalMonitorStateException.class::isInstance);
    String message;
    if (onlyNotHeld && failures.size() == order.size()) {
      message = "Multi-lock " + getName() + " is not held by " + thread() + ": "
          + failures.get(0).getMessage();
    } else {
      message = "unlock() of multi-lock " + getName() + " failed for " + failedNames + " ("
          + (order.size() - failures.size()) + " of " + order.size() + " released): "
          + failures.get(0).getMessage();
    }
    RuntimeException thrown = onlyNotHeld ? new IllegalMonitorStateException(message)
        : new LockException(message, failures.stream()
            .filter(e -> !(e instanceof IllegalMonitorStateException)).findFirst().orElseThrow());
    for (RuntimeException e : failures) {
      if (e != thrown.getCause()) {
        thrown.addSuppressed(e);
      }
    }
    throw thrown;
  }

  /**
   * For a retry that finishes a failed unlock() ({@code rest}): adds to {@code failures} (and
   * {@code failed}) the members that call released but whose hold this thread has lost since
   * (or lost in that call: a release that ends the hold because the outer sections' lease is
   * over reports the loss and returns normally), unless already reported as not held. The
   * thread knows its multi-lock is lost, so this unlock says so, as every later one does.
   */
  private static void lostSinceReleased(Owed rest, long threadId,
      List<RuntimeException> failures, List<DistributedLock> failed) {
    Set<Object> reported = new HashSet<>();
    rest.due().forEach(d -> reported.add(LockGroup.identity(d.member())));
    rest.notHeldMembers().forEach(m -> reported.add(LockGroup.identity(m)));
    for (Due d : rest.released()) {
      // Only the hold the failed call left: a newer one of the member is the thread's own.
      IllegalMonitorStateException lost = reported.add(LockGroup.identity(d.member()))
          ? d.lostSince(threadId) : null;
      if (lost != null) {
        failures.add(lost);
        failed.add(d.member());
      }
    }
  }

  /**
   * Before an acquisition: a member not of this engine (a RedLock, a nested multi-lock, another
   * library's lock) whose release a failed unlock() left owed gets that unlock() again now, as
   * {@link DistributedLock#unlock()} asks (re-sent or settled: a release that ran is not run
   * twice); its acquisition could not tell that release apart from the thread's own sections.
   * Done (or found not held) members leave the record.
   *
   * @param o the thread's record, taken out of the stores (or null)
   * @return what is left of it for the acquisition to finish, or null
   * @throws LockException (or what the member's unlock() threw otherwise) if it fails again:
   *     nothing is acquired and the record, as this call left it, is kept again
   */
  private Owed retryOwedElsewhere(OwedKey key, Owed o, String doneNothing) {
    if (o == null) {
      return null;
    }
    long threadId = key.threadId();
    List<Due> left = new ArrayList<>(o.due());
    boolean failed = true;
    try {
      for (Due d : o.due()) {
        if (d.member() instanceof RedisLock) {
          continue; // finished after the acquisition (finishOwed)
        }
        // Not held (lost) is done too: the acquisition will say what it finds.
        Retry failedAgain = d.owed(threadId) ? d.retry(threadId) : null;
        if (failedAgain != null && failedAgain.left() != null) {
          left.set(left.indexOf(d), failedAgain.left()); // as this call left it
          RuntimeException e = failedAgain.failure();
          throw new LockException("Multi-lock " + getName() + " " + doneNothing + ": the release "
              + "of member '" + d.member().getName() + "' that an earlier unlock() left owed "
              + "failed again (it is tried again by the next call): " + e.getMessage(), e);
        }
        left.remove(d);
      }
      failed = false;
    } finally {
      if (failed) {
        keepOwed(key, new Owed(List.copyOf(left), o.released(), o.notHeld(), o.notHeldMembers(),
            o.givenBack()));
      }
    }
    return left.isEmpty() ? null : new Owed(List.copyOf(left), o.released(), o.notHeld(),
        o.notHeldMembers(), o.givenBack());
  }

  /**
   * After an acquisition of every member, finishes what a failed unlock() still owes and drops
   * the record, so that the thread's next unlock() releases this acquisition whatever became of
   * that release (the thread cannot know): the acquisition settled every member's release in
   * doubt or left pending (done, if it ran); a member of this engine whose release did not run
   * gives back one section (the acquisition re-entered it), and if that fails too it stays owed
   * on the member's hold, finished by the thread's next call on it. Another member (a RedLock,
   * a nested multi-lock, another library's lock) was retried before the acquisition
   * ({@link #retryOwedElsewhere}); an unlock() of it now could end the hold just taken. Only on
   * success: an acquisition that gives up may never have reached a member still owed.
   */
  private static void finishOwed(Owed o, long threadId) {
    o.due().stream().filter(d -> d.member() instanceof RedisLock)
        .forEach(d -> d.giveBack(threadId));
  }


  /**
   * Turns what a failed unlock() of the thread's left owed into give-backs of its members, as
   * {@link CompositeLock#giveBackSection()} says: a member of this library gives its section back
   * once more and, failing again, owes it on its hold; a RedLock or nested multi-lock does the
   * same member by member. A lock of another implementation cannot owe on a hold: its unlock()
   * stays in the record, marked as a give-back's ({@link Owed#givenBack}), which the thread's
   * next unlock() of this multi-lock finishes before closing a section.
   */
  @Override
  void owedOnMembers(long threadId) {
    OwedKey key = new OwedKey(identities, threadId);
    Owed owed = takeOwed(key);
    if (owed == null || owed == SETTLED) {
      if (owed != null) {
        keepOwed(key, owed);
      }
      return;
    }
    List<Due> foreign = new ArrayList<>();
    for (Due d : owed.due()) {
      if (d.member() instanceof MultiLock nested) {
        nested.owedOnMembers(threadId);
      } else if (d.member() instanceof RedisLock || d.member() instanceof RedLock) {
        d.giveBack(threadId);
      } else {
        foreign.add(d);
      }
    }
    if (!foreign.isEmpty()) {
      keepOwed(key, new Owed(List.copyOf(foreign), owed.released(), owed.notHeld(),
          owed.notHeldMembers(), true));
    }
  }

  @Override
  List<Map<OwedKey, ThreadRecord<Deque<Section>>>> sectionStores() {
    return foreignInside ? List.of(UNOWNED_SECTIONS) : owedEngines.stream()
        .filter(e -> !e.closed())
        .<Map<OwedKey, ThreadRecord<Deque<Section>>>>map(LockEngine::multiLockSections).toList();
  }

  @Override
  OwedKey sectionKey(long threadId) {
    return new OwedKey(identities, threadId);
  }

  @Override
  boolean takeSettled(long threadId) {
    OwedKey key = new OwedKey(identities, threadId);
    Owed owed = takeOwed(key);
    if (owed == SETTLED) {
      return true;
    }
    if (owed != null) {
      keepOwed(key, owed);
    }
    return false;
  }

  @Override
  void settleFinishedUnlock(long threadId) {
    // A give-back's leftover becomes the application's retry record: finishing it is all that
    // retry does (it closes no section).
    OwedKey key = new OwedKey(identities, threadId);
    Owed left = takeOwed(key);
    keepOwed(key, left == null ? SETTLED : !left.givenBack() ? left
        : new Owed(left.due(), left.released(), left.notHeld(), left.notHeldMembers(), false));
  }

  /** {@return the open engines' stores a record of this multi-lock may be in} */
  private List<Map<OwedKey, ThreadRecord<Owed>>> engineStores() {
    return owedEngines.stream().filter(e -> !e.closed())
        .<Map<OwedKey, ThreadRecord<Owed>>>map(LockEngine::multiLockOwed).toList();
  }

  /**
   * Keeps {@code owed} as the thread's record (the calling thread's: only it writes its record):
   * in {@link #UNOWNED} if it owes another implementation's lock, else in every open engine's
   * store (none open: nothing is owed any more, as closing a client ends its holds).
   */
  private void keepOwed(OwedKey key, Owed owed) {
    ThreadRecord.take(allStores(), key); // one record only, wherever the last one was kept
    List<Map<OwedKey, ThreadRecord<Owed>>> stores =
        owed.due().stream().anyMatch(d -> foreign(d.member())) ? List.of(UNOWNED)
            : engineStores();
    ThreadRecord.keep(stores, key, ThreadRecord.ofCurrentThread(owed));
  }

  /**
   * Removes the thread's record from every store (only the thread itself writes it) and returns
   * it, or null: a store whose client was closed has dropped it, the others still have it.
   */
  private Owed takeOwed(OwedKey key) {
    return ThreadRecord.take(allStores(), key);
  }

  /** {@return the thread's record, left in place, or null} */
  private Owed findOwed(OwedKey key) {
    return ThreadRecord.find(allStores(), key);
  }

  private List<Map<OwedKey, ThreadRecord<Owed>>> allStores() {
    List<Map<OwedKey, ThreadRecord<Owed>>> stores = new ArrayList<>(engineStores());
    stores.add(0, UNOWNED);
    return stores;
  }

  /**
   * Force-unlocks every member, trying every one.
   *
   * @return whether any member was deleted
   */
  @Override
  public boolean forceUnlock() {
    boolean any = false;
    RuntimeException failure = null;
    for (DistributedLock m : order) {
      try {
        any |= m.forceUnlock();
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = e;
        } else {
          failure.addSuppressed(e);
        }
      }
    }
    if (failure != null) {
      throw failure;
    }
    return any;
  }

  /** {@return whether any member is held by anyone} (so the multi-lock cannot be taken now) */
  @Override
  public boolean isLocked() {
    for (DistributedLock m : order) {
      if (m.isLocked()) {
        return true;
      }
    }
    return false;
  }

  /** {@return whether the calling thread holds every member} */
  @Override
  public boolean isHeldByCurrentThread() {
    for (DistributedLock m : order) {
      if (!m.isHeldByCurrentThread()) {
        return false;
      }
    }
    return true;
  }

  /** {@return whether the thread holds every member} */
  @Override
  public boolean isHeldByThread(long threadId) {
    for (DistributedLock m : order) {
      if (!m.isHeldByThread(threadId)) {
        return false;
      }
    }
    return true;
  }

  /** {@return the smallest hold count of the members: how many complete holds are open} */
  @Override
  public int getHoldCount() {
    int min = Integer.MAX_VALUE;
    for (DistributedLock m : order) {
      min = Math.min(min, m.getHoldCount());
      if (min == 0) {
        return 0;
      }
    }
    return min;
  }

  /**
   * {@return how long every member stays held: the smallest remaining lease; -2 if some member
   * is not held, -1 if none expires}
   */
  @Override
  public long remainTimeToLive() {
    long min = -1;
    for (DistributedLock m : order) {
      long ttl = m.remainTimeToLive();
      if (ttl == -2) {
        return -2;
      }
      if (ttl >= 0 && (min == -1 || ttl < min)) {
        min = ttl;
      }
    }
    return min;
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("A multi-lock has no conditions");
  }

  @Override
  public String toString() {
    return "MultiLock[" + group.names() + "]";
  }

  private static String thread() {
    Thread t = Thread.currentThread();
    return "thread " + t.getName() + " (id " + t.getId() + ")";
  }

  /** {@return the members, in acquisition order} */
  List<DistributedLock> members() {
    return order;
  }

  /** {@return the members' identities, in acquisition order} */
  List<Object> identities() {
    return identities;
  }

  /** {@return whether a failed unlock() of the thread's is still recorded (not finished)} */
  boolean owes(long threadId) {
    return findOwed(new OwedKey(identities, threadId)) != null;
  }
}
