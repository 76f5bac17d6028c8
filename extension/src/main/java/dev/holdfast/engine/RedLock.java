package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.stream.Collectors;

/**
 * The Redlock algorithm over locks on independent Redis servers ({@code LockClient#getRedLock}).
 *
 * <p>An acquisition works in rounds. A round asks every member once, without waiting (one round
 * trip each, on the calling thread: the locks are thread-bound, so the votes cannot be collected
 * on pool threads). A member that answers with an error — its server refused the connection,
 * timed out, failed over — is a failed vote, not a failure of the whole lock. The round wins when
 * a majority voted yes and the <em>validity</em> is still positive: the lease (the watchdog
 * timeout of the members' clients when there is no lease) minus the time the round took minus a
 * clock-drift allowance of 1% of the lease plus 2 ms. A round that loses releases every vote it
 * won and, if the wait allows, the next round follows after a short random delay (so that
 * competitors that split the vote do not collide again in step).
 *
 * <p>The hold is believed while a majority of members is held: the queries count members. Each
 * acquisition opens a <em>section</em> made of the members whose votes it won, kept per RedLock
 * (its members, whichever handle names them) and thread ({@link #openSection}); {@link #unlock()}
 * closes the thread's newest section, releases its members only, and succeeds when a majority was
 * released. A member whose vote was refused (its server down, a slot migrating) is left alone by
 * that unlock(): the thread may hold it in an outer section or alone, and ending that hold would
 * leave the outer section on a minority, or a rival in the thread's own section. With the
 * watchdog, each member is renewed by its own client; a minority that is lost (its server
 * restarted empty) does not end the hold. Immutable and thread-safe.
 */
final class RedLock extends CompositeLock {
  private static final System.Logger LOG = System.getLogger(RedLock.class.getName());
  /** The random pause between two rounds, in ms: [min, min+spread). */
  private static final long RETRY_MIN_MILLIS = 20;
  private static final long RETRY_SPREAD_MILLIS = 80;

  /**
   * The record of a failed unlock() finished by an acquisition given back since (identity
   * matters): the thread's next unlock() returns at once, closing nothing.
   */
  private static final MultiLock.Due SETTLED =
      new MultiLock.Due(null, null, null, MultiLock.Due.Outcome.RELEASED, List.of());

  private final LockGroup group;
  private final int quorum;
  /** The shortest watchdog timeout of the members' clients: the lease of a watchdog hold. */
  private final long watchdogMillis;

  RedLock(DistributedLock... locks) {
    this.group = LockGroup.of("RedLock", locks);
    this.quorum = group.size() / 2 + 1;
    long shortest = Long.MAX_VALUE;
    List<DistributedLock> members = group.members();
    for (int i = 0; i < members.size(); i++) {
      if (!(members.get(i) instanceof RedisLock r) || r.kind() != LockKind.EXCLUSIVE) {
        // A fair lock or a side of a read-write lock votes by its own rules (a reader's write
        // side refuses a no-wait vote, which the rounds would take for "busy" for ever).
        throw new IllegalArgumentException("A RedLock takes locks from LockClient.getLock or "
            + "getFencedLock, one per independent Redis server; lock " + i + " ('"
            + members.get(i).getName() + "') is a " + (members.get(i) instanceof RedisLock
                ? members.get(i).toString() : members.get(i).getClass().getSimpleName()));
      }
      shortest = Math.min(shortest, r.engine().watchdogMillis());
    }
    this.watchdogMillis = shortest;
  }

  /**
   * The validity left after a round that took {@code elapsedNanos} under a lease of
   * {@code leaseMillis}: the lease, less the round, less the drift allowance.
   */
  static long validityMillis(long leaseMillis, long elapsedNanos) {
    long elapsed = TimeUnit.NANOSECONDS.toMillis(elapsedNanos) + 1; // round up
    return leaseMillis - elapsed - driftMillis(leaseMillis);
  }

  /** How far the servers' clocks may run ahead of ours over a lease: 1% plus 2 ms. */
  static long driftMillis(long leaseMillis) {
    return leaseMillis / 100 + 2;
  }

  int quorum() {
    return quorum;
  }

  /** {@return the members' name when they share one (the usual case), else {@code redlock[…]}} */
  @Override
  public String getName() {
    String first = group.members().get(0).getName();
    for (DistributedLock m : group.members()) {
      if (!m.getName().equals(first)) {
        return "redlock[" + group.names() + "]";
      }
    }
    return first;
  }

  /**
   * The rounds described in the class comment. When Redis errors alone keep a majority out of
   * reach for the whole wait (or, without a bound, for one watchdog timeout), the call throws
   * instead of answering {@code false}, like a single lock whose server is down.
   */
  @Override
  boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    // Acquired again before a failed unlock() was called again (through any handle of these
    // members, or a multi-lock holding one): once this acquisition holds, the sections that
    // unlock() left counted are given back — a member whose release never ran owes it on its
    // own hold no more than the record says; its section says so, in case another composite's
    // round gives it back. If it does not hold, the record stays for the retry the contract
    // asks for.
    long threadId = Thread.currentThread().getId();
    MultiLock.OwedKey key = threadKey(threadId);
    MultiLock.Due unfinished = ThreadRecord.take(unfinishedStores(), key);
    boolean acquired = false;
    try {
      acquired = acquireRounds(unfinished != null, waitNanos, leaseMillis, interruptible);
      return acquired;
    } finally {
      if (unfinished != null) {
        if (!acquired) {
          keepUnfinished(key, unfinished);
        } else if (unfinished != SETTLED) {
          unfinished.giveBack(threadId); // what stays owed, on its member's hold
        }
      }
    }
  }

  private boolean acquireRounds(boolean finishing, long waitNanos, long leaseMillis,
      boolean interruptible) throws InterruptedException {
    long lease = leaseMillis == NONE ? watchdogMillis : leaseMillis;
    long start = System.nanoTime();
    long unreachableSince = 0;
    boolean interrupted = false;
    try {
      while (true) {
        long roundStart = System.nanoTime();
        List<DistributedLock> held = new ArrayList<>(group.size());
        List<RuntimeException> errors = new ArrayList<>();
        try {
          for (DistributedLock m : group.members()) {
            try {
              if (LockGroup.acquire(m, 0, leaseMillis)) {
                held.add(m);
              }
            } catch (LockException | IllegalStateException e) {
              errors.add(e); // a failed vote: that server is down, or its hold was lost
            }
          }
        } catch (InterruptedException e) {
          LockGroup.releaseQuietly(held, e);
          if (interruptible) {
            throw e;
          }
          interrupted = true;
          continue;
        } catch (RuntimeException | Error e) {
          LockGroup.releaseQuietly(held, e);
          throw e;
        }
        long validity = validityMillis(lease, System.nanoTime() - roundStart);
        if (held.size() >= quorum && validity > 0) {
          openSection(Thread.currentThread().getId(), new Section(held.stream()
              .map(LockGroup::identity).collect(Collectors.toUnmodifiableSet()), finishing));
          return true;
        }
        Throwable releaseFailure = LockGroup.releaseQuietly(held, null);
        if (releaseFailure != null) {
          // That server's vote expires with its lease; the others are free again.
          LOG.log(Level.DEBUG, () -> "RedLock " + getName() + ": releasing a lost round's vote "
              + "failed: " + releaseFailure.getMessage());
        }
        LOG.log(Level.DEBUG, () -> "RedLock " + getName() + ": round won " + held.size() + " of "
            + group.size() + " votes (quorum " + quorum + "), validity " + validity + "ms, "
            + errors.size() + " errors");
        long now = System.nanoTime();
        boolean unreachable = errors.size() > group.size() - quorum;
        unreachableSince = unreachable ? (unreachableSince == 0 ? now : unreachableSince) : 0;
        boolean waitOver = waitNanos == 0 || (waitNanos != NONE && now - start >= waitNanos);
        if (unreachable && (waitOver || (waitNanos == NONE
            && now - unreachableSince > TimeUnit.MILLISECONDS.toNanos(watchdogMillis)))) {
          throw noMajority(errors);
        }
        if (waitOver) {
          return false;
        }
        long pause = TimeUnit.MILLISECONDS.toNanos(RETRY_MIN_MILLIS
            + ThreadLocalRandom.current().nextLong(RETRY_SPREAD_MILLIS));
        if (waitNanos != NONE) {
          pause = Math.min(pause, waitNanos - (now - start));
        }
        try {
          TimeUnit.NANOSECONDS.sleep(pause);
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * {@return which of this handle's members the thread's newest open section of this RedLock won
   * (the ones its next unlock() releases), in this handle's order; null if the thread has none
   * open}
   */
  boolean[] newestSection(long threadId) {
    Deque<Section> open = openSections(threadId);
    if (open == null) {
      return null;
    }
    Set<Object> newest = open.peek().won();
    List<DistributedLock> members = group.members();
    boolean[] won = new boolean[members.size()];
    for (int i = 0; i < won.length; i++) {
      won[i] = newest.contains(LockGroup.identity(members.get(i)));
    }
    return won;
  }

  private LockException noMajority(List<RuntimeException> errors) {
    LockException e = new LockException("RedLock " + getName() + " cannot reach a majority ("
        + quorum + " of " + group.size() + "): " + errors.size() + " servers failed, first: "
        + errors.get(0).getMessage(), errors.get(0));
    for (int i = 1; i < errors.size(); i++) {
      e.addSuppressed(errors.get(i));
    }
    return e;
  }

  /**
   * Closes the thread's newest section: releases the members its acquisition won (those this
   * thread does not hold any more answer that, and are skipped). A member whose vote that
   * acquisition did not win is left alone; it counts as released if the thread holds it (in an
   * outer section, or alone), else as not held. When
   * a majority is released, or a majority is not held, a member whose inner release failed keeps
   * a section the application will not unlock: it is owed, and the thread's next call on that
   * member (the RedLock's next unlock() or acquisition included) releases it first.
   *
   * @throws IllegalMonitorStateException if the thread has no acquisition of this RedLock open
   *     (no member is touched), or if a majority of members answered that this thread
   *     does not hold them (never held, or lost); its message quotes a member's loss if there
   *     was one (the RedLock was lost, not never held); the members' exceptions are suppressed
   * @throws LockException if fewer than a majority could be released otherwise, because servers
   *     failed to answer. Call {@code unlock()} again: it finishes only what this call left —
   *     the members whose release failed and is still owed; a member released now is not
   *     released twice, and one the thread took alone meanwhile is its own (kept per thread and
   *     members, whichever handle names them). Acquiring the RedLock again instead gives those
   *     sections back once the acquisition holds (a failed acquisition leaves the record)
   * @throws IllegalStateException if fewer than a majority was released and the rest are members
   *     whose client is closed (or not held): nothing is left to call again, as for any lock of
   *     a closed client
   */
  @Override
  public void unlock() {
    long threadId = Thread.currentThread().getId();
    MultiLock.OwedKey key = threadKey(threadId);
    MultiLock.Due unfinished = ThreadRecord.take(unfinishedStores(), key);
    if (unfinished == SETTLED) {
      return; // finished by an acquisition given back since
    }
    if (unfinished != null) {
      // The retry of a failed unlock(): only the members whose release failed and is still owed
      // get it again (one released then is not released twice, one taken alone since is the
      // thread's own). That unlock() closed its section already.
      MultiLock.Retry retry = unfinished.retry(threadId);
      if (retry == null) {
        return;
      }
      if (retry.left() != null) {
        keepUnfinished(key, retry.left());
      }
      throw retry.failure();
    }
    MultiLock.Due.Before before = MultiLock.Due.before(this, threadId);
    if (before.section() == null && openEngines().findAny().isPresent()) {
      // No acquisition of this RedLock by the thread is open: a member it holds is its own
      // (taken alone, or by another composite), not this call's to release.
      throw new IllegalMonitorStateException("RedLock " + getName() + " is not held by "
          + thread() + ": no acquisition of it by this thread is open");
    }
    closeSection(threadId); // whatever follows: a failure's record owes only this section's
    int released = 0;
    List<RuntimeException> failures = new ArrayList<>();
    List<Undone> undone = new ArrayList<>();
    // Members whose client is closed: nothing is owed or retried there (its holds expire).
    List<IllegalStateException> closed = new ArrayList<>();
    IllegalMonitorStateException lost = null; // a member's loss: what the exception quotes
    for (int i = 0; i < group.size(); i++) {
      RedisLock member = (RedisLock) group.members().get(i);
      Hold hold = before.holds().get(i); // one lookup feeds this call and the failure's record
      int from = before.counts()[i];
      if (before.without()[i]) {
        // Not in this section: the thread's hold of it, if any, is another section's or its own.
        if (hold != null && hold.active() && from > 0) {
          released++;
        } else {
          failures.add(new IllegalMonitorStateException("lock '" + member.getName() + "' is not "
              + "in this section of RedLock " + getName() + ": its vote was not won"));
        }
        continue;
      }
      try {
        member.unlock();
        released++;
      } catch (IllegalMonitorStateException e) {
        failures.add(e);
        if (lost == null && hold != null && !hold.active()) {
          lost = e;
        }
      } catch (IllegalStateException e) {
        if (!member.engine().closed()) {
          throw e;
        }
        closed.add(e);
      } catch (RuntimeException e) {
        failures.add(e);
        undone.add(new Undone(member, from));
      }
    }
    long notHeld = failures.stream().filter(IllegalMonitorStateException.class::isInstance)
        .count();
    // A majority saying "not this thread's" settles it; otherwise servers failed to answer.
    boolean onlyNotHeld = released < quorum && notHeld > group.size() - quorum;
    if (released >= quorum || onlyNotHeld) {
      // Done, as far as the application knows (released, or lost): a member whose inner
      // release did not go through keeps a section nobody will unlock, so it is owed as a
      // give-back, finished by the thread's next call on that member (a final one ends in doubt
      // on its own). Only a LockException asks the caller to call again.
      for (Undone u : undone) {
        u.member().oweFailedRelease(threadId, u.from());
      }
    }
    if (released >= quorum) {
      if (!failures.isEmpty()) {
        LOG.log(Level.DEBUG, () -> "RedLock " + getName() + " released on " + (group.size()
            - failures.size()) + " of " + group.size() + " servers; first failure: "
            + failures.get(0).getMessage());
      }
      return;
    }
    if (!closed.isEmpty() && undone.isEmpty() && !onlyNotHeld) {
      // No retry could finish anything: what the closed clients held expires with its lease.
      // Answered as any lock of a closed client answers.
      IllegalStateException thrown = new IllegalStateException("RedLock " + getName()
          + ": the lock client of " + closed.size() + " of " + group.size() + " members is "
          + "closed; released on " + released + " (a majority is " + quorum + "), the closed "
          + "clients' holds expire with their leases", closed.get(0));
      failures.forEach(thrown::addSuppressed);
      closed.stream().skip(1).forEach(thrown::addSuppressed);
      throw thrown;
    }
    // A member's loss is quoted first: the caller must learn "lost", not "never held" from a
    // member whose vote was never won, nor a server's error.
    RuntimeException quoted = lost != null ? lost : failures.get(0);
    String message = released == 0 && notHeld == failures.size()
        ? "RedLock " + getName() + (lost != null ? " was lost by " : " is not held by ")
            + thread() + ": " + quoted.getMessage()
        : "RedLock " + getName() + " was held by " + thread() + " on " + released + " of "
            + group.size() + " servers at unlock(), fewer than a majority (" + quorum + "); "
            + "all were released where possible. " + (lost != null ? "Lost: " : "First failure: ")
            + quoted.getMessage();
    RuntimeException thrown = onlyNotHeld ? new IllegalMonitorStateException(message)
        : new LockException(message, failures.stream()
            .filter(e -> !(e instanceof IllegalMonitorStateException)).findFirst().orElseThrow());
    if (!onlyNotHeld) {
      MultiLock.Due left = MultiLock.Due.left(this, threadId, before);
      if (left != null) {
        keepUnfinished(key, left);
      }
    }
    for (RuntimeException e : failures) {
      if (e != thrown.getCause()) {
        thrown.addSuppressed(e);
      }
    }
    throw thrown;
  }

  /**
   * Turns what a failed unlock() of the thread's left owed into give-backs of its members: each
   * release still owed is tried once more and, failing again, owed on that member's hold
   * ({@link MultiLock.Due#giveBack}). No record is left for the thread's next unlock().
   */
  @Override
  void owedOnMembers(long threadId) {
    MultiLock.OwedKey key = threadKey(threadId);
    MultiLock.Due owed = ThreadRecord.take(unfinishedStores(), key);
    if (owed == SETTLED) {
      keepUnfinished(key, owed);
    } else if (owed != null) {
      owed.giveBack(threadId);
    }
  }

  @Override
  boolean takeSettled(long threadId) {
    MultiLock.OwedKey key = threadKey(threadId);
    MultiLock.Due record = ThreadRecord.take(unfinishedStores(), key);
    if (record == SETTLED) {
      return true;
    }
    if (record != null) {
      keepUnfinished(key, record);
    }
    return false;
  }

  @Override
  void settleFinishedUnlock(long threadId) {
    keepUnfinished(threadKey(threadId), SETTLED);
  }

  private void keepUnfinished(MultiLock.OwedKey key, MultiLock.Due record) {
    ThreadRecord.keep(unfinishedStores(), key, ThreadRecord.ofCurrentThread(record));
  }

  /**
   * Drops what a failed unlock() of this RedLock by the thread left owed: a multi-lock that
   * called it keeps its own record of that ({@link MultiLock.Due}), and finishes it.
   */
  void forgetUnfinished(long threadId) {
    ThreadRecord.take(unfinishedStores(), threadKey(threadId));
  }

  /** {@return this RedLock and the thread, as its records are keyed} */
  private MultiLock.OwedKey threadKey(long threadId) {
    return new MultiLock.OwedKey(List.of(LockGroup.identity(this)), threadId);
  }

  /** {@return the open member clients' engines: where the thread's records are kept} */
  private java.util.stream.Stream<LockEngine> openEngines() {
    return group.members().stream().map(m -> ((RedisLock) m).engine()).distinct()
        .filter(e -> !e.closed());
  }

  /** {@return the stores of failed unlocks' records ({@link MultiLock.Due}: what is owed)} */
  private List<Map<MultiLock.OwedKey, ThreadRecord<MultiLock.Due>>> unfinishedStores() {
    return openEngines()
        .<Map<MultiLock.OwedKey, ThreadRecord<MultiLock.Due>>>map(LockEngine::redLockUnfinished)
        .toList();
  }

  @Override
  List<Map<MultiLock.OwedKey, ThreadRecord<Deque<Section>>>> sectionStores() {
    return openEngines()
        .<Map<MultiLock.OwedKey, ThreadRecord<Deque<Section>>>>map(LockEngine::redLockSections)
        .toList();
  }

  @Override
  MultiLock.OwedKey sectionKey(long threadId) {
    return threadKey(threadId);
  }

  /** A member whose inner release failed, and the count that release started from. */
  private record Undone(RedisLock member, int from) {
  }

  /**
   * Force-unlocks every member that can be reached.
   *
   * @return whether any member was deleted
   * @throws LockException if fewer than a majority of servers answered
   */
  @Override
  public boolean forceUnlock() {
    boolean any = false;
    List<RuntimeException> errors = new ArrayList<>();
    for (DistributedLock m : group.members()) {
      try {
        any |= m.forceUnlock();
      } catch (RuntimeException e) {
        errors.add(e);
      }
    }
    if (errors.size() > group.size() - quorum) {
      throw noMajority(errors);
    }
    return any;
  }

  /** {@return whether a majority of members is held by anyone} */
  @Override
  public boolean isLocked() {
    return majority(DistributedLock::isLocked);
  }

  /** {@return whether the calling thread holds a majority of members} */
  @Override
  public boolean isHeldByCurrentThread() {
    return majority(DistributedLock::isHeldByCurrentThread);
  }

  /** {@return whether the thread holds a majority of members} */
  @Override
  public boolean isHeldByThread(long threadId) {
    return majority(m -> m.isHeldByThread(threadId));
  }

  /**
   * {@return how many acquisitions of this RedLock by the calling thread are open (each one an
   * unlock() closes), while the thread holds it (a majority of members); else 0} Holds of the
   * members that the thread took alone are not the RedLock's, and are not counted.
   */
  @Override
  public int getHoldCount() {
    Deque<Section> open = openSections(Thread.currentThread().getId());
    return open == null || !isHeldByCurrentThread() ? 0 : open.size();
  }

  /**
   * {@return how long a majority of members stays held: the quorum-th longest remaining lease;
   * -2 if fewer than a majority are held, -1 if a majority never expires}
   */
  @Override
  public long remainTimeToLive() {
    long ttl = quorumth(m -> {
      long t = m.remainTimeToLive();
      return t == -1 ? Long.MAX_VALUE : t;
    }, -2);
    return ttl == Long.MAX_VALUE ? -1 : ttl;
  }

  private interface Query {
    long ask(DistributedLock member);
  }

  private interface Test {
    boolean ask(DistributedLock member);
  }

  /**
   * Whether a majority answers yes; a member that fails answers no, and when too few answer to
   * tell, the query fails.
   */
  private boolean majority(Test test) {
    int yes = 0;
    List<RuntimeException> errors = new ArrayList<>();
    for (DistributedLock m : group.members()) {
      try {
        if (test.ask(m)) {
          yes++;
        }
      } catch (LockException e) {
        errors.add(e);
      }
    }
    if (yes < quorum && group.size() - errors.size() < quorum) {
      throw noMajority(errors);
    }
    return yes >= quorum;
  }

  /** The quorum-th largest answer; a member that fails answers {@code failed}. */
  private long quorumth(Query query, long failed) {
    List<Long> answers = new ArrayList<>();
    List<RuntimeException> errors = new ArrayList<>();
    for (DistributedLock m : group.members()) {
      try {
        answers.add(query.ask(m));
      } catch (LockException e) {
        errors.add(e);
        answers.add(failed);
      }
    }
    if (errors.size() > group.size() - quorum) {
      throw noMajority(errors);
    }
    answers.sort(java.util.Comparator.reverseOrder());
    return answers.get(quorum - 1);
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("A RedLock has no conditions");
  }

  @Override
  public String toString() {
    return "RedLock[" + group.names() + "]";
  }

  private static String thread() {
    Thread t = Thread.currentThread();
    return "thread " + t.getName() + " (id " + t.getId() + ")";
  }

  /** {@return the members} */
  List<DistributedLock> members() {
    return group.members();
  }
}
