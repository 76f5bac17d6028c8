package dev.holdfast.engine;

import dev.holdfast.engine.ModelEvent.Kind;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;
import java.util.stream.Collectors;

/**
 * Checks a finished {@link LockModelTest} history against the model and the engine contract;
 * a pure function of the events, so a history file can be judged again.
 *
 * <p>Checks (names as in the report):
 * <ol>
 *   <li>{@code exclusion}: a probe window that found a conflicting window inside (any other,
 *       unless both are read holds of a read-write lock) is a violation, unless the older of the two holds was legitimately lost: its loss was
 *       reported ({@code LockLost.detectedAt}) before the newer hold was acquired — what the
 *       contract's local deadline guarantees — or it was force-unlocked (a {@code forceUnlock} of
 *       that lock may have run between the older acquisition and the newer one; one that failed
 *       may have run up to {@value #LATE_FORCE_MICROS} µs later) and it was not then released
 *       normally (a release that succeeded only when retried after its final release got no
 *       answer does not count: the retry settles that release without saying whether the hold
 *       was still there). A RedLock's windows are under its key; the loss of any of its members
 *       excuses as a loss does (a newer RedLock hold took a member of the older's majority, which
 *       the older must have lost; which members each hold had is not known here, so this is
 *       laxer than it could be — its actor does no more work once a member's loss is
 *       reported).</li>
 *   <li>{@code holdcount}: {@code getHoldCount()} in a quiet period (no fault active during the
 *       call nor in the watchdog timeout + 1 s before it) equals the model's count (0 once a
 *       loss is known), unless a loss was reported by the end of the call, a forceUnlock may
 *       have hit the hold, or the client was closed.</li>
 *   <li>{@code loss-report}: an {@code IllegalMonitorStateException} from unlock says "lost"
 *       the first sign of a loss to the thread (that exception, a re-entry refused — except
 *       with replica acknowledgement, which refuses a re-entry no replica acknowledged — or a
 *       re-entry failing with "lost") comes after a {@code LockLost} for that hold (same client,
 *       thread and lock) detected no later than that call returned; at most one
 *       {@code LockLost} per hold and lock name (a multi-lock's members report one each; a
 *       read-write lock's loss, which does not say its side, counts for each side the thread
 *       held); every {@code LockLost} belongs to a hold the thread believed
 *       it held (detected between the start of its acquisition and its release), or to a member
 *       taken by a multi-lock acquisition of the thread that was still under way and gave no
 *       hold (members taken so far are held and renewed until it gives up). A RedLock's
 *       {@code LockLost} names a member (one each); a re-entry of a RedLock refused
 *       ({@code false}) is no sign of a loss (a round of votes may be refused while the thread
 *       holds a majority), and its {@code IllegalMonitorStateException} (a majority answered
 *       "not held") is one.</li>
 *   <li>{@code lost-calls}: once a loss was reported to the thread, or an explicit lease has
 *       run out with no watchdog section open (its upper bound plus
 *       {@value ModelActor#LEASE_TOLERANCE_MICROS} µs), unlock throws
 *       {@code IllegalMonitorStateException} saying "lost" and a re-entry throws
 *       {@code LockException} saying "lost" — except that a multi-lock's unlock may throw
 *       {@code LockException} when another member's release failed (its retry then reports
 *       the loss), and the retry of a final release sent before the lease ran out, whose answer
 *       was lost, may succeed or throw {@code LockException} (that hold ended when the release
 *       was sent: no loss is reported). A RedLock is known lost once a majority of its members'
 *       losses were reported, a forceUnlock of it ran, or its explicit lease ran out; the loss of
 *       a minority leaves it maybe held, and its calls are not judged here (tag
 *       {@value ModelActor#MEMBER_LOST}).</li>
 *   <li>{@code bounds}: every call returns within its bound (see {@link ModelSettings}); an
 *       interrupted {@code lockInterruptibly} within the quick bound of the interrupt.</li>
 *   <li>{@code outcomes}: no unexpected exception; {@code InterruptedException} only after an
 *       interrupt; {@code IllegalStateException} only once the client was closed; no
 *       {@code LockException} quoting a cluster redirection (ASK or MOVED: the key is elsewhere,
 *       Redis did not fail), unless the call said "did not run" after being refused for all of
 *       its time ({@code timeout * (attempts + 1)}: a slot split longer than that).</li>
 *   <li>{@code episodes}: every hold episode ended (released, lost, or abandoned by a close).</li>
 *   <li>{@code fencing}: every fenced hold has a token (unless its client may have known it lost
 *       as it was acquired: {@code getToken} gives none then); no two holds of a lock share one; a hold
 *       whose acquisition started after another's returned has a greater token (the
 *       {@code FencedLock} contract: greater than every token handed out before, by any client);
 *       a re-entry returns its hold's token.</li>
 *   <li>{@code keep}: after {@code unlockAfter(d)} ended a hold, no hold of that lock (after a
 *       kept read hold: no write hold) is acquired by a call that started after it returned and
 *       returned before {@code d} from its start (less 1% and {@value #TOLERANCE_MICROS} µs),
 *       unless a forceUnlock may have run.</li>
 *   <li>{@code stages}: see {@link #checkStages()}.</li>
 *   <li>{@code commit-check}: the commit guard's check of a hold ({@code HoldCheck}, local or
 *       confirming in Redis) never passes a hold whose loss was reported to the thread before
 *       the check began; never calls a hold the thread surely holds released or not held; says
 *       "lost" only with a {@code LockLost} for that hold detected by the check's end, and, in a
 *       quiet period with no forceUnlock that may have hit the hold, never of a hold the thread
 *       surely holds (see {@link ModelActor#CHECK_HELD}). A closed client's checks are not
 *       judged.</li>
 *   <li>plus the processes' own findings ({@code liveness}, {@code cleanup}, {@code worker}) and
 *       the test's {@code handoff} check ({@link #handoffs()}).</li>
 * </ol>
 */
final class ModelJudge {
  /** Clock and ordering slack when comparing a detection time with a call's return. */
  static final long TOLERANCE_MICROS = 5_000;
  /** How late a forceUnlock that failed may still run (held by a black hole, then delivered). */
  static final long LATE_FORCE_MICROS = 5_000_000;

  /** A failed check: what, when, and the events that show it. */
  record Violation(String check, long at, String summary, List<ModelEvent> evidence) {
  }

  private record Episode(String id, ModelEvent begin, ModelEvent end) {
    String client() {
      return begin.client();
    }

    long callStart() {
      return begin.start();
    }

    long acquiredAt() {
      return begin.end();
    }

    long endAt() {
      return end == null ? Long.MAX_VALUE : end.end();
    }

    String endKind() {
      return end == null ? "UNFINISHED" : end.outcome();
    }

    /** Whether {@code e} (a LockLost) may be about this hold: same client, thread and name. */
    boolean sameHolder(ModelEvent e) {
      return begin.client().equals(e.client()) && begin.threadId() == e.threadId()
          && ModelLocks.reportedNames(begin.lock()).contains(e.lock());
    }
  }

  private final ModelSettings settings;
  private final List<ModelEvent> events;
  private final Map<String, Episode> episodes = new LinkedHashMap<>();
  private final Map<String, ModelEvent> windows = new LinkedHashMap<>();
  private final Map<String, List<ModelEvent>> lostByEpisode = new HashMap<>();
  private final List<ModelEvent> unmatchedLost = new ArrayList<>();
  /** Holds with a LockLost that may be about another hold of the same thread too. */
  private final Set<String> sharedLoss = new HashSet<>();
  private final List<ModelEvent> calls = new ArrayList<>();
  /** Episodes by {@link #holderKey}. */
  private final Map<String, List<Episode>> byHolder = new HashMap<>();
  private final Map<String, List<ModelEvent>> callsByEpisode = new HashMap<>();
  private final Map<String, List<ModelEvent>> forceUnlocks = new HashMap<>();
  private final List<ModelEvent> faults = new ArrayList<>();
  /** Faults, client closes and forceUnlocks: what a report shows around a violation. */
  private final List<ModelEvent> context = new ArrayList<>();
  private final Map<String, Long> clientClosedAt = new HashMap<>();
  private final List<Violation> violations = new ArrayList<>();
  private final Map<String, Integer> excused = new TreeMap<>();
  private int overlaps;

  ModelJudge(ModelSettings settings, List<ModelEvent> events) {
    this.settings = settings;
    this.events = events.stream().sorted(Comparator.comparingLong(ModelEvent::start)).toList();
    index();
  }

  private void index() {
    Map<String, ModelEvent> begins = new LinkedHashMap<>();
    Map<String, ModelEvent> ends = new HashMap<>();
    for (ModelEvent e : events) {
      switch (e.kind()) {
        case EPISODE_BEGIN -> begins.put(e.id(), e);
        case EPISODE_END -> ends.put(e.id(), e);
        case WINDOW -> windows.put(e.id(), e);
        case CALL -> {
          calls.add(e);
          if (!e.id().isEmpty()) {
            callsByEpisode.computeIfAbsent(e.id(), k -> new ArrayList<>()).add(e);
          }
          if (e.op().equals("forceUnlock")) {
            forceUnlocks.computeIfAbsent(ModelLocks.probeName(e.lock()),
                k -> new ArrayList<>()).add(e);
            context.add(e);
          }
        }
        case FAULT -> {
          faults.add(e);
          context.add(e);
        }
        case CLIENT -> {
          context.add(e);
          if (e.op().equals("closed")) {
            clientClosedAt.merge(e.client(), e.start(), Math::min);
          }
        }
        default -> {
        }
      }
    }
    begins.forEach((id, begin) -> episodes.put(id, new Episode(id, begin, ends.get(id))));
    for (Episode ep : episodes.values()) {
      byHolder.computeIfAbsent(holderKey(ep.begin()), k -> new ArrayList<>()).add(ep);
    }
    for (ModelEvent lost : events) {
      if (lost.kind() != Kind.LOST) {
        continue;
      }
      Map<String, Episode> match = heldAt(lost);
      if (match.isEmpty()) {
        unmatchedLost.add(lost);
      }
      for (Episode ep : match.values()) {
        lostByEpisode.computeIfAbsent(ep.id(), k -> new ArrayList<>()).add(lost);
        if (match.size() > 1) {
          sharedLoss.add(ep.id());
        }
      }
    }
  }

  /**
   * The holds a report ({@code LockLost}, {@code LockAtRisk}, {@code LockRecovered}) may be
   * about, by episode key: the latest hold of each key whose thread believed it held it when
   * the report was detected; a report on a read-write lock whose thread held both sides belongs
   * to both (it does not say which side).
   */
  private Map<String, Episode> heldAt(ModelEvent report) {
    Map<String, Episode> match = new TreeMap<>();
    for (Episode ep : byHolder.getOrDefault(holderKey(report), List.of())) {
      if (ep.sameHolder(report) && ep.callStart() <= report.start()
          && report.start() <= saturatedAdd(ep.endAt(), TOLERANCE_MICROS)) {
        match.merge(ep.begin().lock(), ep, (a, b) -> a.callStart() >= b.callStart() ? a : b);
      }
    }
    return match;
  }

  /** Runs every check; the violations, in time order. */
  List<Violation> judge() {
    checkExclusion();
    checkHoldCounts();
    checkLossReports();
    checkLostCalls();
    checkBounds();
    checkOutcomes();
    checkEpisodes();
    checkFencing();
    checkKeeps();
    checkStages();
    checkCommitChecks();
    for (ModelEvent e : events) {
      if (e.kind() == Kind.NOTE && e.outcome().equals("VIOLATION")) {
        violations.add(new Violation(e.op(), e.start(), e.proc() + ": " + e.text(), List.of()));
      }
    }
    violations.sort(Comparator.comparingLong(Violation::at));
    return violations;
  }

  // ---- 1. exclusion ----

  private void checkExclusion() {
    Set<String> seenPairs = new HashSet<>();
    for (ModelEvent w : windows.values()) {
      if (w.a() <= 1) {
        continue;
      }
      for (String otherId : w.text().split(",")) {
        if (otherId.isEmpty()) {
          continue;
        }
        ModelEvent other = windows.get(otherId);
        Episode mine = episodes.get(w.tag());
        Episode theirs = other == null ? null : episodes.get(other.tag());
        if (mine == null || theirs == null) {
          overlaps++;
          violations.add(new Violation("exclusion", w.start(), "window " + w.id()
              + " found " + otherId + " inside, whose hold is unknown (history incomplete)",
              List.of(w)));
          continue;
        }
        String pair = mine.id().compareTo(theirs.id()) < 0 ? mine.id() + "|" + theirs.id()
            : theirs.id() + "|" + mine.id();
        if (!seenPairs.add(pair)) {
          continue;
        }
        overlaps++;
        Episode older = mine.acquiredAt() <= theirs.acquiredAt() ? mine : theirs;
        Episode newer = older == mine ? theirs : mine;
        String excuse = excuse(older, newer);
        if (excuse != null) {
          excused.merge(excuse, 1, Integer::sum);
          continue;
        }
        List<ModelEvent> evidence = new ArrayList<>(List.of(other, w, older.begin(),
            newer.begin()));
        evidence.addAll(lostByEpisode.getOrDefault(older.id(), List.of()));
        evidence.addAll(related(older.begin().lock(), older.callStart(), w.end()));
        violations.add(new Violation("exclusion", w.start(), "two holders of '"
            + w.lock() + "' at once: " + describe(older) + " and " + describe(newer)
            + "; the older hold's loss was not reported before the newer acquisition returned"
            + " (" + ModelEvent.time(newer.acquiredAt()) + ")", evidence));
      }
    }
  }

  /** Why an overlap of these holds is legitimate, or null. */
  private String excuse(Episode older, Episode newer) {
    for (ModelEvent lost : lostByEpisode.getOrDefault(older.id(), List.of())) {
      if (lost.start() <= newer.acquiredAt()) {
        return "loss reported before the next acquisition";
      }
    }
    if ((!older.endKind().equals("UNLOCKED") || endedInDoubt(older))
        && forceUnlockMayHaveRun(older.begin().lock(), older.callStart(), newer.acquiredAt())) {
      return "force-unlocked";
    }
    return null;
  }

  /**
   * Whether the final release of {@code ep} got no answer ({@code LockException} at count 1)
   * before an unlock succeeded: that success is the retry settling the release in doubt, which
   * does not say whether the hold was still there when the release was sent (the
   * {@code DistributedLock#unlock} contract: the hold ended when it was sent, no loss is
   * reported) — so it does not show that a forceUnlock missed the hold.
   */
  private boolean endedInDoubt(Episode ep) {
    return callsByEpisode.getOrDefault(ep.id(), List.of()).stream()
        .anyMatch(c -> isUnlock(c) && c.outcome().equals("LOCK_EXCEPTION") && c.a() == 1);
  }

  private boolean forceUnlockMayHaveRun(String lock, long from, long to) {
    for (ModelEvent call : forceUnlocks.getOrDefault(ModelLocks.probeName(lock), List.of())) {
      if (!call.outcome().equals("ISE")) {
        boolean ran = call.outcome().equals("OK") || call.outcome().equals("FALSE");
        long latest = ran ? call.end() : call.end() + LATE_FORCE_MICROS;
        if (call.start() <= to && latest >= from) {
          return true;
        }
      }
    }
    return false;
  }

  // ---- 2. hold counts ----

  private void checkHoldCounts() {
    long margin = (settings.watchdogMillis() + 1_000L) * 1_000;
    Map<String, Violation> firstByEpisode = new LinkedHashMap<>();
    Map<String, Integer> wrongCalls = new HashMap<>();
    for (ModelEvent call : calls) {
      if (!call.op().equals("getHoldCount") || !call.outcome().equals("OK")
          || call.a() == call.b() || !quiet(call.start(), call.end(), margin)) {
        continue;
      }
      Episode ep = episodes.get(call.id());
      boolean reported = lostByEpisode.getOrDefault(call.id(), List.of()).stream()
          .anyMatch(l -> l.start() <= call.end() + TOLERANCE_MICROS);
      boolean forced = ep != null
          && forceUnlockMayHaveRun(call.lock(), ep.callStart(), call.end());
      Long closed = clientClosedAt.get(call.client());
      if (reported || forced || (closed != null && closed <= call.end())) {
        continue;
      }
      wrongCalls.merge(call.id(), 1, Integer::sum);
      firstByEpisode.putIfAbsent(call.id(), new Violation("holdcount", call.start(),
          "getHoldCount() = " + call.b() + " in a quiet period, the model expects " + call.a()
          + " and no loss was reported", withEpisode(call)));
    }
    // One violation per hold: its first wrong answer, and how many there were.
    firstByEpisode.forEach((episode, v) -> {
      int n = wrongCalls.get(episode);
      violations.add(n == 1 ? v : new Violation(v.check(), v.at(), v.summary() + " ("
          + n + " such calls in this hold)", v.evidence()));
    });
  }

  // ---- 11. commit checks ----

  private void checkCommitChecks() {
    long margin = (settings.watchdogMillis() + 1_000L) * 1_000;
    for (ModelEvent call : calls) {
      if (!call.tag().equals("commitcheck") || !call.outcome().equals("OK")) {
        continue;
      }
      Long closed = clientClosedAt.get(call.client());
      if (closed != null && closed <= call.end()) {
        continue;
      }
      long expected = call.a();
      long verdict = call.b();
      String problem = null;
      if (verdict == ModelActor.CHECK_HELD && expected == ModelActor.CHECK_LOST
          && !sharedLoss.contains(call.id())) {
        // (A read-write loss that may have been the other side's, as the thread may have
        // thought: it proves nothing about this side.)
        problem = "passed a hold whose loss had been reported to the thread";
      } else if (verdict == ModelActor.CHECK_OTHER && expected == ModelActor.CHECK_HELD) {
        problem = "said the hold \"" + call.text() + "\" while the thread held it";
      } else if (verdict == ModelActor.CHECK_LOST) {
        boolean reported = lostByEpisode.getOrDefault(call.id(), List.of()).stream()
            .anyMatch(l -> l.start() <= call.end() + TOLERANCE_MICROS);
        Episode ep = episodes.get(call.id());
        if (!reported) {
          problem = "said the hold was lost, but no LockLost was reported for it";
        } else if (expected == ModelActor.CHECK_HELD && quiet(call.start(), call.end(), margin)
            && (ep == null || !forceUnlockMayHaveRun(call.lock(), ep.callStart(), call.end()))) {
          problem = "declared a loss in a quiet period that no forceUnlock explains";
        }
      }
      if (problem != null) {
        violations.add(new Violation("commit-check", call.start(), call.op() + " " + problem
            + " (" + call.text() + ")", withEpisode(call)));
      }
    }
  }

  private boolean quiet(long start, long end, long margin) {
    for (ModelEvent f : faults) {
      if (f.start() <= end && f.end() + margin >= start) {
        return false;
      }
    }
    return true;
  }

  // ---- 3. loss reports ----

  private void checkLossReports() {
    for (ModelEvent call : calls) {
      if (isUnlock(call) && call.outcome().equals("IMSE")
          && !ModelActor.mentionsLost(call.text())) {
        violations.add(new Violation("loss-report", call.start(), "unlock of a hold the thread"
            + " believed it had threw IllegalMonitorStateException without saying \"lost\"",
            withEpisode(call)));
      }
    }
    for (Episode ep : episodes.values()) {
      List<ModelEvent> lost = lostByEpisode.getOrDefault(ep.id(), List.of());
      // One LockLost per lock name (a multi-lock's members report their losses one each).
      if (lost.stream().map(ModelEvent::lock).distinct().count() < lost.size()
          && !sharedLoss.contains(ep.id())) {
        List<ModelEvent> evidence = new ArrayList<>(List.of(ep.begin()));
        evidence.addAll(lost);
        violations.add(new Violation("loss-report", lost.get(1).start(), describe(ep)
            + " was reported lost " + lost.size() + " times", evidence));
      }
      ModelEvent signal = callsByEpisode.getOrDefault(ep.id(), List.of()).stream()
          .filter(this::isLossSignal).findFirst().orElse(null);
      if (signal == null) {
        continue;
      }
      boolean before = lost.stream()
          .anyMatch(l -> l.start() <= signal.end() + TOLERANCE_MICROS);
      if (!before) {
        List<ModelEvent> evidence = new ArrayList<>(List.of(ep.begin(), signal));
        evidence.addAll(lost);
        evidence.addAll(related(ep.begin().lock(), ep.callStart(), signal.end()));
        violations.add(new Violation("loss-report", signal.start(), "the thread learnt of the"
            + " loss of " + describe(ep) + " from " + signal.op() + " (" + signal.outcome()
            + ") with no LockLost " + (lost.isEmpty() ? "at all" : "before it"), evidence));
      }
    }
    for (ModelEvent lost : unmatchedLost) {
      if (duringCompositeAcquisition(lost)) {
        excused.merge("member lost during its multi-lock's acquisition", 1, Integer::sum);
        continue;
      }
      violations.add(new Violation("loss-report", lost.start(), "LockLost for thread "
          + lost.threadId() + " of client " + ModelEvent.shortId(lost.client()) + " on '"
          + lost.lock() + "', which that thread did not believe it held then", List.of(lost)));
    }
  }

  /** A call by which the thread learns its hold is gone. */
  private boolean isLossSignal(ModelEvent call) {
    if (isUnlock(call)) {
      return call.outcome().equals("IMSE");
    }
    if (isAcquisition(call) && call.a() > 0) {
      // A RedLock's re-entry is a round of votes, refused when a vote fails and another is a
      // competitor's: refused, it says nothing about the majority the thread holds.
      return (call.outcome().equals("FALSE") && !settings.reentryMayBeRefused()
          && !ModelLocks.isRedLock(call.lock()))
          || (call.outcome().equals("LOCK_EXCEPTION")
          && ModelActor.mentionsLost(call.text()));
    }
    return false;
  }

  // ---- 4. calls on lost holds ----

  private void checkLostCalls() {
    for (ModelEvent call : calls) {
      if (!call.tag().contains("lost:") || call.outcome().equals("ISE")
          || (call.tag().contains("lost:reported") && sharedLoss.contains(call.id()))) {
        continue; // a read-write loss that may have been the other side's proves nothing here
      }
      String why = call.tag().contains("lost:reported") ? "its loss was known"
          : "its explicit lease had run out (no watchdog section open)";
      if (isUnlock(call)) {
        // An IMSE without "lost" is already a loss-report violation.
        if (!call.outcome().equals("IMSE") && !mayFailFirst(call)) {
          violations.add(new Violation("lost-calls", call.start(), "unlock when " + why
              + ": expected IllegalMonitorStateException saying \"lost\", got "
              + call.outcome(), withEpisode(call)));
        }
      } else if (isAcquisition(call) && call.a() > 0) {
        boolean refused = call.outcome().equals("LOCK_EXCEPTION")
            && ModelActor.mentionsLost(call.text());
        // A multi-lock's re-entry retries its rounds within its wait: one still retrying when
        // the run closes its client ends saying so.
        Long closed = clientClosedAt.get(call.client());
        boolean closedUnder = closed != null && closed <= call.end();
        if (!refused && !closedUnder && !call.outcome().equals("INTERRUPTED")) {
          violations.add(new Violation("lost-calls", call.start(), "re-entry when " + why
              + ": expected LockException saying \"lost\", got " + call.outcome(),
              withEpisode(call)));
        }
      }
    }
  }

  /**
   * Whether an unlock of a lost hold may throw {@code LockException} instead of reporting the
   * loss: a multi-lock's, when another member's release failed (the {@code MultiLock#unlock}
   * contract: the loss is a suppressed exception, and the thread's retry, which finishes that
   * release, reports it); or the retry of a final release sent before the lease ran out whose
   * answer was lost (the {@code DistributedLock#unlock} contract: the hold ended when it was
   * sent, no loss is reported, and a retry settles it, throwing again only while Redis does not
   * answer).
   */
  private boolean mayFailFirst(ModelEvent call) {
    if (call.lock().equals(ModelLocks.MULTI) && call.outcome().equals("LOCK_EXCEPTION")) {
      return true;
    }
    List<ModelEvent> unlocks = callsByEpisode.getOrDefault(call.id(), List.of()).stream()
        .filter(ModelJudge::isUnlock).toList();
    ModelEvent first = null;
    for (int i = unlocks.indexOf(call) - 1; i >= 0; i--) {
      ModelEvent prev = unlocks.get(i);
      if (!prev.outcome().equals("LOCK_EXCEPTION") || prev.a() != 1) {
        break;
      }
      first = prev;
    }
    return first != null && !first.tag().contains("lost:");
  }

  // ---- 5. bounds ----

  private void checkBounds() {
    for (ModelEvent call : calls) {
      if (call.c() <= 0) {
        continue;
      }
      long bound = call.c();
      long interruptAt = interruptAt(call);
      if (interruptAt > 0) {
        bound = Math.min(bound, interruptAt - call.start() + settings.quickBoundMicros());
      }
      if (call.durationMicros() > bound) {
        violations.add(new Violation("bounds", call.start(), call.op() + " returned after "
            + call.durationMicros() / 1_000 + " ms; its bound is " + bound / 1_000 + " ms",
            withEpisode(call)));
      }
    }
  }

  private static long interruptAt(ModelEvent call) {
    for (String part : call.tag().split(",")) {
      if (part.startsWith("interrupt@")) {
        return Long.parseLong(part.substring("interrupt@".length()));
      }
    }
    return 0;
  }

  // ---- 6. outcomes ----

  private void checkOutcomes() {
    for (ModelEvent call : calls) {
      String outcome = call.outcome();
      String problem = null;
      if (outcome.startsWith("OTHER")) {
        problem = "unexpected exception " + outcome.substring("OTHER:".length());
      } else if (outcome.equals("INTERRUPTED")) {
        long at = interruptAt(call);
        if (at == 0 || at > call.end()) {
          problem = "InterruptedException without an interrupt";
        }
      } else if (outcome.equals("ISE")) {
        Long closed = clientClosedAt.get(call.client());
        if (closed == null || closed > call.end()) {
          problem = "IllegalStateException although the client was not closed";
        }
      } else if (outcome.equals("IMSE") && !isUnlock(call)) {
        problem = "IllegalMonitorStateException from " + call.op();
      } else if (outcome.equals("LOCK_EXCEPTION") && isRedirect(call.text())
          && !refusedUntilTimeUp(call)) {
        // A cluster redirection says where the key is now, not that Redis failed (issue 15.6).
        problem = "a cluster redirection reported as a failure";
      }
      if (problem != null) {
        violations.add(new Violation("outcomes", call.start(), problem, withEpisode(call)));
      }
    }
  }

  // ---- 7. episodes ----

  private void checkEpisodes() {
    for (Episode ep : episodes.values()) {
      if (ep.end() == null) {
        violations.add(new Violation("episodes", ep.acquiredAt(), describe(ep)
            + " never ended (its thread neither released nor abandoned it)",
            List.of(ep.begin())));
      }
    }
  }

  // ---- 8. fencing tokens ----

  /**
   * Per fenced lock, across every client: each hold has a token, no two holds share one, a hold
   * acquired after another's acquisition returned has a greater token, and a re-entry returns
   * its hold's token.
   */
  private void checkFencing() {
    Map<String, List<Episode>> byLock = new TreeMap<>();
    for (Episode ep : episodes.values()) {
      if (ModelLocks.isFenced(ep.begin().lock())) {
        byLock.computeIfAbsent(ep.begin().lock(), k -> new ArrayList<>()).add(ep);
      }
    }
    for (List<Episode> holds : byLock.values()) {
      Map<Long, Episode> byToken = new HashMap<>();
      for (Episode ep : holds) {
        long token = ep.begin().c();
        if (token <= 0 && knownLostOnReturn(ep)) {
          excused.merge("no token: known lost as acquired", 1, Integer::sum);
          continue;
        }
        if (token <= 0) {
          violations.add(new Violation("fencing", ep.acquiredAt(), describe(ep)
              + " has no fencing token", List.of(ep.begin())));
          continue;
        }
        Episode twin = byToken.putIfAbsent(token, ep);
        if (twin != null) {
          violations.add(new Violation("fencing", ep.acquiredAt(), describe(twin) + " and "
              + describe(ep) + " carry the same fencing token " + token,
              List.of(twin.begin(), ep.begin())));
        }
      }
      // Real-time order: the greatest token of the holds acquired before each one started.
      List<Episode> byAcquired = holds.stream().filter(ep -> ep.begin().c() > 0)
          .sorted(Comparator.comparingLong(Episode::acquiredAt)).toList();
      List<Episode> byStart = holds.stream().filter(ep -> ep.begin().c() > 0)
          .sorted(Comparator.comparingLong(Episode::callStart)).toList();
      Episode greatest = null;
      int i = 0;
      for (Episode ep : byStart) {
        while (i < byAcquired.size() && byAcquired.get(i).acquiredAt() < ep.callStart()) {
          Episode before = byAcquired.get(i++);
          if (greatest == null || before.begin().c() > greatest.begin().c()) {
            greatest = before;
          }
        }
        if (greatest != null && greatest.begin().c() >= ep.begin().c()) {
          violations.add(new Violation("fencing", ep.acquiredAt(), describe(ep) + " got token "
              + ep.begin().c() + ", not greater than " + greatest.begin().c() + " of "
              + describe(greatest) + ", acquired before it started",
              List.of(greatest.begin(), ep.begin())));
        }
      }
    }
    for (ModelEvent call : calls) {
      long token = token(call);
      Episode ep = episodes.get(call.id());
      if (token != 0 && call.a() > 0 && ep != null && token != ep.begin().c()) {
        violations.add(new Violation("fencing", call.start(), "a re-entry of " + describe(ep)
            + " returned token " + token + ", the hold's is " + ep.begin().c(),
            withEpisode(call)));
      }
    }
  }

  /**
   * Whether the client may have known {@code ep} lost as its acquisition returned, when the
   * actor read its token ({@code FencedLock#getToken}: a hold known lost has none): a loss
   * reported by then, or a forceUnlock of the lock (by a thread of the same client, typically)
   * that may have run by then.
   */
  private boolean knownLostOnReturn(Episode ep) {
    long readAt = ep.acquiredAt() + TOLERANCE_MICROS;
    return lostByEpisode.getOrDefault(ep.id(), List.of()).stream()
        .anyMatch(l -> l.start() <= readAt)
        || forceUnlockMayHaveRun(ep.begin().lock(), ep.callStart(), readAt);
  }

  private static long token(ModelEvent call) {
    for (String part : call.tag().split(",")) {
      if (part.startsWith("token=")) {
        return Long.parseLong(part.substring("token=".length()));
      }
    }
    return 0;
  }

  // ---- 9. holdAtLeast ----

  /**
   * After {@code unlockAfter(d)} ended a hold (OK), nobody acquires the lock (a kept read hold:
   * nobody writes) before {@code d} from the call's start has passed (less 1% and the
   * tolerance), unless a forceUnlock may have run meanwhile.
   */
  private void checkKeeps() {
    for (ModelEvent call : calls) {
      if (!call.op().startsWith("unlockAfter") || !call.outcome().equals("OK")
          || call.a() != 1) {
        continue;
      }
      String op = call.op();
      long keep = Long.parseLong(op.substring(op.indexOf('(') + 1, op.indexOf("ms")));
      long until = call.start() + keep * 1_000 - keep * 10 - TOLERANCE_MICROS;
      String name = ModelLocks.probeName(call.lock());
      boolean keptShared = ModelLocks.isShared(call.lock());
      for (Episode ep : episodes.values()) {
        String lock = ep.begin().lock();
        if (!ModelLocks.probeName(lock).equals(name) || ep.callStart() < call.end()
            || ep.acquiredAt() >= until || (keptShared && ModelLocks.isShared(lock))
            || forceUnlockMayHaveRun(name, call.start(), ep.acquiredAt())) {
          continue;
        }
        violations.add(new Violation("keep", ep.acquiredAt(), describe(ep) + " acquired '"
            + lock + "' " + (ep.acquiredAt() - call.start()) / 1_000 + " ms after " + op
            + " began, which keeps it held " + keep + " ms", List.of(call, ep.begin())));
      }
    }
  }

  /** Local handoffs (TRANSFER) run by every client, as counted when each was closed. */
  long handoffs() {
    return events.stream().filter(e -> e.kind() == Kind.CLIENT && e.op().equals("closed"))
        .mapToLong(ModelEvent::a).sum();
  }

  // ---- 10. stages ----

  /**
   * The two stages of a loss, per client in the order its listeners heard the reports
   * ({@code a}): at most one open at-risk episode per hold (two for a read-write lock's name,
   * whose reports do not say the side), a {@code LockRecovered} only while an episode of that
   * hold is open, and never after that hold's {@code LockLost} (a loss ends the episode); every
   * {@code LockAtRisk} is about a hold the thread believed it held, with a watchdog section
   * (a fixed lease is never at risk), and never after that hold's {@code LockLost}.
   */
  private void checkStages() {
    Map<String, List<ModelEvent>> byClient = new HashMap<>();
    for (ModelEvent e : events) {
      if (e.kind() == Kind.AT_RISK || e.kind() == Kind.RECOVERED || e.kind() == Kind.LOST) {
        byClient.computeIfAbsent(e.client(), k -> new ArrayList<>()).add(e);
      }
    }
    for (List<ModelEvent> reports : byClient.values()) {
      reports.sort(Comparator.comparingLong(ModelEvent::a));
      Map<String, List<ModelEvent>> open = new HashMap<>();
      Map<String, ModelEvent> previous = new HashMap<>();
      for (ModelEvent r : reports) {
        String hold = r.threadId() + "|" + r.lock();
        List<ModelEvent> risks = open.computeIfAbsent(hold, k -> new ArrayList<>());
        // A hold released during its episode ends the episode silently.
        risks.removeIf(risk -> releasedBefore(risk, r.start()));
        int episodes = risks.size();
        ModelEvent before = previous.put(hold, r);
        List<ModelEvent> evidence = before == null ? List.of(r) : List.of(before, r);
        switch (r.kind()) {
          case AT_RISK -> {
            int sides = r.lock().equals(readWriteName(r.lock())) ? 2 : 1;
            if (episodes >= sides) {
              stageViolation(r, "a LockAtRisk while an at-risk episode of that hold is open",
                  evidence);
            } else {
              risks.add(r);
            }
            checkAtRiskHold(r);
          }
          case RECOVERED -> {
            if (episodes == 0) {
              stageViolation(r, "a LockRecovered without an open at-risk episode of that hold"
                  + (before != null && before.kind() == Kind.LOST ? " (after its LockLost)"
                  : ""), evidence);
            } else {
              risks.remove(0);
              checkNotAfterLoss(r);
            }
          }
          default -> { // a loss ends its episode
            if (!risks.isEmpty()) {
              risks.remove(0);
            }
          }
        }
      }
    }
  }

  /**
   * Whether every hold {@code risk} was about had ended before {@code at}: released (or ended
   * otherwise) since, so its episode closed without a report.
   */
  private boolean releasedBefore(ModelEvent risk, long at) {
    Map<String, Episode> held = heldAt(risk);
    if (held.isEmpty()) {
      return false;
    }
    for (Episode ep : held.values()) {
      if (ep.endAt() >= at) {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether {@code report} (about a member lock) was detected while its thread was acquiring a
   * multi-lock with that member, by a call that did not give it a hold: the members taken so far
   * are held and renewed like any hold, so they may be at risk or lost before the call gives up.
   */
  private boolean duringCompositeAcquisition(ModelEvent report) {
    if (report.kind() == Kind.LOST && report.text().contains("found")) {
      return false; // a hold found gone was never excused: a renewal racing a give-back
    }
    for (ModelEvent call : calls) {
      // Only an acquisition that Redis trouble made fail (an error, or a fault injected
      // meanwhile): a refusal alone leaves its members no time to be at risk or lost.
      if (isAcquisition(call) && call.b() == call.a() && call.client().equals(report.client())
          && (call.outcome().equals("LOCK_EXCEPTION")
              || !quiet(call.start(), call.end(), TOLERANCE_MICROS))
          && call.threadId() == report.threadId()
          && !ModelLocks.probeName(call.lock()).equals(report.lock())
          && ModelLocks.reportedNames(call.lock()).contains(report.lock())
          && call.start() <= report.start() && report.start() <= call.end() + TOLERANCE_MICROS) {
        return true;
      }
    }
    return false;
  }

  /** The read-write lock name among the model's keys that reports use, or null. */
  private static String readWriteName(String reported) {
    for (String key : ModelLocks.KEYS) {
      if (ModelLocks.isReadWrite(key) && ModelLocks.probeName(key).equals(reported)) {
        return reported;
      }
    }
    return null;
  }

  private void checkAtRiskHold(ModelEvent risk) {
    Map<String, Episode> held = heldAt(risk);
    if (held.isEmpty() && duringCompositeAcquisition(risk)) {
      return; // a member taken by a multi-lock acquisition still under way (or failing)
    }
    if (held.isEmpty()) {
      stageViolation(risk, "a LockAtRisk for a hold the thread did not believe it held",
          List.of(risk));
      return;
    }
    boolean watchdog = held.values().stream().anyMatch(ep -> callsByEpisode
        .getOrDefault(ep.id(), List.of()).stream().anyMatch(c -> isAcquisition(c)
            && c.b() > c.a() && c.start() <= risk.start() && watchdogLease(c.op())));
    if (!watchdog) {
      List<ModelEvent> evidence = new ArrayList<>(List.of(risk));
      held.values().forEach(ep -> evidence.add(ep.begin()));
      stageViolation(risk, "a LockAtRisk for a hold with fixed leases only", evidence);
    }
    checkNotAfterLoss(risk);
  }

  /**
   * A LockAtRisk or LockRecovered must not follow a LockLost of its (unambiguous) hold: of the
   * same name — a multi-lock's members are holds of their own, and one at risk after the loss
   * of another is still held.
   */
  private void checkNotAfterLoss(ModelEvent report) {
    for (Episode ep : heldAt(report).values()) {
      if (ModelLocks.isReadWrite(ep.begin().lock())) {
        continue; // the loss of one side reads as the loss of both
      }
      for (ModelEvent lost : lostByEpisode.getOrDefault(ep.id(), List.of())) {
        if (lost.client().equals(report.client()) && lost.a() < report.a()
            && lost.lock().equals(report.lock())) {
          stageViolation(report, "a " + report.op() + " after the LockLost of its hold",
              List.of(ep.begin(), lost, report));
        }
      }
    }
  }

  /** Whether an acquisition's op (as {@code ModelActor} describes it) asked for no lease. */
  static boolean watchdogLease(String op) {
    String call = op.replaceFirst("\\+interrupt@.*$", "");
    return call.equals("lock()") || call.equals("tryLock()") || call.equals("lockInterruptibly()")
        || call.matches("tryLock\\(\\d+ms\\)") || call.endsWith(",null)");
  }

  private void stageViolation(ModelEvent report, String summary, List<ModelEvent> evidence) {
    violations.add(new Violation("stages", report.start(), summary + ": lock '"
        + report.lock() + "', " + (report.threadId() < 0 ? "LockHold " : "thread ")
        + report.threadId() + ", client " + ModelEvent.shortId(report.client()), evidence));
  }

  // ---- figures ----

  /** Figures for the summary table, in display order. */
  Map<String, String> figures(long runMicros, Map<String, Integer> injected,
      long connections) {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("seed", Long.toString(settings.seed()));
    f.put("faulted run", String.format(Locale.ROOT, "%.1f s", runMicros / 1e6));
    f.put("settings", settings.toString());
    f.put("operations", Integer.toString(calls.size()));
    f.put("outcomes", count(calls, ModelEvent::outcome));
    f.put("operations by kind", count(calls, c -> family(c.op())));
    f.put("acquisitions (new holds)", Integer.toString(episodes.size()));
    f.put("multi-lock members taken alone before an unlock", Long.toString(
        episodes.values().stream()
            .filter(e -> e.begin().lock().equals(ModelLocks.RETAKEN_MEMBER)).count()));
    f.put("re-acquisitions finishing a failed unlock (multi-lock / RedLock)",
        calls.stream().filter(c -> c.tag().contains(ModelActor.FINISHES_FAILED_UNLOCK)
            && c.lock().equals(ModelLocks.MULTI)).count() + " / " + calls.stream()
            .filter(c -> c.tag().contains(ModelActor.FINISHES_FAILED_UNLOCK)
                && ModelLocks.isRedLock(c.lock())).count());
    f.put("RedLock acquisitions (new holds / re-entries / refused / failed) / unlocks failed"
        + " (LockException) / their retries (OK) / members taken alone before an unlock"
        + " / acquisitions returning with fewer than all members held",
        redLockFigures());
    f.put("forceUnlock calls by outcome (OK deleted, FALSE nothing; the others threw: "
        + "sealed in the background)", count(calls.stream()
        .filter(c -> c.op().equals("forceUnlock")).toList(), ModelEvent::outcome));
    f.put("re-entries", Long.toString(calls.stream()
        .filter(c -> isAcquisition(c) && c.a() > 0 && c.outcome().equals("OK")).count()));
    f.put("holds ended", count(episodes.values().stream().filter(e -> e.end() != null)
        .map(Episode::end).toList(), ModelEvent::outcome));
    f.put("losses reported (LockLost)", Long.toString(events.stream()
        .filter(e -> e.kind() == Kind.LOST).count()));
    f.put("at risk / recovered (LockAtRisk / LockRecovered)", events.stream()
        .filter(e -> e.kind() == Kind.AT_RISK).count() + " / " + events.stream()
        .filter(e -> e.kind() == Kind.RECOVERED).count());
    f.put("probe windows", Integer.toString(windows.size()));
    f.put("overlaps seen / excused", overlaps + " / " + excused.values().stream()
        .mapToInt(Integer::intValue).sum() + (excused.isEmpty() ? "" : " " + excused));
    f.put("faults injected", injected.isEmpty() ? "0" : injected.entrySet().stream()
        .map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(" ")));
    f.put("connections through the proxies", Long.toString(connections));
    f.put("client recreations", Long.toString(events.stream()
        .filter(e -> e.kind() == Kind.CLIENT && e.op().equals("closed")).count()));
    f.put("max wait (ms)", maxima(calls.stream().filter(ModelJudge::isAcquisition).toList()));
    f.put("max unlock (ms)", maxima(calls.stream()
        .filter(c -> isUnlock(c)).toList()));
    f.put("LockExceptions quoting ASK/MOVED / TRYAGAIN", calls.stream()
        .filter(c -> c.outcome().equals("LOCK_EXCEPTION") && isRedirect(c.text())).count()
        + " / " + calls.stream().filter(c -> c.outcome().equals("LOCK_EXCEPTION")
            && c.text().contains("TRYAGAIN")).count());
    f.put("local handoffs (TRANSFER)", Long.toString(handoffs()));
    f.put("kept releases (unlockAfter OK)", Long.toString(calls.stream()
        .filter(c -> c.op().startsWith("unlockAfter") && c.outcome().equals("OK")).count()));
    f.put("commit checks by verdict (0 held, 1 lost, 2 unconfirmed, 3 other)", count(calls.stream()
        .filter(c -> c.tag().equals("commitcheck")).toList(), c -> c.op() + ":" + c.b()));
    f.put("fenced holds", Long.toString(episodes.values().stream()
        .filter(ep -> ep.begin().c() > 0).count()));
    f.put("holds by lock", count(new ArrayList<>(episodes.values()), ep -> ep.begin().lock()));
    f.put("violations", Integer.toString(violations.size()));
    return f;
  }

  /**
   * How much the RedLock paths ran: its new holds, re-entries, acquisitions refused and failed
   * (an exception), its unlocks that threw {@code LockException}, the unlocks that retried one
   * (with how many succeeded), the holds of its member taken alone before such a retry, and the
   * acquisitions that returned holding only a majority of members (a vote lost to a competitor's
   * round, or failed).
   */
  private String redLockFigures() {
    List<ModelEvent> red = calls.stream().filter(c -> ModelLocks.isRedLock(c.lock())).toList();
    long reentries = red.stream().filter(c -> isAcquisition(c) && c.a() > 0
        && c.outcome().equals("OK")).count();
    long refused = red.stream().filter(c -> isAcquisition(c) && c.outcome().equals("FALSE"))
        .count();
    long failed = red.stream().filter(c -> isAcquisition(c)
        && c.outcome().equals("LOCK_EXCEPTION")).count();
    long failedUnlocks = red.stream().filter(c -> isUnlock(c)
        && c.outcome().equals("LOCK_EXCEPTION")).count();
    long retries = 0;
    long retriesOk = 0;
    Map<String, ModelEvent> lastUnlock = new HashMap<>();
    for (ModelEvent c : red) {
      if (!isUnlock(c) || c.id().isEmpty()) {
        continue;
      }
      ModelEvent previous = lastUnlock.put(c.id(), c);
      if (previous != null && previous.outcome().equals("LOCK_EXCEPTION")) {
        retries++;
        retriesOk += c.outcome().equals("OK") ? 1 : 0;
      }
    }
    long holds = episodes.values().stream()
        .filter(ep -> ModelLocks.isRedLock(ep.begin().lock())).count();
    long retaken = episodes.values().stream()
        .filter(ep -> ep.begin().lock().equals(ModelLocks.RED_RETAKEN_MEMBER)).count();
    long partial = red.stream().filter(c -> isAcquisition(c) && c.outcome().equals("OK")
        && c.tag().contains(ModelActor.RED_MEMBERS_TAG) && !c.tag().contains(
            ModelActor.RED_MEMBERS_TAG + String.join("+", ModelLocks.RED_MEMBERS))).count();
    return holds + " / " + reentries + " / " + refused + " / " + failed + " / " + failedUnlocks
        + " / " + retries + " (" + retriesOk + ") / " + retaken + " / " + partial;
  }

  private static String maxima(List<ModelEvent> calls) {
    Map<String, Long> max = new TreeMap<>();
    for (ModelEvent c : calls) {
      max.merge(family(c.op()), c.durationMicros() / 1_000, Math::max);
    }
    return max.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
        .collect(Collectors.joining(" "));
  }

  private static <T> String count(List<T> items, java.util.function.Function<T, String> key) {
    Map<String, Integer> counts = new TreeMap<>();
    items.forEach(i -> counts.merge(key.apply(i), 1, Integer::sum));
    return counts.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
        .collect(Collectors.joining(" "));
  }

  /** The call without its argument values: {@code tryLock(300ms,1500ms)} is tryLock(w,l). */
  static String family(String op) {
    String base = op.contains("+interrupt") ? op.substring(0, op.indexOf("+interrupt")) : op;
    String suffix = op.contains("+interrupt") ? "+interrupt" : "";
    if (!base.contains("(") || base.endsWith("()")) {
      return base + suffix;
    }
    String name = base.substring(0, base.indexOf('('));
    String args = switch (name) {
      case "tryLock" -> base.contains(",") ? "(w,l)" : "(w)";
      case "acquire", "acquireAsync" -> "(w,l)";
      default -> "(l)";
    };
    return name + args + suffix;
  }

  private static boolean isAcquisition(ModelEvent call) {
    String op = call.op();
    return op.startsWith("lock") || op.startsWith("tryLock") || op.startsWith("acquire");
  }

  // ---- report helpers ----

  private List<ModelEvent> withEpisode(ModelEvent call) {
    List<ModelEvent> evidence = new ArrayList<>();
    Episode ep = episodes.get(call.id());
    if (ep != null) {
      evidence.add(ep.begin());
      evidence.addAll(lostByEpisode.getOrDefault(ep.id(), List.of()));
    }
    evidence.add(call);
    evidence.addAll(related(call.lock(), ep == null ? call.start() : ep.callStart(),
        call.end()));
    return evidence;
  }

  /** Faults and forceUnlocks of {@code lock} between {@code from} and {@code to}. */
  private List<ModelEvent> related(String lock, long from, long to) {
    Predicate<ModelEvent> inRange = e -> e.start() <= to && e.end() >= from;
    List<ModelEvent> related = new ArrayList<>();
    for (ModelEvent e : context) {
      if (inRange.test(e) && (e.kind() != Kind.CALL || e.lock().equals(lock))) {
        related.add(e);
      }
    }
    return related;
  }

  private static String describe(Episode ep) {
    return "hold " + ep.id() + " (" + ep.begin().actor() + ", client "
        + ModelEvent.shortId(ep.client()) + ", thread " + ep.begin().threadId() + ", acquired "
        + ModelEvent.time(ep.acquiredAt()) + ", " + ep.endKind().toLowerCase(Locale.ROOT)
        + (ep.end() == null ? "" : " " + ModelEvent.time(ep.endAt())) + ")";
  }

  /** Client and thread: a LockLost's name is matched by {@link Episode#sameHolder}. */
  private static String holderKey(ModelEvent e) {
    return e.client() + "|" + e.threadId();
  }

  /** An exception message quoting a cluster redirection ({@code -ASK} or {@code -MOVED}). */
  /**
   * Whether {@code call} gave up only because every re-send was refused until its time was up
   * ({@code timeout * (attempts + 1)}, the {@code RedisTopology#call} rule): a slot left split
   * longer than that refuses a script whose keys are partly there ({@code TRYAGAIN}), and the
   * last refusal may be a {@code MOVED} sent as the migration ends. That is "not run", as
   * documented, not a redirection left unfollowed.
   */
  private boolean refusedUntilTimeUp(ModelEvent call) {
    long budget = settings.timeoutMillis() * 1_000L * (RedisTopology.ATTEMPTS + 1);
    return call.text().contains("did not run") && call.durationMicros() >= budget;
  }

  static boolean isRedirect(String text) {
    return text.contains("ASK ") || text.contains("MOVED ");
  }

  static boolean isUnlock(ModelEvent call) {
    return call.op().equals("unlock") || call.op().startsWith("unlockAfter");
  }

  private static long saturatedAdd(long a, long b) {
    return a > Long.MAX_VALUE - b ? Long.MAX_VALUE : a + b;
  }
}
