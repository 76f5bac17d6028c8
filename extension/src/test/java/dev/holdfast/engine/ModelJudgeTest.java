package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.holdfast.engine.ModelEvent.Kind;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The model's checks on small hand-written histories: what they flag and what they excuse. */
class ModelJudgeTest {
  private static final ModelSettings SETTINGS =
      new ModelSettings(1, 400, 2_000, List.of("m0"), 1, 0);
  private static final long T = 1_000_000_000_000L;

  private final List<ModelEvent> events = new ArrayList<>();

  @Test
  void overlap_withoutReportedLoss_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "UNLOCKED");
    episode("b", "B", 2, T + 2_000_000, T + 2_000_100, T + 2_500_000, "UNLOCKED");
    window("a.w1", "a", "A", T + 2_100_000, 2, "b.w1");
    window("b.w1", "b", "B", T + 2_090_000, 1, "");

    assertEquals(List.of("exclusion"), checks());
  }

  @Test
  void overlap_afterLossReportedBeforeTheNextAcquisition_isExcused() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    lost("A", 1, T + 1_900_000);
    episode("b", "B", 2, T + 2_000_000, T + 2_000_100, T + 2_500_000, "UNLOCKED");
    window("a.w1", "a", "A", T + 2_100_000, 2, "b.w1");
    window("b.w1", "b", "B", T + 2_090_000, 1, "");
    call("A", 1, "a", "unlock", "IMSE", T + 3_000_000, 1, 0, "", "Lock 'm0' was lost: expired");

    assertEquals(List.of(), checks());
  }

  @Test
  void overlap_reportedOnlyAfterTheNextAcquisition_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    lost("A", 1, T + 2_200_000);
    episode("b", "B", 2, T + 2_000_000, T + 2_000_100, T + 2_500_000, "UNLOCKED");
    window("a.w1", "a", "A", T + 2_100_000, 2, "b.w1");
    window("b.w1", "b", "B", T + 2_090_000, 1, "");

    assertEquals(List.of("exclusion"), checks());
  }

  @Test
  void overlap_afterForceUnlock_isExcusedUnlessTheOldHolderUnlockedNormally() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    call("C", 3, "", "forceUnlock", "OK", T + 1_000_000, 0, 0, "", "");
    episode("b", "B", 2, T + 2_000_000, T + 2_000_100, T + 2_500_000, "UNLOCKED");
    window("a.w1", "a", "A", T + 2_100_000, 2, "b.w1");
    window("b.w1", "b", "B", T + 2_090_000, 1, "");
    lost("A", 1, T + 2_200_000); // reported late: the holder learns it from its watchdog

    assertEquals(List.of(), checks());
  }

  /**
   * Soak standalone -4693406884787565169 {@code [exclusion]} on {@code mm}: a forceUnlock ran
   * while the older holder was inside; its final release then got no answer (LockException),
   * and the retry succeeded, as the unlock contract says a retry of a release in doubt does
   * ({@code ReleaseInDoubtTest#forceUnlockedHold_finalReleaseInDoubt_retrySucceedsWithoutLoss}).
   * That OK says nothing about whether the forceUnlock hit the hold: the overlap is excused.
   * A first unlock that succeeded still shows the forceUnlock missed it.
   */
  @Test
  void overlap_afterForceUnlock_isExcusedWhenTheOldHoldersReleaseWasInDoubt() {
    multiEpisode("a", T, T + 5_000_000, "UNLOCKED");
    events.add(new ModelEvent(Kind.CALL, "p0", "C", "C", 3, ModelLocks.MULTI, "", "forceUnlock",
        "OK", T + 1_000_000, T + 1_001_000, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "B", "B", 2, ModelLocks.MULTI, "b",
        "lock()", "", T + 900_000, T + 1_002_000, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "B", "B", 2, ModelLocks.MULTI, "b", "",
        "UNLOCKED", T + 1_500_000, T + 1_500_000, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.WINDOW, "p0", "A", "A", 0, ModelLocks.MULTI, "a.w1",
        "window", "", T + 990_000, T + 1_010_000, 2, 0, 0, "a", "b.w1"));
    events.add(new ModelEvent(Kind.WINDOW, "p0", "B", "B", 0, ModelLocks.MULTI, "b.w1",
        "window", "", T + 1_003_000, T + 1_020_000, 1, 0, 0, "b", ""));
    multiUnlock("LOCK_EXCEPTION", T + 2_000_000, "unlock() of multi-lock multi[n0, n1] failed "
        + "for [n1, n0] (0 of 2 released): unlock() of lock 'n1' got no answer", "");
    multiUnlock("OK", T + 4_000_000, "", "");
    assertEquals(List.of(), checks());

    events.removeIf(e -> e.kind() == Kind.CALL && e.outcome().equals("LOCK_EXCEPTION"));
    assertEquals(List.of("exclusion"), checks(), "released normally: the forceUnlock missed it");
  }

  @Test
  void imseWithoutLost_andNoLockLost_areViolations() {
    episode("a", "A", 1, T, T + 10, T + 3_000_000, "LOST");
    call("A", 1, "a", "unlock", "IMSE", T + 3_000_000, 1, 0, "", "not held");

    assertEquals(List.of("loss-report", "loss-report"), checks());
  }

  @Test
  void lockLost_forAHoldNeverBelievedHeld_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 1_000_000, "UNLOCKED");
    lost("A", 1, T + 1_500_000);

    assertEquals(List.of("loss-report"), checks());
  }

  @Test
  void unlockAfterTheLeaseRanOut_mustSayLost() {
    episode("a", "A", 1, T, T + 10, T + 3_000_000, "UNLOCKED");
    call("A", 1, "a", "unlock", "OK", T + 3_000_000, 1, 0, "lost:lease", "");

    assertEquals(List.of("lost-calls"), checks());
  }

  @Test
  void retriedFinalRelease_sentBeforeTheLeaseRanOut_mayFailOrSucceedAfterIt() {
    // The final release got no answer before the lease ran out: the hold ended when it was
    // sent, and its retries settle it (DistributedLock#unlock), lost or not.
    episode("a", "A", 1, T, T + 10, T + 3_200_000, "UNLOCKED");
    call("A", 1, "a", "unlock", "LOCK_EXCEPTION", T + 1_000_000, 1, 1, "", "no answer");
    call("A", 1, "a", "unlock", "LOCK_EXCEPTION", T + 3_000_000, 1, 1, "lost:lease", "refused");
    call("A", 1, "a", "unlock", "OK", T + 3_100_000, 1, 0, "lost:lease", "");

    assertEquals(List.of(), checks());
  }

  @Test
  void finalReleaseFirstSentAfterTheLeaseRanOut_mustSayLost() {
    episode("a", "A", 1, T, T + 10, T + 3_200_000, "UNLOCKED");
    call("A", 1, "a", "unlock", "LOCK_EXCEPTION", T + 3_000_000, 1, 1, "lost:lease", "refused");
    call("A", 1, "a", "unlock", "OK", T + 3_100_000, 1, 0, "lost:lease", "");

    assertEquals(List.of("lost-calls", "lost-calls"), checks());
  }

  @Test
  void multiLockUnlock_withAMemberLost_mayFailWhileAnotherFails_butItsRetryMustSayLost() {
    multiEpisode("a", T, T + 3_000_000);
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n0", "", "LockLost", "",
        T + 1_000_000, T + 1_000_100, 0, 0, 0, "", "expired"));
    multiUnlock("LOCK_EXCEPTION", T + 2_000_000, "failed for [n1, n0]: LOADING");
    multiUnlock("OK", T + 2_100_000, "");

    assertEquals(List.of("lost-calls"), checks()); // the retry, not the first failure

    events.removeIf(e -> e.op().equals("unlock") && e.outcome().equals("OK"));
    multiUnlock("IMSE", T + 2_100_000, "failed for [n0]: Lock 'n0' was lost: expired");
    assertEquals(List.of(), checks());
  }

  @Test
  void multiLockUnlock_memberLostDuringAFailedInnerUnlock_itsRetryMustSayLost() {
    // The soak report's history: the first inner unlock released n1, whose outer section had no
    // lease left (LockLost "released at the inner unlock()"), and failed for n0; the loss was
    // known before the retry, and it is the multi-lock hold's loss (its outer section is open).
    multiEpisode("a", T, T + 3_000_000);
    innerMultiUnlock("LOCK_EXCEPTION", T + 1_000_000, "failed for [n0]: no answer", "");
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n1", "", "LockLost", "",
        T + 1_000_300, T + 1_000_400, 0, 0, 0, "", "its lease of 1510ms ran out while an inner "
        + "section held it; the lock was released at the inner unlock()"));
    innerMultiUnlock("OK", T + 2_000_000, "", "lost:reported");

    assertEquals(List.of("lost-calls"), checks());

    events.removeIf(e -> e.op().equals("unlock") && e.outcome().equals("OK"));
    innerMultiUnlock("IMSE", T + 2_000_000, "failed for [n1]: Lock 'n1' was lost: its lease of "
        + "1510ms ran out while an inner section held it", "lost:reported");
    assertEquals(List.of(), checks());
  }

  @Test
  void stages_atRiskThenRecoveredOrLost_areFine() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);
    report(Kind.RECOVERED, "A", 1, T + 1_500_000, 2);
    report(Kind.AT_RISK, "A", 1, T + 2_000_000, 3);
    report(Kind.LOST, "A", 1, T + 3_000_000, 4);

    assertEquals(List.of(), checks());
  }

  @Test
  void stages_secondAtRiskWhileOneIsOpen_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "UNLOCKED");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);
    report(Kind.AT_RISK, "A", 1, T + 2_000_000, 2);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_recoveredWithoutAtRisk_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "UNLOCKED");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.RECOVERED, "A", 1, T + 1_000_000, 1);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_recoveredAfterTheLossOfItsHold_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);
    report(Kind.LOST, "A", 1, T + 1_400_000, 2);
    report(Kind.RECOVERED, "A", 1, T + 1_500_000, 3);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_atRiskAfterTheLossOfItsHold_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "LOST");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.LOST, "A", 1, T + 1_000_000, 1);
    report(Kind.AT_RISK, "A", 1, T + 1_500_000, 2);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_multiLockMemberAtRiskAfterTheLossOfAnother_isNoViolation() {
    // Soaks cluster 2756222059523827998 and standalone -8139000721651078791 [stages]: n1 lost
    // in a re-entry of the multi-lock, then n0, still held, at risk.
    multiEpisode("a", T, T + 5_000_000);
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "a", "lock()",
        "OK", T, T + 10, 0, 1, 0, "", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n1", "", "LockLost", "",
        T + 1_000_000, T + 1_000_100, 1, 0, 0, "", "expired"));
    events.add(new ModelEvent(Kind.AT_RISK, "p0", "A", "", 1, "n0", "", "LockAtRisk", "",
        T + 1_500_000, T + 1_500_100, 2, 0, 0, "n0", ""));

    assertEquals(List.of(), checks());
  }

  @Test
  void stages_multiLockMemberAtRiskAfterItsOwnLoss_isAViolation() {
    multiEpisode("a", T, T + 5_000_000);
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "a", "lock()",
        "OK", T, T + 10, 0, 1, 0, "", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n1", "", "LockLost", "",
        T + 1_000_000, T + 1_000_100, 1, 0, 0, "", "expired"));
    events.add(new ModelEvent(Kind.AT_RISK, "p0", "A", "", 1, "n1", "", "LockAtRisk", "",
        T + 1_500_000, T + 1_500_100, 2, 0, 0, "n1", ""));

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_atRiskOfAFixedLeaseHold_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 5_000_000, "UNLOCKED");
    call("A", 1, "a", "lock(1500ms)", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);

    assertEquals(List.of("stages"), checks());

    call("A", 1, "a", "tryLock(200ms)+interrupt@20ms", "OK", T + 500_000, 1, 2, "", "");
    assertEquals(List.of(), checks(), "a watchdog re-entry came before it");
  }

  @Test
  void stages_atRiskOfNoHoldOfTheThread_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 500_000, "UNLOCKED");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_memberAtRiskAndLostDuringAFailedMultiLockAcquisition_areExcused() {
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "", "tryLock(614ms)",
        "LOCK_EXCEPTION", T, T + 2_500_000, 0, 0, 0, "", "Redis did not answer"));
    events.add(new ModelEvent(Kind.AT_RISK, "p0", "A", "", 1, "n0", "", "LockAtRisk", "",
        T + 1_000_000, T + 1_000_100, 1, 0, 0, "n0", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n0", "", "LockLost", "",
        T + 2_000_000, T + 2_000_100, 2, 0, 0, "", "expired"));

    assertEquals(List.of(), checks());
  }

  @Test
  void stages_atRiskAgainAfterTheHoldWasReleasedAndTakenAnew_isNoViolation() {
    // The first hold is released during its episode (ended silently); the next hold of the same
    // thread and lock has an episode of its own (soak standalone -8686046552352949351 [stages]).
    episode("a", "A", 1, T, T + 10, T + 2_000_000, "UNLOCKED");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);
    episode("b", "A", 1, T + 3_000_000, T + 3_000_010, T + 9_000_000, "UNLOCKED");
    call("A", 1, "b", "lock()", "OK", T + 3_000_000, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 4_000_000, 2);

    assertEquals(List.of(), checks());
  }

  @Test
  void stages_twoAtRiskReportsInOneHold_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 9_000_000, "UNLOCKED");
    call("A", 1, "a", "lock()", "OK", T, 0, 1, "", "");
    report(Kind.AT_RISK, "A", 1, T + 1_000_000, 1);
    report(Kind.AT_RISK, "A", 1, T + 4_000_000, 2);

    assertEquals(List.of("stages"), checks());
  }

  @Test
  void stages_memberFoundGoneDuringARefusedMultiLockTryLock_isAViolation() {
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "", "tryLock(0ms)",
        "FALSE", T, T + 2_500_000, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n0", "", "LockLost", "",
        T + 2_000_000, T + 2_000_100, 1, 0, 0, "", "the lease renewal found the lock no longer "
        + "held by this thread"));

    assertEquals(List.of("loss-report"), checks());
  }

  @Test
  void stages_memberFoundGoneDuringAFailedMultiLockAcquisition_isAViolation() {
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "", "tryLock(614ms)",
        "LOCK_EXCEPTION", T, T + 2_500_000, 0, 0, 0, "", "Redis did not answer"));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "n0", "", "LockLost", "",
        T + 2_000_000, T + 2_000_100, 1, 0, 0, "", "the lease renewal found the lock no longer "
        + "held by this thread"));

    assertEquals(List.of("loss-report"), checks());
  }

  /** A report of client {@code client}'s listeners on m0, the {@code seq}-th they heard. */
  private void report(Kind kind, String client, long thread, long detected, long seq) {
    events.add(new ModelEvent(kind, "p0", client, "", thread, "m0", "", switch (kind) {
      case AT_RISK -> "LockAtRisk";
      case RECOVERED -> "LockRecovered";
      default -> "LockLost";
    }, "", detected, detected + 100, seq, 0, 0, "m0", ""));
  }

  /** An unlock of the multi-lock's inner section (count 2). */
  private void innerMultiUnlock(String outcome, long start, String text, String tag) {
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "a", "unlock",
        outcome, start, start + 1_000, 2, outcome.equals("LOCK_EXCEPTION") ? 2 : 1, 0,
        tag, text));
  }

  private void multiEpisode(String id, long start, long end) {
    multiEpisode(id, start, end, "LOST");
  }

  private void multiEpisode(String id, long start, long end, String how) {
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, ModelLocks.MULTI, id,
        "lock()", "", start, start + 10, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "A", "A", 1, ModelLocks.MULTI, id, "",
        how, end, end, 0, 0, 0, "", ""));
  }

  private void multiUnlock(String outcome, long start, String text) {
    multiUnlock(outcome, start, text, "lost:reported");
  }

  private void multiUnlock(String outcome, long start, String text, String tag) {
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, ModelLocks.MULTI, "a", "unlock",
        outcome, start, start + 1_000, 1, outcome.equals("LOCK_EXCEPTION") ? 1 : 0, 0,
        tag, text));
  }

  @Test
  void redirectionQuoted_isAViolationUnlessTheCallWasRefusedForAllOfItsTime() {
    long budget = SETTINGS.timeoutMillis() * 1_000L * (RedisTopology.ATTEMPTS + 1);
    String moved = "Redis did not run the acquire script on key m0: MOVED 7798 127.0.0.1:7001";
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, "m0", "", "tryLock()",
        "LOCK_EXCEPTION", T, T + 1_000, 0, 0, 0, "", moved)); // gave up at once: not followed
    events.add(new ModelEvent(Kind.CALL, "p0", "B", "B", 2, "m0", "", "tryLock()",
        "LOCK_EXCEPTION", T, T + budget + 5_000, 0, 0, 0, "", moved)); // refused throughout

    assertEquals(List.of("outcomes"), checks());
  }

  @Test
  void holdCountMismatch_countsOnlyWhenQuiet() {
    episode("a", "A", 1, T, T + 10, T + 9_000_000, "UNLOCKED");
    fault(T + 1_000_000, T + 2_000_000);
    call("A", 1, "a", "getHoldCount", "OK", T + 2_500_000, 2, 0, "holdcount", "");
    call("A", 1, "a", "getHoldCount", "OK", T + 6_000_000, 2, 1, "holdcount", "");

    assertEquals(List.of("holdcount"), checks());
  }

  @Test
  void commitChecks_passingALostHold_orCallingAHeldOneReleased_orAnUnreportedLoss_areViolations() {
    episode("a", "A", 1, T, T + 10, T + 9_000_000, "LOST");
    lost("A", 1, T + 3_000_000);
    // Fine: held and passing; lost and saying so after the LockLost; no answer says nothing.
    commitCheck("a", T + 1_000_000, ModelActor.CHECK_HELD, ModelActor.CHECK_HELD, "");
    commitCheck("a", T + 2_000_000, ModelActor.CHECK_HELD, ModelActor.CHECK_UNCONFIRMED,
        "could not be confirmed in Redis: Redis did not answer");
    commitCheck("a", T + 4_000_000, ModelActor.CHECK_LOST, ModelActor.CHECK_LOST,
        "was lost: expired");
    // Violations: a lost hold passing; a held hold called released.
    commitCheck("a", T + 5_000_000, ModelActor.CHECK_LOST, ModelActor.CHECK_HELD, "");
    commitCheck("a", T + 1_500_000, ModelActor.CHECK_HELD, ModelActor.CHECK_OTHER,
        "was released");

    assertEquals(List.of("commit-check", "commit-check"), checks());
  }

  @Test
  void commitCheck_sayingLostWithoutALockLost_orInAQuietPeriodOfASureHold_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 9_000_000, "LOST");
    commitCheck("a", T + 1_000_000, ModelActor.CHECK_UNSURE, ModelActor.CHECK_LOST,
        "was lost: gone"); // no LockLost at all
    lost("A", 1, T + 2_000_000);
    commitCheck("a", T + 2_000_000, ModelActor.CHECK_HELD, ModelActor.CHECK_LOST,
        "was lost: gone"); // reported, but nothing explains it
    fault(T + 5_000_000, T + 6_000_000);
    commitCheck("a", T + 5_500_000, ModelActor.CHECK_HELD, ModelActor.CHECK_LOST,
        "was lost: gone"); // a fault explains it

    assertEquals(List.of("commit-check", "commit-check"), checks());
  }

  /**
   * A LockLost names a read-write lock, not its side: while the thread held both sides, it may
   * be the write side's, so a later check passing the read side is no violation (the actor
   * may have taken the report as the read side's).
   */
  @Test
  void commitCheck_passingOneSideAfterAReadWriteLossWhileBothWereHeld_isNoViolation() {
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, "r0/1w", "w", "lock()", "",
        T, T + 10, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, "r0/2r", "r", "tryLock()",
        "", T + 1_000, T + 1_010, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "r0", "", "LockLost", "",
        T + 2_000_000, T + 2_000_100, 0, 0, 0, "", "its lease ran out"));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "A", "A", 1, "r0/1w", "w", "", "LOST",
        T + 2_000_200, T + 2_000_200, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, "r0/2r", "r", "commitCheck(local)",
        "OK", T + 3_000_000, T + 3_001_000, ModelActor.CHECK_LOST, ModelActor.CHECK_HELD, 0,
        "commitcheck", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "A", "A", 1, "r0/2r", "r", "", "UNLOCKED",
        T + 4_000_000, T + 4_000_000, 0, 0, 0, "", ""));

    assertEquals(List.of(), checks());
  }

  private void commitCheck(String episode, long start, int expected, int verdict,
      String text) {
    call("A", 1, episode, "commitCheck(redis)", "OK", start, expected, verdict, "commitcheck",
        text);
  }

  @Test
  void slowCalls_unexpectedInterrupts_andUnfinishedHolds_areViolations() {
    long quick = SETTINGS.quickBoundMicros();
    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A", 1, "m0", "", "tryLock()", "FALSE",
        T, T + quick + 1, 0, 0, quick, "", ""));
    call("A", 1, "", "lockInterruptibly()", "INTERRUPTED", T + 1_000_000, 0, 0, "", "");
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, "m0", "a", "lock()", "",
        T + 2_000_000, T + 2_000_010, 0, 0, 0, "", ""));

    assertEquals(List.of("bounds", "outcomes", "episodes"), checks());
  }

  @Test
  void fencingTokens_repeatedOrNotIncreasing_areViolations() {
    fenced("a", "A", 1, T, T + 10, 100);
    fenced("b", "B", 2, T + 1_000_000, T + 1_000_010, 100); // the same token: two violations
    fenced("c", "C", 3, T + 2_000_000, T + 2_000_010, 150);
    fenced("d", "D", 4, T + 3_000_000, T + 3_000_010, 140); // lower than c's, acquired before

    assertEquals(List.of("fencing", "fencing", "fencing"), checks());
  }

  @Test
  void fencingTokens_ofOverlappingAcquisitions_mayComeInEitherOrder() {
    fenced("a", "A", 1, T, T + 2_000_000, 200);
    fenced("b", "B", 2, T + 1_000_000, T + 1_500_000, 150); // started before a returned

    assertEquals(List.of(), checks());
  }

  /**
   * Run replica 8160540480636169238: another thread of the client force-unlocked {@code x0} as
   * the hold's acquisition returned; {@code getToken()}, read just after, gave none, as the
   * {@code FencedLock} contract says for a hold the client knows lost. Without a forceUnlock
   * that may have run by then, a hold without a token is a violation.
   */
  @Test
  void fencingToken_missing_isExcusedOnlyWhenTheHoldMayHaveBeenKnownLostAsAcquired() {
    fenced("a", "A", 1, T, T + 850_000, -1);
    assertEquals(List.of("fencing"), checks());

    events.add(new ModelEvent(Kind.CALL, "p0", "A", "A2", 2, "x0", "", "forceUnlock", "OK",
        T + 847_000, T + 877_000, 0, 0, 0, "", ""));
    assertEquals(List.of(), checks());
  }

  @Test
  void acquisitionWhileAnUnlockAfterKeepsTheLock_isAViolation() {
    episode("a", "A", 1, T, T + 10, T + 1_001_000, "UNLOCKED");
    call("A", 1, "a", "unlockAfter(1000ms)", "OK", T + 1_000_000, 1, 0, "", "");
    episode("b", "B", 2, T + 1_500_000, T + 1_600_000, T + 3_000_000, "UNLOCKED");
    episode("c", "C", 3, T + 1_700_000, T + 2_100_000, T + 3_000_000, "UNLOCKED"); // after

    assertEquals(List.of("keep"), checks());
  }

  @Test
  void readers_sharingALockLost_matchEveryHoldItMayMean() {
    // A thread holds both sides of r0; one LockLost names r0: both holds may be meant.
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, "r0/1w", "w", "lock()", "",
        T, T + 10, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", "A", "A", 1, "r0/2r", "r", "lock()", "",
        T + 100, T + 110, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.LOST, "p0", "A", "", 1, "r0", "", "LockLost", "",
        T + 1_000_000, T + 1_000_100, 0, 0, 0, "", "expired"));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "A", "A", 1, "r0/1w", "w", "", "LOST",
        T + 2_000_000, T + 2_000_000, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", "A", "A", 1, "r0/2r", "r", "", "LOST",
        T + 2_000_000, T + 2_000_000, 0, 0, 0, "", ""));

    assertEquals(List.of(), checks());
  }

  // ---- RedLock ("rl" over q0, q1, q2): its LockLost names a member ----

  @Test
  void redLock_overlapAfterAMembersLossReportedBeforeTheNextAcquisition_isExcused() {
    String rl = ModelLocks.RED;
    episode(rl, "a", "A", 1, T, T + 10, T + 5_000_000, "UNLOCKED");
    episode(rl, "b", "B", 2, T + 2_000_000, T + 2_000_100, T + 2_500_000, "UNLOCKED");
    window(rl, "a.w1", "a", "A", T + 2_100_000, 2, "b.w1");
    window(rl, "b.w1", "b", "B", T + 2_090_000, 1, "");
    assertEquals(List.of("exclusion"), checks(), "no loss reported");

    lost("q1", "A", 1, T + 1_900_000);
    assertEquals(List.of(), checks());
  }

  @Test
  void redLock_lockLostOfAnotherName_belongsToNoHold() {
    episode(ModelLocks.RED, "a", "A", 1, T, T + 10, T + 3_000_000, "UNLOCKED");
    lost("q2", "A", 1, T + 1_000_000);
    assertEquals(List.of(), checks(), "a member's name");

    lost("n0", "A", 1, T + 1_500_000);
    assertEquals(List.of("loss-report"), checks(), "not a member of the RedLock");
  }

  /**
   * A RedLock's re-entry is a round of votes: one vote failing while a competitor's round holds
   * another refuses it though the thread holds a majority. A single lock refusing a re-entry has
   * lost it, and must have said so first.
   */
  @Test
  void redLock_reentryRefused_isNoSignOfLoss_unlikeASingleLocks() {
    episode(ModelLocks.RED, "a", "A", 1, T, T + 10, T + 3_000_000, "UNLOCKED");
    call(ModelLocks.RED, "A", 1, "a", "tryLock()", "FALSE", T + 1_000_000, 1, 1, "", "");
    assertEquals(List.of(), checks());

    episode("b", "B", 2, T, T + 10, T + 3_000_000, "LOST");
    call("B", 2, "b", "tryLock()", "FALSE", T + 1_000_000, 1, 1, "", "");
    assertEquals(List.of("loss-report"), checks());
  }

  /**
   * The loss of a minority of members may leave the RedLock held: its calls are not judged
   * ({@code member-lost}); once known lost (a majority's losses reported, a forceUnlock, the
   * lease run out: {@code lost:reported}), unlock must say "lost" as any lock's.
   */
  @Test
  void redLock_unlockSucceeding_isFineAfterAMinorityLost_butNotOnceKnownLost() {
    String rl = ModelLocks.RED;
    episode(rl, "a", "A", 1, T, T + 10, T + 3_000_000, "UNLOCKED");
    lost("q0", "A", 1, T + 1_000_000);
    call(rl, "A", 1, "a", "unlock", "OK", T + 2_000_000, 1, 0, ModelActor.MEMBER_LOST, "");
    assertEquals(List.of(), checks());

    events.removeIf(e -> e.kind() == Kind.CALL);
    lost("q2", "A", 1, T + 1_100_000);
    call(rl, "A", 1, "a", "unlock", "OK", T + 2_000_000, 1, 0, "lost:reported", "");
    assertEquals(List.of("lost-calls"), checks());
  }

  /**
   * A RedLock re-entry once known lost must say "lost" — unless the run closed its client while
   * its rounds were still retrying within its wait: then it ends saying the client is closed.
   */
  @Test
  void redLock_reentryOnceKnownLost_mustSayLost_unlessItsClientClosedUnderIt() {
    String rl = ModelLocks.RED;
    episode(rl, "a", "A", 1, T, T + 10, T + 3_000_000, "LOST");
    lost("q0", "A", 1, T + 1_000_000);
    lost("q1", "A", 1, T + 1_000_100);
    call(rl, "A", 1, "a", "tryLock(1000ms)", "LOCK_EXCEPTION", T + 2_000_000, 1, 1,
        "lost:reported", "RedLock redlock[q0, q1, q2] cannot reach a majority (2 of 3): 3 servers "
        + "failed, first: The lock client is closed (lock 'q0')");
    assertEquals(List.of("lost-calls"), checks());

    events.add(new ModelEvent(Kind.CLIENT, "p0", "A", "", 0, "", "", "closed", "",
        T + 2_000_500, T + 2_000_600, 0, 0, 0, "", ""));
    assertEquals(List.of(), checks());
  }

  @Test
  void redLock_imse_needsAMembersLockLostBeforeIt_andMustSayLost() {
    String rl = ModelLocks.RED;
    episode(rl, "a", "A", 1, T, T + 10, T + 3_000_000, "LOST");
    call(rl, "A", 1, "a", "unlock", "IMSE", T + 2_000_000, 1, 0, "", "RedLock redlock[q0, q1, "
        + "q2] is not held by thread A (id 1): Lock 'q1' was lost by thread A (id 1) before "
        + "unlock(): expired");
    assertEquals(List.of("loss-report"), checks(), "no LockLost at all");

    lost("q1", "A", 1, T + 1_000_000);
    assertEquals(List.of(), checks());
  }

  /**
   * A lost RedLock's IllegalMonitorStateException must say "lost" also when it quotes a member
   * its acquisition never won, or when the first member's server failed (the library quotes a
   * member's loss first: {@code RedLockTest#unlock_majorityForceUnlocked_*_saysLost}).
   */
  @Test
  void redLock_imseQuotingAMemberNeverWon_orAServersError_isAViolation() {
    String rl = ModelLocks.RED;
    episode(rl, "a", "A", 1, T, T + 10, T + 3_000_000, "LOST");
    call(rl, "A", 1, "a", "tryLock()", "OK", T, 0, 1, ModelActor.RED_MEMBERS_TAG + "q1+q2", "");
    lost("q1", "A", 1, T + 1_000_000);
    lost("q2", "A", 1, T + 1_000_000);
    call(rl, "A", 1, "a", "unlock", "IMSE", T + 2_000_000, 1, 0, "lost:reported", "RedLock "
        + "redlock[q0, q1, q2] is not held by thread A (id 1): Lock 'q0' is not held by thread A"
        + " (id 1)");
    assertEquals(List.of("loss-report"), checks(), "a member never won: still must say lost");

    events.removeIf(e -> e.outcome().equals("IMSE"));
    call(rl, "A", 1, "a", "unlock", "IMSE", T + 2_000_000, 1, 0, "lost:reported",
        "RedLock redlock[q0, q1, q2] was held by thread A (id 1) on 0 of 3 servers at unlock(), "
        + "fewer than a majority (2); all were released where possible. First failure: Redis did"
        + " not answer the release script on key q0: java.net.SocketTimeoutException");
    assertEquals(List.of("loss-report"), checks(), "a server's error: still must say lost");

    events.removeIf(e -> e.outcome().equals("IMSE"));
    call(rl, "A", 1, "a", "unlock", "IMSE", T + 2_000_000, 1, 0, "lost:reported", "RedLock "
        + "redlock[q0, q1, q2] was lost by thread A (id 1): Lock 'q1' was lost by thread A "
        + "(id 1) before unlock(): expired");
    assertEquals(List.of(), checks(), "says lost, after the members' LockLost");
  }

  private void fenced(String id, String client, long thread, long start, long acquired,
      long token) {
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", client, client, thread, "x0", id,
        "lock()", "", start, acquired, 0, 0, token, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", client, client, thread, "x0", id, "",
        "UNLOCKED", acquired + 100, acquired + 100, 0, 0, 0, "", ""));
  }

  private List<String> checks() {
    return new ModelJudge(SETTINGS, events).judge().stream().map(ModelJudge.Violation::check)
        .toList();
  }

  private void episode(String id, String client, long thread, long start, long acquired,
      long end, String how) {
    episode("m0", id, client, thread, start, acquired, end, how);
  }

  private void episode(String lock, String id, String client, long thread, long start,
      long acquired, long end, String how) {
    events.add(new ModelEvent(Kind.EPISODE_BEGIN, "p0", client, client, thread, lock, id,
        "lock()", "", start, acquired, 0, 0, 0, "", ""));
    events.add(new ModelEvent(Kind.EPISODE_END, "p0", client, client, thread, lock, id, "", how,
        end, end, 0, 0, 0, "", ""));
  }

  private void window(String id, String episode, String client, long enter, long count,
      String others) {
    window("m0", id, episode, client, enter, count, others);
  }

  private void window(String lock, String id, String episode, String client, long enter,
      long count, String others) {
    events.add(new ModelEvent(Kind.WINDOW, "p0", client, client, 0, lock, id, "window", "",
        enter, enter + 20_000, count, 0, 0, episode, others));
  }

  private void lost(String client, long thread, long detected) {
    lost("m0", client, thread, detected);
  }

  private void lost(String lock, String client, long thread, long detected) {
    events.add(new ModelEvent(Kind.LOST, "p0", client, "", thread, lock, "", "LockLost", "",
        detected, detected + 100, 0, 0, 0, "", "expired"));
  }

  private void call(String client, long thread, String episode, String op, String outcome,
      long start, long before, long after, String tag, String text) {
    call("m0", client, thread, episode, op, outcome, start, before, after, tag, text);
  }

  private void call(String lock, String client, long thread, String episode, String op,
      String outcome, long start, long before, long after, String tag, String text) {
    events.add(new ModelEvent(Kind.CALL, "p0", client, client, thread, lock, episode, op,
        outcome, start, start + 1_000, before, after, 0, tag, text));
  }

  private void fault(long start, long end) {
    events.add(new ModelEvent(Kind.FAULT, "", "", "faults", 0, "proxy0", "", "BLACK_HOLE", "",
        start, end, 0, 0, 0, "", ""));
  }
}
