package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.Jedis;

/**
 * Attack review of issue 15's hole 2 (the replay rule and the shared script skeleton) and of the
 * rule added with it that a sealed call which is refused leaves a record ({@code x:<count>}), so
 * that the delayed first copy of an earlier send — the only send that writes no marker — can
 * never apply to a hold the caller takes afterwards.
 *
 * <p>The scripts are called directly, as the client calls them. A "lost reply" is an answer the
 * test ignores; a "delayed first copy" is the unsealed first send of a request, run after its
 * sealed re-send was answered (it sat behind a paused server or a slow network). Each scenario
 * then looks at what the thread would believe and what Redis holds.
 */
class ReplayAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static final String LEASE = "60000";
  private static final String MARKER_MS = "60000";
  private static final String TOKEN_MS = "3600000";

  private LockEngine engine;
  private int requests;

  /** The kinds composed from the shared skeleton, and who conflicts with them. */
  enum Kind {
    EXCLUSIVE(LockKind.EXCLUSIVE, LockKind.EXCLUSIVE),
    FAIR(FairKind.INSTANCE, FairKind.INSTANCE),
    READ(ReadWriteLockKind.READ, ReadWriteLockKind.WRITE),
    WRITE(ReadWriteLockKind.WRITE, ReadWriteLockKind.WRITE);

    final LockKind kind;
    final LockKind rival;

    Kind(LockKind kind, LockKind rival) {
      this.kind = kind;
      this.rival = rival;
    }
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    engine = Clients.engine(client);
  }

  // ---- acquisitions: every path of a sealed send leaves a record ----

  /**
   * A re-entry's first send is delayed; its sealed re-send finds the hold gone (-1) and the
   * thread takes the lock again. The delayed first copy then finds the refusal's record and
   * changes nothing: the later hold keeps count 1.
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void reentry_refusedWhenSealed_lateFirstCopyLeavesALaterHoldAlone(Kind k) {
    LockNames names = LockNames.of("", "reenter", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    String reentry = next();
    expire(names);
    assertEquals(-1L, acquire(names, k.kind, "a:1", reentry, 1, true, false).get(0),
        "setup: the sealed re-send finds the hold gone");
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0),
        "setup: the thread takes the lock again");

    List<?> late = acquire(names, k.kind, "a:1", reentry, 1, false, false);
    // Refused as its sealed re-send was (the recorded refusal), or as settled: nothing applies.
    assertTrue((Long) late.get(0) < 0, "the late first copy is refused: " + late);
    assertEquals("1", hget(names.key(), k.kind.field("a:1")), "the later hold is untouched");
  }

  /**
   * A fresh acquisition's first send is delayed; its sealed re-send is granted (reply lost),
   * the grant's lease runs out, and the next re-send is told the grant ended ({0, pttl}). The
   * thread then acquires under a new request, and later releases. The delayed first copy finds
   * the replayed grant's marker each time and applies nothing: neither the later hold's count
   * nor its expiry changes, and once it is released, nothing is created.
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void freshAcquisition_staleReplay_lateFirstCopyAppliesNothing(Kind k) {
    LockNames names = LockNames.of("", "stale", k.kind);
    String request = next();
    assertEquals(1L, acquire(names, k.kind, "a:1", request, 0, true, false).get(0));
    expire(names);
    List<?> stale = acquire(names, k.kind, "a:1", request, 0, true, false);
    assertEquals(0L, stale.get(0), "setup: the replayed grant has ended " + stale);

    List<?> again = acquire(names, k.kind, "a:1", next(), 0, false, false, "5000");
    assertEquals(1L, again.get(0), "setup: acquired under a new request " + again);
    List<?> late = acquire(names, k.kind, "a:1", request, 0, false, false);
    assertEquals("1", hget(names.key(), k.kind.field("a:1")), "count unchanged " + late);
    assertTrue(holdTtl(names, k.kind, "a:1") <= 5_000,
        "the late copy did not extend the later hold to its own lease: " + late);

    String last = next();
    assertEquals(0L, release(names, k.kind, "a:1", last, 1, false));
    acquire(names, k.kind, "a:1", request, 0, false, false);
    try (Jedis jedis = redis.server().admin()) {
      assertTrue(!jedis.exists(names.key()), "the late copy creates nothing");
    }
  }

  /**
   * Two locks whose key hashes alike ({@code a} and {@code {a}}) share one token key: fenced
   * grants of both, interleaved, still get strictly increasing tokens, and a replay of each
   * answers the token its own request was given, not the other lock's later one.
   */
  @Test
  void fencedTwins_shareTheTokenKey_tokensIncreaseAndReplaysAnswerTheirOwn() {
    LockNames plain = LockNames.of("", "a");
    LockNames braced = LockNames.of("", "{a}");
    assertEquals(plain.tokenKey(), braced.tokenKey(), "setup: the two locks share a token key");
    String first = next();
    long t1 = (Long) acquire(plain, LockKind.EXCLUSIVE, "a:1", first, 0, true, true).get(3);
    String second = next();
    long t2 = (Long) acquire(braced, LockKind.EXCLUSIVE, "b:1", second, 0, true, true).get(3);
    assertTrue(t2 > t1, t1 + " then " + t2);
    assertEquals(0L, release(plain, LockKind.EXCLUSIVE, "a:1", next(), 1, false));
    long t3 = (Long) acquire(plain, LockKind.EXCLUSIVE, "c:1", next(), 0, true, true).get(3);
    assertTrue(t3 > t2, t2 + " then " + t3);

    List<?> replay = acquire(braced, LockKind.EXCLUSIVE, "b:1", second, 0, true, true);
    assertEquals(List.of(1L, 1L), replay.subList(0, 2), "still true: granted " + replay);
    assertEquals(t2, replay.get(3), "its own token, not the twin's later one");
    List<?> stale = acquire(plain, LockKind.EXCLUSIVE, "a:1", first, 0, true, true);
    assertEquals(0L, stale.get(0), "a:1's grant ended: not granted " + stale);
    assertNotEquals(t3, stale.get(3), "never the current holder's token");
  }

  // ---- releases ----

  /**
   * An inner release's first send is delayed; its sealed re-send finds the hold gone and is
   * refused; the thread takes the lock again and re-enters. The delayed first copy changes
   * nothing: the later hold keeps count 2.
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void innerRelease_refusedWhenSealed_lateFirstCopyLeavesALaterHoldAlone(Kind k) {
    LockNames names = LockNames.of("", "inner", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    assertEquals(2L, acquire(names, k.kind, "a:1", next(), 1, false, false).get(1));
    String inner = next();
    expire(names);
    assertEquals(-1L, release(names, k.kind, "a:1", inner, 2, true), "setup: hold gone");
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    assertEquals(2L, acquire(names, k.kind, "a:1", next(), 1, false, false).get(1));

    long late = release(names, k.kind, "a:1", inner, 2, false);
    assertTrue(late < 0, "the late first copy is refused: " + late);
    assertEquals("2", hget(names.key(), k.kind.field("a:1")), "the later hold is untouched");
  }

  /**
   * DEFECT. A read hold's final release whose sealed re-send finds the reader dead (its own
   * timeout keys expired while another reader kept the hash) is answered -1 by RW_READ_RELEASE's
   * body without leaving a record: the x: rule lives in the shared prologue, which sees count ==
   * expected and lets the body run; the body's "not alive" branch writes d:0 only when alive.
   * The thread is told its hold is lost and takes the read lock again; then the delayed
   * unsealed first copy of the old release finds no marker, count 1 == expected 1, a live
   * timeout key (the new one) — and ends the new hold. The thread believes it reads; a writer
   * of another client gets in: a reader and a writer at once.
   */
  @Test
  void readRelease_deadReaderRefusedWhenSealed_lateFirstCopyMustNotEndALaterReadHold() {
    LockKind read = ReadWriteLockKind.READ;
    LockKind write = ReadWriteLockKind.WRITE;
    LockNames names = LockNames.of("", "rw", read);
    LockNames writeNames = LockNames.of("", "rw", write);
    assertEquals(1L, acquire(names, read, "o:1", next(), 0, false, false).get(0),
        "setup: another client's reader keeps the hash");
    assertEquals(1L, acquire(names, read, "a:1", next(), 0, false, false).get(0));
    String release = next();
    try (Jedis jedis = redis.server().admin()) {
      // a:1's lease ran out: its own timeout key is gone, the hash lives on for o:1
      assertEquals(1L, jedis.del(timeoutKey(names, read.field("a:1"), 1)));
    }
    assertEquals(-1L, release(names, read, "a:1", release, 1, true),
        "setup: the sealed re-send finds the reader dead");
    assertEquals(1L, acquire(names, read, "a:1", next(), 0, false, false).get(0),
        "setup: the thread reads again");

    long late = release(names, read, "a:1", release, 1, false);
    assertEquals(0L, release(names, read, "o:1", next(), 1, false), "the other reader leaves");
    List<?> writer = acquire(writeNames, write, "w:1", next(), 0, false, false);
    assertEquals(0L, writer.get(0), "a writer must not get in while a:1 believes it reads "
        + "(the late first copy was answered " + late + "): " + writer);
    assertEquals("1", hget(names.key(), read.field("a:1")), "a:1's later read hold survives");
  }

  // ---- a refusal's own re-send ----

  /**
   * DEFECT (reporting; makes ScriptPropertyTest fail on every default-length run at 8731366).
   * A re-entry whose hold is gone, sent three times (the client's ATTEMPTS) with the first two
   * replies lost: the second, sealed, records {@code x:0}; the third then finds the letter x and
   * is answered -3 ("resolved earlier") instead of -1 ("your hold is gone"). The client takes -3
   * as a count it cannot explain: LockLost with cause COUNT_MISMATCH instead of GONE, and an
   * extra "abandon" settle owed. A refusal's record should replay the refusal: -1 for x:0
   * (count 0), -2 for x:n (n > 0) — distinguishable from RESOLVE's x by its own letter.
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void reentry_refusedWhenSealed_itsOwnResendIsStillToldTheHoldIsGone(Kind k) {
    LockNames names = LockNames.of("", "resent-reentry", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    String reentry = next();
    expire(names);
    assertEquals(-1L, acquire(names, k.kind, "a:1", reentry, 1, true, false).get(0),
        "setup: sealed, refused; the reply is lost");
    List<?> resent = acquire(names, k.kind, "a:1", reentry, 1, true, false);
    assertEquals(-1L, resent.get(0), "the hold is still gone: " + resent);
  }

  /**
   * DEFECT, through the client: the re-entry of a hold deleted behind its back, whose first two
   * replies are lost, is reported as a count mismatch ("status -3"), not as a hold that is gone.
   */
  @Test
  void client_reentryOfADeletedHold_twoRepliesLost_reportsTheHoldGone() throws Exception {
    try (FaultProxy proxy = new FaultProxy(redis.server().port())) {
      LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
          "holdfast.redis.timeout", "300ms"));
      LossRecorder losses = LossRecorder.on(client);
      DistributedLock lock = client.getLock("deleted");
      lock.lock(60, TimeUnit.SECONDS); // a fixed lease: no renewal script in between
      try (Jedis jedis = redis.server().admin()) {
        jedis.del("deleted");
      }
      proxy.dropReplies(2);
      assertThrows(LockException.class, () -> lock.lock(60, TimeUnit.SECONDS));
      assertEquals(0, proxy.pendingDrops(), "setup: two replies were lost");
      String reason = losses.awaitFirst(Duration.ofSeconds(10), "re-entry").event().reason();
      assertTrue(reason.contains("no longer held"), "reported as gone: " + reason);
    }
  }

  /** DEFECT, the same for a release: the re-send is answered -2 (count mismatch), not -1. */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void release_refusedWhenSealed_itsOwnResendIsStillToldTheHoldIsGone(Kind k) {
    LockNames names = LockNames.of("", "resent-release", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    String release = next();
    expire(names);
    assertEquals(-1L, release(names, k.kind, "a:1", release, 1, true),
        "setup: sealed, refused; the reply is lost");
    assertEquals(-1L, release(names, k.kind, "a:1", release, 1, true), "still gone");
  }

  // ---- KEEP (holdAtLeast) ----

  /**
   * DEFECT (low severity; the other half of ScriptPropertyTest's failures at 8731366). A keep
   * that ran with its reply lost, then the kept lock is force-released (or lost in a restart);
   * the re-send finds {@code d:0} and answers 1, "kept", although nothing is kept any more: a
   * recorded outcome believed after it stopped being true. KEEP's Javadoc accepts this ("the
   * keep's answer grants nothing"); the property test's oracle does not. The replay could
   * answer 1 only while the {@code :kept} field (a reader: its timeout keys) still exists.
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void keep_replayedAfterTheKeptLockWasDeleted_isNotAnsweredKept(Kind k) {
    LockNames names = LockNames.of("", "kept-gone", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    String keep = next();
    assertEquals(1L, keep(names, k.kind, "a:1", keep, 30_000), "setup: kept, reply lost");
    expire(names);
    assertEquals(0L, keep(names, k.kind, "a:1", keep, 30_000), "nothing is kept any more");
  }

  /**
   * DEFECT. A keep's first send is delayed; its sealed re-send finds the hold gone and is
   * answered 0 (not held) without a record — KEEP writes its marker only when it applies. The
   * thread is told its hold is lost and takes the lock again (watchdog lease); then the delayed
   * first copy finds no marker, count 1 == expected 1, and keeps the NEW hold: an exclusive or
   * write field is renamed {@code :kept} and the key set to expire after the keep's time; a read
   * hold's timeout keys are cut to it. The thread believes it holds; once the keep's time is up
   * (here 100 ms) another client takes the lock, and the thread learns of it only at its next
   * renewal. The same happens after a sealed re-send answered -2. (Issue 15 hole 4's "a delayed
   * copy of KEEP must not rename a later hold of the same thread".)
   */
  @ParameterizedTest
  @EnumSource(Kind.class)
  void keep_refusedWhenSealed_lateFirstCopyMustNotKeepALaterHold(Kind k) {
    LockNames names = LockNames.of("", "kept", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0));
    String keep = next();
    expire(names);
    assertEquals(0L, keep(names, k.kind, "a:1", keep, 100),
        "setup: the sealed re-send finds the hold gone");
    assertEquals(1L, acquire(names, k.kind, "a:1", next(), 0, false, false).get(0),
        "setup: the thread takes the lock again");

    long late = keep(names, k.kind, "a:1", keep, 100);
    assertEquals("1", hget(names.key(), k.kind.field("a:1")),
        "the later hold must keep its field (late copy answered " + late + ")");
    assertTrue(holdTtl(names, k.kind, "a:1") > 1_000,
        "the later hold must keep its lease, not the keep's 100 ms");
  }

  // ---- TRANSFER (local handoff) ----

  /**
   * DEFECT. A handoff's first send is delayed; its re-send (same markers) finds the releaser's
   * hold gone and is answered -1 without a record — TRANSFER writes its two markers only when
   * it hands over. The releaser is told its hold was lost, the waiter declined; the releaser's
   * thread takes the lock again. The delayed first copy then finds no marker and the releaser's
   * count 1, and hands the NEW hold to the waiter's field: the releaser's thread believes it
   * holds (its field is gone), and the waiter's next fresh acquisition finds its own leftover
   * count 1 and takes it over, as the acquire script allows. Two threads of one client hold
   * the lock at once.
   */
  @Test
  void transfer_refusedOnResend_lateFirstCopyMustNotHandOverALaterHold() {
    LockNames names = LockNames.of("", "handoff");
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "a:1", next(), 0, false, false).get(0));
    String releaseId = next();
    String grantId = next();
    expire(names);
    assertEquals(-1L, transfer(names, releaseId, grantId, "a:1", "w:2").get(0),
        "setup: the re-send finds the releaser's hold gone");
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "a:1", next(), 0, false, false).get(0),
        "setup: the releaser's thread takes the lock again");

    List<?> late = transfer(names, releaseId, grantId, "a:1", "w:2");
    List<?> waiter = acquire(names, LockKind.EXCLUSIVE, "w:2", next(), 0, false, false);
    assertEquals(0L, waiter.get(0), "the waiter must not get in while a:1 believes it holds "
        + "(the late first copy was answered " + late + "): " + waiter);
    assertEquals("1", hget(names.key(), "a:1"), "the releaser's later hold stays its own");
  }

  /**
   * A handoff answered, then a late copy of it after the waiter released and the releaser took
   * the lock again: the pair of markers makes it a replay, which changes nothing.
   */
  @Test
  void transfer_answered_lateCopyAfterBothMovedOnChangesNothing() {
    LockNames names = LockNames.of("", "handoff-done");
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "a:1", next(), 0, false, false).get(0));
    String releaseId = next();
    String grantId = next();
    assertEquals(1L, transfer(names, releaseId, grantId, "a:1", "w:2").get(0));
    assertEquals(0L, release(names, LockKind.EXCLUSIVE, "w:2", next(), 1, false));
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "a:1", next(), 0, false, false).get(0));

    List<?> late = transfer(names, releaseId, grantId, "a:1", "w:2");
    assertEquals(List.of(0L, 0L), late, "a replay whose grant ended");
    assertEquals("1", hget(names.key(), "a:1"));
    assertNull(hget(names.key(), "w:2"));
  }

  // ---- helpers: the scripts' KEYS and ARGV exactly as the client builds them ----

  private List<?> transfer(LockNames names, String releaseId, String grantId, String releaser,
      String waiter) {
    return (List<?>) engine.topology().eval(LockScripts.TRANSFER,
        List.of(names.key(), names.markerPrefix() + releaseId, names.markerPrefix() + grantId),
        List.of(releaser, waiter, LEASE, MARKER_MS));
  }

  private List<?> acquire(LockNames names, LockKind kind, String thread, String request,
      int expected, boolean sealed, boolean fenced) {
    return acquire(names, kind, thread, request, expected, sealed, fenced, LEASE);
  }

  private List<?> acquire(LockNames names, LockKind kind, String thread, String request,
      int expected, boolean sealed, boolean fenced, String lease) {
    String field = kind.field(thread);
    List<String> keys = new ArrayList<>(List.of(names.key(), names.markerPrefix() + request,
        names.tokenKey()));
    keys.addAll(kind.extraKeys(names));
    List<String> args = new ArrayList<>(List.of(lease, field, Integer.toString(expected),
        sealed ? "1" : "0", MARKER_MS, fenced ? "1" : "0", TOKEN_MS));
    args.addAll(kind.acquireExtraArgs(engine, names, field, false));
    return (List<?>) engine.topology().eval(kind.acquire(), keys, args);
  }

  private long release(LockNames names, LockKind kind, String thread, String request,
      int expected, boolean sealed) {
    String field = kind.field(thread);
    List<String> keys = new ArrayList<>(List.of(names.key(), names.markerPrefix() + request));
    keys.addAll(kind.extraKeys(names));
    List<String> args = new ArrayList<>(List.of(field, LEASE, Integer.toString(expected),
        engine.topology().publishCommand(), MARKER_MS, names.channel(), sealed ? "1" : "0"));
    args.addAll(kind.extraArgs(engine, names, field));
    return (Long) engine.topology().eval(kind.release(), keys, args);
  }

  /** KEEP as {@code RedisLock.unlockAfter} sends it: expected 1, every send marks. */
  private long keep(LockNames names, LockKind kind, String thread, String request, long keepMs) {
    String field = kind.field(thread);
    List<String> keys = new ArrayList<>(List.of(names.key(), names.markerPrefix() + request));
    keys.addAll(kind.extraKeys(names));
    List<String> args = new ArrayList<>(List.of(field, Long.toString(keepMs), "1", MARKER_MS,
        engine.topology().publishCommand(), names.channel()));
    args.addAll(kind.extraArgs(engine, names, field));
    return (Long) engine.topology().eval(kind.keep(), keys, args);
  }

  /** The TTL the thread's hold has in Redis: a reader's longest timeout key, else the key's. */
  private long holdTtl(LockNames names, LockKind kind, String thread) {
    try (Jedis jedis = redis.server().admin()) {
      if (kind == ReadWriteLockKind.READ) {
        String count = jedis.hget(names.key(), kind.field(thread));
        assertNotNull(count, "the reader's field exists");
        long longest = -2;
        for (int n = 1; n <= Integer.parseInt(count); n++) {
          longest = Math.max(longest, jedis.pttl(timeoutKey(names, kind.field(thread), n)));
        }
        return longest;
      }
      return jedis.pttl(names.key());
    }
  }

  private static String timeoutKey(LockNames names, String field, int n) {
    return names.slotted() + ":" + field + ":rwlock_timeout:" + n;
  }

  /** Every hold of the lock ran out: its key and every section's key are gone. */
  private void expire(LockNames names) {
    try (Jedis jedis = redis.server().admin()) {
      jedis.del(names.key());
      for (String key : jedis.keys(names.slotted() + ":*rwlock_timeout*")) {
        jedis.del(key);
      }
    }
  }

  private String hget(String key, String field) {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.hget(key, field);
    }
  }

  private String next() {
    return "r" + ++requests;
  }
}
