package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.LockNotAcquiredException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * One thread of a {@link LockModelTest} process: a random sequence of lock operations on the
 * shared lock names through its slot's client, with the model of what this thread believes it
 * holds, recording every call, hold episode and probe window.
 *
 * <p>The model, per lock this thread holds: a hold <em>episode</em> (from the acquisition that
 * took the count from 0 until the count is back to 0) with a stack of sections, each WATCHDOG
 * (no lease argument) or FIXED (explicit lease), as in the engine contract. The thread enters a
 * probe window only while it believes it holds the lock: no LockLost received for the episode,
 * no failed unlock pending, its client open, and — when only FIXED sections are open — well
 * before the earliest moment the lease can run out (then it releases instead, as an application
 * with no time left would). Most holds are short; one in seven is a long critical section of
 * 1-4 s of back-to-back windows, long enough to span a fault. A thread that holds locks takes
 * another only if its name is higher, and only with a bounded tryLock, so actors cannot deadlock
 * and waits do not form convoys; waiting re-entries happen only on the highest lock held.
 *
 * <p>Some new holds are {@link LockHold}s ({@code acquire}/{@code acquireAsync}): owned by an
 * object, not the thread, so never re-entered (nor counted by {@code getHoldCount}); the actor
 * works under them as under its own holds, and releases them from another thread (a releaser
 * thread, {@code releaseAsync}, or {@link EngineAccess#releaseAfter} for a kept release). Their
 * events carry the LockHold's owner id where a thread hold's carry the thread id, which is also
 * the id their {@code LockLost} reports, so the judge treats each as a holder of its own and
 * checks its windows against every thread's.
 *
 * <p>Random choices come from a {@link Random} seeded by the run's seed and the actor's name, so
 * the sequence of choices is fixed by the seed; which choices are possible depends on timing
 * (what is held when), so two runs with one seed are alike, not identical.
 *
 * <p>Confined to its thread, except {@link #describeCall()}.
 */
final class ModelActor implements Runnable {
  private static final int MAX_COUNT = 3;
  /** An episode held this long only releases (and winds down its nested holds). */
  private static final long HOLD_CAP_MICROS = 5_000_000;
  /** One new hold in this many is a long one: 1-4 s of work, often longer than a lease. */
  private static final int LONG_HOLD_ONE_IN = 7;
  /** Margin before the earliest possible end of a FIXED lease: work, probe trip, 1%, timer. */
  private static final long WINDOW_MARGIN_MICROS = 200_000;
  /** How long after its upper bound a FIXED lease must have been declared lost. */
  static final long LEASE_TOLERANCE_MICROS = 300_000;
  /** A failed unlock is retried for at most this long before the hold is abandoned. */
  private static final long UNLOCK_RETRY_MICROS = 30_000_000;
  private static final long RECREATE_MIN_MILLIS = 12_000;
  /** One final release in this many keeps the lock held a while ({@code unlockAfter}). */
  private static final int KEEP_ONE_IN = 6;
  /** The tag of an acquisition of the multi-lock that finished a failed unlock of it first. */
  static final String FINISHES_FAILED_UNLOCK = "finishes-failed-unlock";
  /**
   * The tag of a call on a RedLock whose thread knows of a minority of its members lost: the
   * RedLock may still be held (no expectation; see {@code Hold#maybeHeld}).
   */
  static final String MEMBER_LOST = "member-lost";
  /** The tag of a RedLock acquisition's members held once it returned: {@code members=q0+q2}. */
  static final String RED_MEMBERS_TAG = "members=";
  /** Share of new acquisitions (of 100) that go for the hot name, so that handoffs happen. */
  private static final int HOT_PERCENT = 35;

  private enum Method {
    LOCK, LOCK_LEASE, TRY, TRY_WAIT, TRY_WAIT_LEASE, INTERRUPTIBLY, INTERRUPTIBLY_LEASE,
    /** {@code acquire(wait, lease)}: a {@link LockHold} owned by an object, not the thread. */
    HOLD,
    /** {@code acquireAsync(wait, lease)}, joined: the acquisition runs on a client thread. */
    HOLD_ASYNC;

    /** Whether the call's wait is bounded; a hold's is whenever the actor holds something. */
    boolean bounded() {
      return this == TRY || this == TRY_WAIT || this == TRY_WAIT_LEASE || owned();
    }

    boolean interruptible() {
      return this == INTERRUPTIBLY || this == INTERRUPTIBLY_LEASE || this == HOLD;
    }

    /** Whether it makes a {@link LockHold}, which is never re-entered. */
    boolean owned() {
      return this == HOLD || this == HOLD_ASYNC;
    }
  }

  /** Where holds are released from: never the acquiring actor's thread. */
  private static final java.util.concurrent.ExecutorService RELEASERS =
      java.util.concurrent.Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "model-releaser");
        t.setDaemon(true);
        return t;
      });

  private record Section(boolean watchdog, long callStart, long callEnd, long leaseMillis) {
  }

  /**
   * This thread's hold of one lock: one episode. A hold owned by a {@link LockHold} has one
   * section, is never re-entered, is released from another thread, and is recorded (and its
   * LockLost reported) under the LockHold's owner id instead of the thread's id.
   */
  private static final class Hold {
    final String episode;
    final String lock;
    final ModelSlot.Generation generation;
    final long callStart;
    /** The LockHold that owns it, or null for a hold of the actor's thread. */
    LockHold owned;
    /** The id it is recorded and reported under: the thread's, or the LockHold's owner id. */
    long owner;
    final ArrayDeque<Section> sections = new ArrayDeque<>();
    /** Latest possible end of any FIXED lease of the episode (µs); 0 if none. */
    long fixedUpper;
    /** When the last WATCHDOG section closed (µs); 0 if none did. */
    long watchdogClosedAt;
    boolean lost;
    long unlockFailingSince;
    /** Until when (µs) the thread means to keep working under this hold; 0 for a short hold. */
    long busyUntil;
    /** LockLost reports up to this detection time (µs) may be about the other side: ignored. */
    long ambiguousUpTo;
    /** A RedLock's members whose loss was reported to the thread during this episode. */
    final java.util.Set<String> lostMembers = new java.util.HashSet<>();
    /**
     * Lost as far as windows go, but maybe still held: a RedLock of which the thread knows only
     * the loss of a minority of members (or a re-entry that a member's loss made fail), which may
     * leave it holding a majority. The thread does no more work under it and winds it down, and
     * the model expects nothing of its calls ({@link #MEMBER_LOST}).
     */
    boolean maybeHeld;

    Hold(String episode, String lock, ModelSlot.Generation generation, long callStart) {
      this.episode = episode;
      this.lock = lock;
      this.generation = generation;
      this.callStart = callStart;
    }

    int count() {
      return sections.size();
    }

    boolean watchdogOpen() {
      return sections.stream().anyMatch(Section::watchdog);
    }

    /** Earliest moment the engine may end the lease (µs); MAX when a WATCHDOG section is open. */
    long earliestEnd() {
      if (watchdogOpen()) {
        return Long.MAX_VALUE;
      }
      long end = 0;
      for (Section s : sections) {
        long lease = s.leaseMillis * 1_000;
        end = Math.max(end, s.callStart + lease - lease / 100);
      }
      return end;
    }

    /** The model's expectation for a call on this hold starting at {@code start}. */
    String expectation(long start) {
      if (lost) {
        return maybeHeld ? MEMBER_LOST : "lost:reported";
      }
      if (!watchdogOpen() && count() > 0
          && start > Math.max(fixedUpper, watchdogClosedAt) + LEASE_TOLERANCE_MICROS) {
        return "lost:lease";
      }
      return "";
    }
  }

  private final String label;
  private final ModelSlot slot;
  private final ModelSettings settings;
  private final ModelHistory history;
  private final ScheduledExecutorService interrupter;
  private final BooleanSupplier stopping;
  private final Random random;
  private final TreeMap<String, Hold> holds = new TreeMap<>();
  private ModelProbe probe;
  private long threadId;
  private int episodes;
  private int windows;
  private volatile String currentCall = "";
  private volatile long currentCallSince;

  ModelActor(String label, ModelSlot slot, ModelSettings settings, ModelHistory history,
      ScheduledExecutorService interrupter, BooleanSupplier stopping) {
    this.label = label;
    this.slot = slot;
    this.settings = settings;
    this.history = history;
    this.interrupter = interrupter;
    this.stopping = stopping;
    this.random = settings.randomFor(label);
  }

  String label() {
    return label;
  }

  /** The call in progress, for a report on a stuck actor. */
  String describeCall() {
    String call = currentCall;
    return call.isEmpty() ? "between calls"
        : call + " since " + ModelEvent.time(currentCallSince);
  }

  @Override
  public void run() {
    threadId = Thread.currentThread().getId();
    try (ModelProbe p = new ModelProbe(settings.probePort())) {
      probe = p;
      while (true) {
        dropHoldsOfClosedClients();
        if (holds.isEmpty() && stopping.getAsBoolean()) {
          return;
        }
        noticeLosses();
        step();
      }
    } catch (Throwable t) {
      history.violation("actor", label, "actor crashed: " + t);
      throw t;
    }
  }

  private void step() {
    for (Hold hold : holds.values()) {
      if (hold.unlockFailingSince != 0) {
        pause(20 + random.nextInt(80));
        // Of a composite's retries (the multi-lock, the RedLock): while it is re-entered, half
        // re-acquire (the DistributedLock#unlock contract: an acquisition that succeeds finishes
        // the failed unlock first); of the others, half take a member alone first.
        boolean composite = ModelLocks.composite(hold.lock);
        if (composite && hold.count() >= 2 && !hold.lost && random.nextBoolean()) {
          acquire(hold.lock, hold, pickMethod(true, false));
        } else if (composite && random.nextBoolean()
            && !holds.containsKey(ModelLocks.retakenMember(hold.lock))) {
          retakeMemberThenUnlock(hold);
        } else {
          unlock(hold);
        }
        return;
      }
    }
    if (stopping.getAsBoolean()) {
      unlock(holds.lastEntry().getValue());
      return;
    }
    if (holds.isEmpty()) {
      idleStep();
    } else {
      holdingStep();
    }
  }

  private void idleStep() {
    int r = random.nextInt(1_000);
    if (r < 3) {
      forceUnlock(randomLock());
    } else if (r < 13) {
      recreateClient();
    } else if (r < 250) {
      pause(5 + random.nextInt(95));
    } else {
      acquire(randomLock(), null, pickMethod(false, true));
    }
  }

  private void holdingStep() {
    List<Hold> held = new ArrayList<>(holds.values());
    Hold any = held.get(random.nextInt(held.size()));
    Hold top = holds.lastEntry().getValue();
    long oldest = held.stream().mapToLong(h -> h.callStart).min().orElseThrow();
    int r = random.nextInt(1_000);
    if (any.lost) {
      // Close the lost sections; now and then try to re-enter, which the contract refuses, or
      // check the hold as a transaction's commit would, which must not pass it.
      // (Not a RedLock that may still be held: a re-entry could take a lost member afresh.)
      if (r < 150 && any.owned == null && !any.maybeHeld) {
        acquire(any.lock, any, pickMethod(true, false));
      } else if (r < 300) {
        commitCheck(any);
      } else {
        unlock(any);
      }
      return;
    }
    long now = ModelEvent.now();
    if (now - oldest > HOLD_CAP_MICROS) {
      unlock(r < 500 ? top : any);
      return;
    }
    if (now < any.busyUntil) {
      // A long critical section: work, with now and then a call that does not release.
      if (r < 920) {
        workOrFinish(any);
      } else if (r < 950 && any.count() < MAX_COUNT && any.owned == null) {
        acquire(any.lock, any, pickMethod(any != top, false));
      } else if (r < 970) {
        String higher = nextLockAfter(top.lock);
        if (higher != null) {
          acquire(higher, null, pickMethod(true, true));
        }
      } else if (r < 980 && any.owned == null) {
        holdCount(any);
      } else if (r < 990) {
        commitCheck(any);
      } else {
        pause(1 + random.nextInt(20));
      }
      return;
    }
    if (r < 550) {
      workOrFinish(any); // mostly work, without Redis calls, as a critical section would
    } else if (r < 750) {
      if (ModelLocks.composite(any.lock) && !any.lost && r < 600
          && !holds.containsKey(ModelLocks.retakenMember(any.lock))) {
        retakeMemberThenUnlock(any); // a RedLock section may not have won that member
      } else {
        unlock(any);
      }
    } else if (r < 850) {
      if (any.count() < MAX_COUNT && any.owned == null) {
        acquire(any.lock, any, pickMethod(any != top, false));
      }
    } else if (r < 910) {
      String higher = nextLockAfter(top.lock);
      if (higher != null) {
        acquire(higher, null, pickMethod(true, true));
      }
    } else if (r < 945) {
      if (any.owned == null) {
        holdCount(any);
      }
    } else if (r < 970) {
      commitCheck(any);
    } else if (r < 972) {
      forceUnlock(randomLock());
    } else if (r < 977) {
      recreateClient();
    } else {
      pause(1 + random.nextInt(20));
    }
  }

  // ---- acquisitions ----

  private void acquire(String lock, Hold existing, Method method) {
    if (method.owned() && ModelLocks.composite(lock)) {
      method = Method.TRY_WAIT; // a composite lock has no LockHold (bounded, as a hold's wait is)
    }
    ModelSlot.Generation generation = existing != null ? existing.generation : slot.current();
    DistributedLock handle = ModelLocks.handle(generation.client, lock);
    // A hold waits without bound only while the actor holds nothing, as lock() may.
    boolean unboundedHold = method.owned() && holds.isEmpty() && random.nextInt(3) == 0;
    long waitMillis = method == Method.TRY_WAIT || method == Method.TRY_WAIT_LEASE
        || (method.owned() && !unboundedHold)
        ? (random.nextInt(5) == 0 ? 0 : random.nextInt(ModelSettings.MAX_WAIT_MS + 1)) : -1;
    long leaseMillis = method == Method.LOCK_LEASE || method == Method.TRY_WAIT_LEASE
        || method == Method.INTERRUPTIBLY_LEASE || (method.owned() && random.nextBoolean())
        ? ModelSettings.MIN_LEASE_MS
            + random.nextInt(ModelSettings.MAX_LEASE_MS - ModelSettings.MIN_LEASE_MS + 1) : -1;
    long interruptAfter = method.interruptible() && random.nextInt(10) < 6
        ? 20 + random.nextInt(1_500) : -1;
    String op = describe(method, waitMillis, leaseMillis, interruptAfter);
    int before = existing == null ? 0 : existing.count();
    boolean finishesFailedUnlock = existing != null && existing.unlockFailingSince != 0;
    long bound = switch (method) {
      case TRY -> settings.quickBoundMicros();
      case TRY_WAIT, TRY_WAIT_LEASE -> settings.waitBoundMicros(waitMillis);
      case HOLD, HOLD_ASYNC -> waitMillis >= 0 ? settings.waitBoundMicros(waitMillis)
          : settings.lockBoundMicros();
      default -> settings.lockBoundMicros();
    };
    InterruptToken token = interruptAfter >= 0
        ? new InterruptToken(Thread.currentThread(), interruptAfter) : null;
    long start = ModelEvent.now();
    String expectation = existing == null ? "" : existing.expectation(start);
    String outcome;
    String message = "";
    boolean acquired = false;
    LockHold owned = null;
    java.time.Duration wait = waitMillis < 0 ? null : java.time.Duration.ofMillis(waitMillis);
    java.time.Duration lease = leaseMillis < 0 ? null : java.time.Duration.ofMillis(leaseMillis);
    begin(op + " '" + lock + "'");
    try {
      acquired = switch (method) {
        case HOLD -> {
          owned = handle.acquire(wait, lease);
          yield true;
        }
        case HOLD_ASYNC -> {
          try {
            owned = handle.acquireAsync(wait, lease).toCompletableFuture().join();
          } catch (java.util.concurrent.CompletionException e) {
            throw unwrap(e);
          }
          yield true;
        }
        case LOCK -> {
          handle.lock();
          yield true;
        }
        case LOCK_LEASE -> {
          handle.lock(leaseMillis, TimeUnit.MILLISECONDS);
          yield true;
        }
        case TRY -> handle.tryLock();
        case TRY_WAIT -> handle.tryLock(waitMillis, TimeUnit.MILLISECONDS);
        case TRY_WAIT_LEASE -> handle.tryLock(waitMillis, leaseMillis, TimeUnit.MILLISECONDS);
        case INTERRUPTIBLY -> {
          handle.lockInterruptibly();
          yield true;
        }
        case INTERRUPTIBLY_LEASE -> {
          handle.lockInterruptibly(leaseMillis, TimeUnit.MILLISECONDS);
          yield true;
        }
      };
      outcome = acquired ? "OK" : "FALSE";
    } catch (InterruptedException e) {
      outcome = "INTERRUPTED";
      message = String.valueOf(e.getMessage());
    } catch (LockNotAcquiredException e) {
      // A hold's wait elapsed (FALSE), or its client thread was interrupted: by the close of
      // the client (as ISE), else by nothing the model did (INTERRUPTED, judged as such).
      outcome = !(e.getCause() instanceof InterruptedException) ? "FALSE"
          : generation.closed() ? "ISE" : "INTERRUPTED";
      message = String.valueOf(e.getMessage());
    } catch (RuntimeException e) {
      outcome = outcomeOf(e);
      message = String.valueOf(e.getMessage());
    } finally {
      if (token != null) {
        token.disarm();
      }
      Thread.interrupted(); // an interrupt that came too late must not leak into later calls
      end();
    }
    long end = ModelEvent.now();
    String tag = expectation;
    if (token != null && token.firedAt() != 0) {
      tag = join(tag, "interrupt@" + token.firedAt());
    }
    int after = before;
    String episode = existing == null ? "" : existing.episode;
    long fencingToken = 0;
    if (acquired && ModelLocks.isFenced(lock) && owned != null) {
      Long t = owned.token();
      fencingToken = t == null ? -1 : t;
      tag = join(tag, "token=" + fencingToken);
    } else if (acquired && ModelLocks.isFenced(lock) && handle instanceof FencedLock fenced) {
      Long t = fenced.getToken(); // no I/O: the token the acquisition was given
      fencingToken = t == null ? -1 : t;
      tag = join(tag, "token=" + fencingToken);
    }
    if (acquired && ModelLocks.isRedLock(lock)) {
      tag = join(tag, RED_MEMBERS_TAG + heldMembers(generation));
    }
    if (acquired && finishesFailedUnlock) {
      // It completed the failed unlock first: that section is closed, then one re-entered.
      closeSection(existing, end);
      before--;
      tag = join(tag, FINISHES_FAILED_UNLOCK);
    }
    if (acquired) {
      Hold hold = existing;
      if (hold == null) {
        episode = label + ".e" + (++episodes);
        hold = new Hold(episode, lock, generation, start);
        hold.owned = owned;
        hold.owner = owned != null ? ((OwnedLockHold) owned).ownerId : threadId;
        if (random.nextInt(LONG_HOLD_ONE_IN) == 0) {
          hold.busyUntil = end + 1_000_000 + random.nextInt(3_000_001);
        }
        holds.put(lock, hold);
        history.add(ModelEvent.Kind.EPISODE_BEGIN, generation.clientId, label, hold.owner, lock,
            episode, op, "", start, end, 0, 0, fencingToken, "", "");
      }
      boolean watchdog = leaseMillis < 0;
      hold.sections.push(new Section(watchdog, start, end, Math.max(0, leaseMillis)));
      if (!watchdog) {
        hold.fixedUpper = Math.max(hold.fixedUpper, end + leaseMillis * 1_000);
      }
      after = hold.count();
    } else if (existing != null && ModelLocks.isRedLock(lock)) {
      // A RedLock's re-entry is a round of votes like any: a vote that failed and one taken by
      // a competitor's round refuse it (FALSE) while the thread holds a majority. One failing
      // with a member's "lost" shows that member lost, not (yet) the majority.
      if (outcome.equals("LOCK_EXCEPTION") && mentionsLost(message) && !existing.lost) {
        existing.lost = true;
        existing.maybeHeld = true;
      }
    } else if (existing != null && ((outcome.equals("FALSE") && !settings.reentryMayBeRefused())
        || (outcome.equals("LOCK_EXCEPTION") && mentionsLost(message)))) {
      // A re-entry refused: the hold is gone as far as this thread can tell.
      existing.lost = true;
    }
    history.add(ModelEvent.Kind.CALL, generation.clientId, label,
        existing != null ? existing.owner : holds.containsKey(lock) && acquired
            ? holds.get(lock).owner : threadId, lock, episode, op,
        outcome, start, end, before, after, bound, tag, message);
    if (outcome.equals("ISE")) {
      dropHoldsOfClosedClients();
    }
  }

  /**
   * The RedLock members this thread holds, as its client's registry says (no I/O): which
   * majority a round won, for the record.
   */
  private String heldMembers(ModelSlot.Generation generation) {
    List<String> held = new ArrayList<>();
    for (String member : ModelLocks.RED_MEMBERS) {
      dev.holdfast.engine.Hold h = ((RedisLock) generation.client.getLock(member)).holdOf(threadId);
      if (h != null && h.count() > 0) {
        held.add(member);
      }
    }
    return String.join("+", held);
  }

  /** Closes the newest section of {@code hold} (an unlock, or an acquisition finishing one). */
  private static void closeSection(Hold hold, long end) {
    Section closed = hold.sections.pop();
    if (closed.watchdog() && !hold.watchdogOpen()) {
      hold.watchdogClosedAt = end;
    }
    hold.unlockFailingSince = 0;
  }

  /** A random method; {@code owned}: whether a {@link LockHold} may be made (not a re-entry). */
  private Method pickMethod(boolean boundedOnly, boolean owned) {
    Method[] all = Method.values();
    while (true) {
      Method m = all[random.nextInt(all.length)];
      if ((!boundedOnly || m.bounded()) && (owned || !m.owned())) {
        return m;
      }
    }
  }

  /**
   * Before an unlock of a composite lock (the multi-lock, the RedLock), its first try or the
   * retry of a failed one, takes one of its members alone (a new hold of the thread's own, or a
   * section of the one the composite has there, which the unlock must leave alone: the
   * acquisition settles a member release left in doubt first; a RedLock section whose vote on
   * that member was refused does not release it at all), unlocks the composite, checks in the
   * client's registry (no I/O) that the member's hold still has that section, then releases it.
   */
  private void retakeMemberThenUnlock(Hold composite) {
    String retaken = ModelLocks.retakenMember(composite.lock);
    acquire(retaken, null, random.nextBoolean() ? Method.TRY : Method.TRY_WAIT);
    unlock(composite);
    Hold member = holds.get(retaken);
    if (member == null) {
      return; // not taken, or dropped with its closed client
    }
    DistributedLock handle = ModelLocks.handle(member.generation.client, member.lock);
    dev.holdfast.engine.Hold inClient = ((RedisLock) handle).holdOf(threadId);
    if (!member.generation.closed() && (inClient == null || inClient.count() == 0)) {
      history.violation("member-retaken", label, "the unlock of '"
          + composite.lock + "' [" + composite.episode + "] released the thread's own hold of"
          + " its member '" + member.lock + "' [" + member.episode + "], taken alone before the"
          + " retry");
    }
    unlock(member); // a failure is retried first by the next step, as for any hold
  }

  // ---- releases ----

  private void unlock(Hold hold) {
    DistributedLock handle = ModelLocks.handle(hold.generation.client, hold.lock);
    long start = ModelEvent.now();
    String expectation = hold.expectation(start);
    int before = hold.count();
    // Now and then the final release keeps the lock held a while (holdAtLeast): the judge
    // checks that nobody acquires it before that time is up.
    long keepMillis = before == 1 && hold.unlockFailingSince == 0
        && ModelLocks.keepable(hold.lock) && random.nextInt(KEEP_ONE_IN) == 0
        ? 100 + random.nextInt(1_400) : 0;
    String op = keepMillis > 0 ? "unlockAfter(" + keepMillis + "ms)" : "unlock";
    String outcome;
    String message = "";
    begin(op + " '" + hold.lock + "'");
    try {
      if (hold.owned != null) {
        release(hold.owned, keepMillis);
      } else if (keepMillis > 0) {
        Clients.engine(hold.generation.client).unlockAfter(handle,
            java.time.Duration.ofMillis(keepMillis));
      } else {
        handle.unlock();
      }
      outcome = "OK";
    } catch (RuntimeException e) {
      outcome = outcomeOf(e);
      message = String.valueOf(e.getMessage());
    } finally {
      end();
    }
    long end = ModelEvent.now();
    switch (outcome) {
      case "OK", "IMSE" -> {
        closeSection(hold, end);
        if (outcome.equals("IMSE")) {
          hold.lost = true;
          hold.maybeHeld = false; // a RedLock's: a majority answered that it is not held
        }
      }
      case "ISE" -> {
        // The client was closed: the hold is abandoned below, once the close has returned.
        pause(10);
      }
      default -> {
        // LockException (or worse): the same unlock is retried before anything else.
        if (hold.unlockFailingSince == 0) {
          hold.unlockFailingSince = start;
        } else if (end - hold.unlockFailingSince > UNLOCK_RETRY_MICROS) {
          history.violation("unlock-retries", label, "unlock of '" + hold.lock + "' ["
              + hold.episode + "] kept failing for " + UNLOCK_RETRY_MICROS / 1_000_000
              + " s; last: " + outcome + " " + message);
          endEpisode(hold, "ABANDONED", end, "unlock kept failing");
        }
      }
    }
    history.add(ModelEvent.Kind.CALL, hold.generation.clientId, label, hold.owner, hold.lock,
        hold.episode, op, outcome, start, end, before, hold.count(),
        settings.quickBoundMicros(), expectation, message);
    if (hold.count() == 0 && holds.get(hold.lock) == hold) {
      endEpisode(hold, hold.lost && !hold.maybeHeld ? "LOST" : "UNLOCKED", end, "");
    }
    if (outcome.equals("ISE")) {
      dropHoldsOfClosedClients();
    }
  }

  /**
   * Releases a {@link LockHold} from another thread: a releaser thread's {@code release()}, its
   * {@code releaseAsync()}, or ({@code keepMillis} > 0) the async {@code @Locked}'s
   * {@link EngineAccess#releaseAfter}; waits for it, and throws what the release threw.
   */
  private void release(LockHold owned, long keepMillis) {
    java.util.concurrent.CompletableFuture<Void> done;
    if (keepMillis > 0) {
      done = EngineAccess.releaseAfter(owned, keepMillis).toCompletableFuture();
    } else if (random.nextBoolean()) {
      done = owned.releaseAsync().toCompletableFuture();
    } else {
      done = java.util.concurrent.CompletableFuture.runAsync(owned::release, RELEASERS);
    }
    try {
      done.join();
    } catch (java.util.concurrent.CompletionException e) {
      throw unwrap(e);
    }
  }

  private static RuntimeException unwrap(java.util.concurrent.CompletionException e) {
    return e.getCause() instanceof RuntimeException r ? r : e;
  }

  // ---- inside the critical section ----

  /** Works under {@code hold}, or releases it when its explicit lease is about to end. */
  private void workOrFinish(Hold hold) {
    if (ModelEvent.now() + WINDOW_MARGIN_MICROS > hold.earliestEnd()) {
      unlock(hold); // as an application would: no time left for another step
    } else {
      work(hold);
    }
  }

  private void work(Hold hold) {
    if (hold.lost || !slot.enterWindow(hold.generation)) {
      return;
    }
    try {
      noticeLosses();
      // Checked again inside: the step before may have taken long.
      if (hold.lost || ModelEvent.now() + WINDOW_MARGIN_MICROS > hold.earliestEnd()) {
        return;
      }
      String window = label + ".w" + (++windows);
      String name = ModelLocks.probeName(hold.lock);
      boolean shared = ModelLocks.isShared(hold.lock);
      long enter = ModelEvent.now();
      ModelProbe.Entry entry = probe.enter(name, window, shared);
      pause(random.nextInt(ModelSettings.MAX_WORK_MS + 1));
      probe.exit(name, window, shared);
      long exit = ModelEvent.now();
      List<String> others = entry.conflicting();
      history.add(ModelEvent.Kind.WINDOW, hold.generation.clientId, label, hold.owner, hold.lock,
          window, "window", "", enter, exit, 1 + others.size(), entry.count(), 0, hold.episode,
          String.join(",", others));
    } finally {
      slot.exitWindow();
    }
  }

  private void holdCount(Hold hold) {
    DistributedLock handle = ModelLocks.handle(hold.generation.client, hold.lock);
    long start = ModelEvent.now();
    int expected = hold.lost ? 0 : hold.count();
    String outcome;
    String message = "";
    int observed = -1;
    begin("getHoldCount '" + hold.lock + "'");
    try {
      observed = handle.getHoldCount();
      outcome = "OK";
    } catch (RuntimeException e) {
      outcome = outcomeOf(e);
      message = String.valueOf(e.getMessage());
    } finally {
      end();
    }
    history.add(ModelEvent.Kind.CALL, hold.generation.clientId, label, threadId, hold.lock,
        hold.episode, "getHoldCount", outcome, start, ModelEvent.now(), expected, observed,
        settings.quickBoundMicros(), "holdcount", message);
  }

  /**
   * The commit guard's check of {@code hold} ({@link HoldCheck}, as a transaction's completion
   * runs it), local or confirming in Redis. Recorded as {@code commitCheck(local|redis)}: a = the
   * model's expectation ({@link #CHECK_HELD} if surely held — not lost, no failed unlock nor
   * ambiguous read-write loss pending, and a watchdog section open or no fixed lease near its end; {@link #CHECK_LOST} once a loss was reported to the
   * thread; {@link #CHECK_UNSURE} otherwise), b = the verdict ({@link #verdictOf}).
   */
  private void commitCheck(Hold hold) {
    boolean inRedis = random.nextBoolean();
    long start = ModelEvent.now();
    boolean plain = hold.unlockFailingSince == 0 && hold.ambiguousUpTo == 0;
    int expected = hold.lost ? (hold.maybeHeld ? CHECK_UNSURE : CHECK_LOST)
        : plain && (hold.watchdogOpen() || start + WINDOW_MARGIN_MICROS < hold.earliestEnd())
        ? CHECK_HELD : CHECK_UNSURE;
    String outcome;
    String verdict = "";
    int observed = -1;
    begin("commitCheck '" + hold.lock + "'");
    try {
      HoldCheck check = hold.owned != null ? HoldCheck.of(hold.owned)
          : HoldCheck.ofThread(ModelLocks.handle(hold.generation.client, hold.lock));
      String reason = check.verify(inRedis);
      verdict = reason == null ? "" : reason;
      observed = verdictOf(reason);
      outcome = "OK";
    } catch (RuntimeException e) {
      outcome = outcomeOf(e);
      verdict = String.valueOf(e.getMessage());
    } finally {
      end();
    }
    history.add(ModelEvent.Kind.CALL, hold.generation.clientId, label, hold.owner, hold.lock,
        hold.episode, "commitCheck(" + (inRedis ? "redis" : "local") + ")", outcome, start,
        ModelEvent.now(), expected, observed, settings.quickBoundMicros(), "commitcheck",
        verdict);
  }

  /** Expectations and verdicts of {@link #commitCheck}. */
  static final int CHECK_HELD = 0;
  static final int CHECK_LOST = 1;
  static final int CHECK_UNSURE = 2;
  /** Verdict: could not be confirmed (no answer, an error): says nothing about the hold. */
  static final int CHECK_UNCONFIRMED = 2;
  /** Verdict: released, not held, being released — about a hold the thread still has. */
  static final int CHECK_OTHER = 3;

  /** The verdict of a check's reason: null passes; a reason naming a loss says lost. */
  static int verdictOf(String reason) {
    if (reason == null) {
      return CHECK_HELD;
    }
    if (reason.contains("was lost")) {
      return CHECK_LOST;
    }
    return reason.contains("could not be confirmed") ? CHECK_UNCONFIRMED : CHECK_OTHER;
  }

  // ---- others ----

  private void forceUnlock(String lock) {
    ModelSlot.Generation generation = slot.current();
    long start = ModelEvent.now();
    String outcome;
    String message = "";
    begin("forceUnlock '" + lock + "'");
    try {
      outcome = ModelLocks.handle(generation.client, lock).forceUnlock() ? "OK" : "FALSE";
    } catch (RuntimeException e) {
      outcome = outcomeOf(e);
      message = String.valueOf(e.getMessage());
    } finally {
      end();
    }
    Hold own = holds.get(lock);
    // It ran, so this thread's own holds of that lock are gone; a read-write side deletes the
    // lock (both sides) only when it was in its mode, which "true" says.
    boolean ran = ModelLocks.isReadWrite(lock) ? outcome.equals("OK")
        : outcome.equals("OK") || outcome.equals("FALSE");
    if (ran) {
      for (Hold h : holds.values()) {
        if (h.generation == generation
            && ModelLocks.probeName(h.lock).equals(ModelLocks.probeName(lock))) {
          h.lost = true;
          h.maybeHeld = false; // a RedLock keeps at most one member: a minority
        }
      }
    }
    history.add(ModelEvent.Kind.CALL, generation.clientId, label,
        own == null ? threadId : own.owner, lock, own == null ? "" : own.episode, "forceUnlock",
        outcome, start, ModelEvent.now(),
        own == null ? 0 : own.count(), own == null ? 0 : own.count(),
        settings.quickBoundMicros(), "", message);
  }

  private void recreateClient() {
    if (stopping.getAsBoolean() || !slot.mayRecreate(RECREATE_MIN_MILLIS)) {
      return;
    }
    begin("recreate client");
    try {
      slot.recreate(label);
    } finally {
      end();
    }
    dropHoldsOfClosedClients();
  }

  /** Ends the episodes of holds whose client was closed: they are abandoned, not released. */
  private void dropHoldsOfClosedClients() {
    for (Hold hold : new ArrayList<>(holds.values())) {
      if (hold.generation.closed()) {
        endEpisode(hold, "CLOSED", hold.generation.closedAt(), "client closed");
      }
    }
  }

  /** Marks holds lost for which this thread's client has reported a LockLost. */
  private void noticeLosses() {
    for (Hold hold : holds.values()) {
      if (ModelLocks.isRedLock(hold.lock)) {
        noticeMemberLosses(hold);
        continue;
      }
      for (String name : ModelLocks.reportedNames(hold.lock)) {
        long lostAt = hold.generation.lostAt(hold.owner, name);
        if (hold.lost || lostAt < hold.callStart || lostAt <= hold.ambiguousUpTo) {
          continue;
        }
        if (bothSidesHeld(hold)) {
          // A LockLost names the read-write lock, not its side: which one is unknown, also
          // once the other side has ended.
          hold.ambiguousUpTo = lostAt;
        } else {
          hold.lost = true;
        }
      }
    }
  }

  /**
   * A RedLock is lost once a majority of its members is reported lost; a minority leaves it
   * maybe held (it may hold the others), which the thread treats as lost for its work.
   */
  private void noticeMemberLosses(Hold hold) {
    boolean before = hold.lost;
    for (String name : ModelLocks.RED_MEMBERS) {
      if (hold.generation.lostAt(hold.owner, name) >= hold.callStart) {
        hold.lostMembers.add(name);
      }
    }
    if (hold.lostMembers.size() >= ModelLocks.RED_QUORUM) {
      hold.lost = true;
      hold.maybeHeld = false;
    } else if (!hold.lostMembers.isEmpty() && !before) {
      hold.lost = true;
      hold.maybeHeld = true;
    }
  }

  /** Whether this thread also holds the other side of {@code hold}'s read-write lock. */
  private boolean bothSidesHeld(Hold hold) {
    return ModelLocks.isReadWrite(hold.lock) && holds.values().stream().anyMatch(h -> h != hold
        && h.owner == hold.owner
        && ModelLocks.probeName(h.lock).equals(ModelLocks.probeName(hold.lock)));
  }

  private void endEpisode(Hold hold, String how, long at, String text) {
    holds.remove(hold.lock, hold);
    history.add(ModelEvent.Kind.EPISODE_END, hold.generation.clientId, label, hold.owner,
        hold.lock,
        hold.episode, "", how, at, at, 0, 0, 0, "", text);
  }

  private String randomLock() {
    if (random.nextInt(100) < HOT_PERCENT && settings.locks().contains(ModelLocks.HOT)) {
      return random.nextInt(3) == 0 && settings.locks().contains(ModelLocks.HOT_TWIN)
          ? ModelLocks.HOT_TWIN : ModelLocks.HOT;
    }
    return settings.locks().get(random.nextInt(settings.locks().size()));
  }

  /** A lock after {@code lock} in name order, or null. */
  private String nextLockAfter(String lock) {
    List<String> after = settings.locks().stream().filter(l -> l.compareTo(lock) > 0).toList();
    return after.isEmpty() ? null : after.get(random.nextInt(after.size()));
  }

  private void begin(String call) {
    currentCallSince = ModelEvent.now();
    currentCall = call;
  }

  private void end() {
    currentCall = "";
  }

  private static String outcomeOf(RuntimeException e) {
    if (e instanceof LockException) {
      return "LOCK_EXCEPTION";
    }
    if (e instanceof IllegalMonitorStateException) {
      return "IMSE";
    }
    if (e instanceof IllegalStateException) {
      return "ISE";
    }
    return "OTHER:" + e.getClass().getName();
  }

  static boolean mentionsLost(String message) {
    return message != null && message.toLowerCase(Locale.ROOT).contains("lost");
  }

  private static String describe(Method method, long wait, long lease, long interruptAfter) {
    String op = switch (method) {
      case LOCK -> "lock()";
      case LOCK_LEASE -> "lock(" + lease + "ms)";
      case TRY -> "tryLock()";
      case TRY_WAIT -> "tryLock(" + wait + "ms)";
      case TRY_WAIT_LEASE -> "tryLock(" + wait + "ms," + lease + "ms)";
      case INTERRUPTIBLY -> "lockInterruptibly()";
      case INTERRUPTIBLY_LEASE -> "lockInterruptibly(" + lease + "ms)";
      case HOLD, HOLD_ASYNC -> (method == Method.HOLD ? "acquire(" : "acquireAsync(")
          + (wait < 0 ? "null" : wait + "ms") + "," + (lease < 0 ? "null" : lease + "ms") + ")";
    };
    return interruptAfter >= 0 ? op + "+interrupt@" + interruptAfter + "ms" : op;
  }

  private static String join(String a, String b) {
    return a.isEmpty() ? b : a + "," + b;
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      // only calls are interrupted, never pauses; nothing to carry over
    }
  }

  /** Interrupts the actor once after a delay, unless the call ended first. */
  private final class InterruptToken {
    private final Thread target;
    private boolean armed = true;
    private long firedAt;

    InterruptToken(Thread target, long afterMillis) {
      this.target = target;
      interrupter.schedule(this::fire, afterMillis, TimeUnit.MILLISECONDS);
    }

    private synchronized void fire() {
      if (armed) {
        firedAt = ModelEvent.now();
        armed = false;
        target.interrupt();
      }
    }

    synchronized void disarm() {
      armed = false;
    }

    synchronized long firedAt() {
      return firedAt;
    }
  }

  @Override
  public String toString() {
    return label + " holding " + Map.copyOf(holds).keySet();
  }
}
