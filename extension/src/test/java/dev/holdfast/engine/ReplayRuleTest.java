package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisExtension;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.Jedis;

/**
 * Issue 15, hole 2, at the script level: the request marker's replay rule of every kind's
 * acquire script. A re-sent acquisition whose first run's reply was lost is answered from its
 * marker only while that answer is still true — the caller's field exists with the recorded
 * count (a reader's own sections still live) — and with the token that request was given, never
 * the token key's current value. The scripts are called directly, so a "lost reply" is simply
 * an answer the test ignores.
 */
class ReplayRuleTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static final String LEASE = "60000";
  private static final String MARKER_MS = "60000";
  private static final String TOKEN_MS = "3600000";

  private LockEngine engine;
  private int requests;

  /** The kinds whose acquire scripts share the replay rule, and who conflicts with them. */
  enum Kind {
    EXCLUSIVE(LockKind.EXCLUSIVE, LockKind.EXCLUSIVE),
    FAIR(FairKind.INSTANCE, FairKind.INSTANCE),
    READ(ReadWriteLockKind.READ, ReadWriteLockKind.WRITE),
    WRITE(ReadWriteLockKind.WRITE, ReadWriteLockKind.WRITE);

    final LockKind kind;
    /** The kind another client acquires the same lock with to exclude this one. */
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

  @ParameterizedTest
  @EnumSource(Kind.class)
  void sealedGrant_replayedAfterItsHoldExpiredAndAnotherAcquired_isNotGranted(Kind k) {
    LockNames names = LockNames.of("", "replayed", k.kind);
    String request = nextRequest();
    List<?> granted = acquire(names, k.kind, "a:1", request, 0, true, true);
    assertEquals(1L, granted.get(0), "setup: granted " + granted);
    long ownToken = (Long) granted.get(3);
    expire(names);
    List<?> other = acquire(LockNames.of("", "replayed", k.rival), k.rival, "b:1",
        nextRequest(), 0, true, true);
    assertEquals(1L, other.get(0), "setup: another client acquires " + other);
    long otherToken = (Long) other.get(3);
    assertNotEquals(ownToken, otherToken);

    List<?> replay = acquire(names, k.kind, "a:1", request, 0, true, true);
    assertEquals(0L, replay.get(0), "the re-send is told the lock is held by someone else, "
        + "never granted: " + replay);
    assertNotEquals(otherToken, replay.get(3), "never the other holder's token");
    assertNull(hget(names.key(), k.kind.field("a:1")), "nothing created for the caller");
    assertEquals("1", hget(names.key(), k.rival.field("b:1")), "the other hold is untouched");
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void sealedGrant_replayedAfterItsHoldExpired_isNotGrantedAndTakesNothing(Kind k) {
    LockNames names = LockNames.of("", "expired", k.kind);
    String request = nextRequest();
    assertEquals(1L, acquire(names, k.kind, "a:1", request, 0, true, false).get(0));
    expire(names);
    List<?> replay = acquire(names, k.kind, "a:1", request, 0, true, false);
    assertEquals(0L, replay.get(0), "not granted: the hold it recorded is gone " + replay);
    try (Jedis jedis = redis.server().admin()) {
      assertTrue(!jedis.exists(names.key()), "the replay creates nothing");
    }
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void sealedGrant_replayedWhileHeld_answersItsOwnTokenAndTheCurrentTtl(Kind k) {
    LockNames names = LockNames.of("", "held", k.kind);
    String request = nextRequest();
    List<?> granted = acquire(names, k.kind, "a:1", request, 0, true, true);
    long ownToken = (Long) granted.get(3);
    assertTrue(ownToken > 0);
    try (Jedis jedis = redis.server().admin()) {
      // Later fenced grants (another reader, or a grant after this one ends) move the key on.
      jedis.set(names.tokenKey(), Long.toString(ownToken + 1_000));
      jedis.pexpire(names.key(), 5_000);
      for (String key : jedis.keys(names.slotted() + ":*rwlock_timeout*")) {
        jedis.pexpire(key, 5_000);
      }
    }
    List<?> replay = acquire(names, k.kind, "a:1", request, 0, true, true);
    assertEquals(1L, replay.get(0), "still true: answered granted " + replay);
    assertEquals(1L, replay.get(1));
    long pttl = (Long) replay.get(2);
    assertTrue(pttl > 0 && pttl <= 5_000, "the key's current TTL, not the lease: " + pttl);
    assertEquals(ownToken, replay.get(3), "the token this request was given");
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void reentry_replayedAfterItsHoldExpired_isRefusedAsGone(Kind k) {
    LockNames names = LockNames.of("", "reentered", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", nextRequest(), 0, false, false).get(0));
    String reentry = nextRequest();
    List<?> second = acquire(names, k.kind, "a:1", reentry, 1, true, false);
    assertEquals(List.of(1L, 2L), second.subList(0, 2));
    expire(names);
    assertEquals(1L, acquire(LockNames.of("", "reentered", k.rival), k.rival, "b:1",
        nextRequest(), 0, false, false).get(0), "setup: another client acquires");
    List<?> replay = acquire(names, k.kind, "a:1", reentry, 1, true, false);
    assertEquals(-1L, replay.get(0), "the hold is gone: refused, never granted " + replay);
    assertNull(hget(names.key(), k.kind.field("a:1")));
  }

  @Test
  void handoffGrant_replayedAfterItsHoldExpiredAndAnotherAcquired_isNotGranted() {
    LockNames names = LockNames.of("", "handed");
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "a:1", nextRequest(), 0, false, false)
        .get(0));
    String grant = nextRequest();
    List<?> handed = (List<?>) engine.topology().eval(LockScripts.TRANSFER,
        List.of(names.key(), names.markerPrefix() + nextRequest(), names.markerPrefix() + grant),
        List.of("a:1", "w:2", LEASE, MARKER_MS));
    assertEquals(1L, handed.get(0), "setup: handed over " + handed);
    expire(names);
    assertEquals(1L, acquire(names, LockKind.EXCLUSIVE, "b:1", nextRequest(), 0, false, false)
        .get(0), "setup: another client acquires");
    List<?> replay = acquire(names, LockKind.EXCLUSIVE, "w:2", grant, 0, true, false);
    assertEquals(0L, replay.get(0), "the waiter's re-send is not granted " + replay);
    assertNull(hget(names.key(), "w:2"));
  }

  @ParameterizedTest
  @EnumSource(Kind.class)
  void release_replayed_stillAnswersItsCount(Kind k) {
    LockNames names = LockNames.of("", "released", k.kind);
    assertEquals(1L, acquire(names, k.kind, "a:1", nextRequest(), 0, true, true).get(0));
    assertEquals(2L, acquire(names, k.kind, "a:1", nextRequest(), 1, true, true).get(1));
    String inner = nextRequest();
    assertEquals(1L, release(names, k.kind, "a:1", inner, 2, true));
    assertEquals(1L, release(names, k.kind, "a:1", inner, 2, true), "replayed, not applied");
    assertEquals("1", hget(names.key(), k.kind.field("a:1")));
    String last = nextRequest();
    assertEquals(0L, release(names, k.kind, "a:1", last, 1, false));
    assertEquals(0L, release(names, k.kind, "a:1", last, 1, false), "replayed, not applied");
  }

  private List<?> acquire(LockNames names, LockKind kind, String thread, String request,
      int expected, boolean sealed, boolean fenced) {
    String field = kind.field(thread);
    List<String> keys = new ArrayList<>(List.of(names.key(), names.markerPrefix() + request,
        names.tokenKey()));
    keys.addAll(kind.extraKeys(names));
    List<String> args = new ArrayList<>(List.of(LEASE, field, Integer.toString(expected),
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

  /** The lease of every hold of the lock ran out: its key and every section's key are gone. */
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

  private String nextRequest() {
    return "r" + ++requests;
  }
}
