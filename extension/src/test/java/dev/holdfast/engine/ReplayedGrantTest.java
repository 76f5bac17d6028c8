package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * Issue 15, hole 2, through the client: an acquisition whose first attempt and sealed retry both
 * ran but went unanswered, whose grant then ran out, while another client acquired, must not be
 * told "granted" by the re-send that finally gets through — it goes on waiting as a new attempt.
 * The client under test talks through a {@link BlackHoleProxy}; the rival talks to Redis directly.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ReplayedGrantTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  /** The client's wait: long enough for the faults and one re-send after them. */
  private static final long WAIT_MS = 4_000;

  private BlackHoleProxy proxy;
  private RedisProbe redisState;
  private LockClient client;
  private LockClient rival;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    redisState = new RedisProbe(redis.server());
    proxy = new BlackHoleProxy(redis.server().port());
    client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    rival = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
  }

  @AfterEach
  void tearDown() {
    proxy.close();
  }

  @Test
  void exclusive_grantReplayedAfterItRanOut_isNotTrusted() throws Exception {
    replayedAfterRivalAcquired(c -> c.getLock("contested"), c -> c.getLock("contested"), "");
  }

  @Test
  void fair_grantReplayedAfterItRanOut_isNotTrusted() throws Exception {
    replayedAfterRivalAcquired(c -> c.getFairLock("contested"), c -> c.getFairLock("contested"),
        "");
  }

  @Test
  void read_grantReplayedAfterItRanOut_isNotTrusted() throws Exception {
    replayedAfterRivalAcquired(c -> c.getReadWriteLock("contested").readLock(),
        c -> c.getReadWriteLock("contested").writeLock(), "");
  }

  @Test
  void write_grantReplayedAfterItRanOut_isNotTrusted() throws Exception {
    replayedAfterRivalAcquired(c -> c.getReadWriteLock("contested").writeLock(),
        c -> c.getReadWriteLock("contested").writeLock(), ":write");
  }

  @Test
  void fenced_grantReplayedAfterItRanOut_neverSharesTheRivalsToken() throws Exception {
    warmUp(client.getFencedLock("warm-up"));
    FencedLock lock = client.getFencedLock("contested");
    FencedLock other = rival.getFencedLock("contested");
    proxy.runNextScriptsThenBlackHole(2);
    Long[] token = new Long[1];
    Thread caller = new Thread(() -> {
      try {
        token[0] = lock.tryLockAndGetToken(WAIT_MS, 10_000, MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Long rivalToken = expireAndLetRivalIn("contested", () -> other.tryLockAndGetToken());
    caller.join();
    assertNull(token[0], "the replayed grant was trusted: the client got token " + token[0]
        + " while the rival holds token " + rivalToken);
    other.unlock();
    long next = lock.lockAndGetToken();
    assertTrue(next > rivalToken, "a later grant has a larger token: " + next + " after "
        + rivalToken);
    lock.unlock();
  }

  @Test
  void grantReplayedWhileStillHeld_isBelievedNoLongerThanRedisKeepsIt() throws Exception {
    warmUp(client.getLock("contested"));
    DistributedLock lock = client.getLock("contested");
    proxy.runNextScriptsThenBlackHole(2);
    long[] believedFor = new long[2];
    Thread caller = new Thread(() -> {
      try {
        if (lock.tryLock(WAIT_MS, 10_000, MILLISECONDS)) {
          Hold hold = Clients.engine(client).holds().get(
              new Hold.Id("contested", Thread.currentThread().getId()));
          believedFor[0] = hold.confirmedUntil() - System.nanoTime();
          long pttl = redisState.pttl("contested");
          believedFor[1] = TimeUnit.MILLISECONDS.toNanos(pttl);
          lock.unlock();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Await.until(Duration.ofSeconds(10), () -> proxy.blackHoled() && grantMarkerExists("contested"),
        "the first attempt and its sealed retry ran unanswered");
    try (Jedis jedis = redis.server().admin()) {
      jedis.pexpire("contested", 2_000); // the grant's time is running out meanwhile
    }
    proxy.blackHole(false);
    caller.join();
    assertTrue(believedFor[1] > 0, "the re-send was answered: granted");
    assertTrue(believedFor[0] <= believedFor[1], "believed for "
        + MILLISECONDS.convert(believedFor[0], TimeUnit.NANOSECONDS) + " ms more while Redis "
        + "keeps the key " + MILLISECONDS.convert(believedFor[1], TimeUnit.NANOSECONDS) + " ms");
  }

  /**
   * Soak standalone -4693406884787565169 {@code [fencing]}: a fenced {@code lock(1126ms)}
   * returned "acquired" with no token, and the hold was reported lost 0.7 ms later. The grant
   * was a replay: a re-send answered {@code d:1:<token>} with the TTL the hold had left, and
   * that answer came when the time was over — the client returned a hold it no longer believed
   * ({@code getToken()} is null for such a hold). Here the attempt's first send and its sealed
   * re-send run with their replies lost (connection dropped), the grant then has 1.5 s left, and
   * the third send's answer (the replay) is delivered only after the grant ran out. The call
   * must not return that grant; it acquires afresh, with a new, greater token, and nothing is
   * reported lost.
   */
  @Test
  void fenced_grantReplayedAfterItsTimeWasUp_isNotReturned_aFreshGrantIs() throws Exception {
    LockClient patient = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "10s"));
    LossRecorder lost = LossRecorder.on(patient);
    FencedLock lock = patient.getFencedLock("contested");
    warmUp(lock);
    proxy.holdScriptReplies(true);
    Long[] token = new Long[1];
    boolean[] held = new boolean[1];
    Thread caller = new Thread(() -> {
      try {
        if (lock.tryLock(30_000, 10_000, MILLISECONDS)) {
          token[0] = lock.getToken();
          held[0] = lock.isHeldByCurrentThread();
          lock.unlock();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 1,
        "the first send ran, its reply held");
    proxy.cutHeldReplies();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 2
        && grantMarkerExists("contested"), "the sealed re-send granted it, its reply held");
    long replayedToken;
    try (Jedis jedis = redis.server().admin()) {
      String marker = jedis.keys("holdfast_unlock_marker:{contested}:*").stream()
          .map(jedis::get).filter(v -> v != null && v.startsWith("d:1:")).findFirst()
          .orElseThrow();
      replayedToken = Long.parseLong(marker.substring("d:1:".length()));
      jedis.pexpire("contested", 1_500); // the grant has little time left
    }
    proxy.cutHeldReplies();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 3,
        "the next re-send replayed the grant, its reply held");
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("contested"),
        "the replayed grant ran out");
    proxy.holdScriptReplies(false);
    caller.join();
    assertNotNull(token[0], "acquired with a fencing token (a replay answered too late "
        + "returned a hold no longer believed, which has none)");
    assertTrue(held[0], "the thread holds it");
    assertTrue(token[0] > replayedToken, "a fresh grant's token " + token[0] + " is greater than "
        + "the replayed one " + replayedToken);
    assertEquals(0, lost.count(), "nothing was reported lost: " + lost);
  }

  /**
   * The same with a fresh grant (CI replay of seed -4693406884787565169, {@code [fencing]} on a
   * {@code tryLock(579ms,1296ms)}): the first send ran with its reply lost, the sealed re-send
   * took the leftover afresh (a full lease) — but a lease counts from the request's first send,
   * and the answer came only after the key had expired. Not returned; acquired afresh.
   */
  @Test
  void fenced_reSentGrantAnsweredAfterItsTimeWasUp_isNotReturned_aFreshGrantIs()
      throws Exception {
    LockClient patient = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "10s"));
    LossRecorder lost = LossRecorder.on(patient);
    FencedLock lock = patient.getFencedLock("contested");
    warmUp(lock);
    proxy.holdScriptReplies(true);
    Long[] token = new Long[1];
    Thread caller = new Thread(() -> {
      try {
        if (lock.tryLock(30_000, 1_500, MILLISECONDS)) {
          token[0] = lock.getToken();
          lock.unlock();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 1,
        "the first send ran, its reply held");
    proxy.cutHeldReplies();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 2
        && grantMarkerExists("contested"), "the sealed re-send granted it, its reply held");
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("contested"),
        "the grant's lease ran out");
    proxy.holdScriptReplies(false);
    caller.join();
    assertNotNull(token[0], "acquired with a fencing token");
    assertEquals(0, lost.count(), "nothing was reported lost: " + lost);
  }

  /**
   * The client acquires {@code name} "contested" (fixed lease 10 s, waiting up to
   * {@link #WAIT_MS}); its first attempt and the sealed retry run unanswered; the grant is then
   * ended (as if its lease ran out) and the rival acquires; only then does a re-send get through.
   * The client must not acquire while the rival holds.
   */
  private void replayedAfterRivalAcquired(Function<LockClient, DistributedLock> ours,
      Function<LockClient, DistributedLock> theirs, String fieldSuffix) throws Exception {
    warmUp(ours.apply(client));
    DistributedLock lock = ours.apply(client);
    DistributedLock other = theirs.apply(rival);
    proxy.runNextScriptsThenBlackHole(2);
    boolean[] acquired = new boolean[1];
    String[] field = new String[1];
    Thread caller = new Thread(() -> {
      field[0] = RedisProbe.fieldOf(client) + fieldSuffix;
      try {
        acquired[0] = lock.tryLock(WAIT_MS, 10_000, MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    expireAndLetRivalIn("contested", () -> other.tryLock() ? Boolean.TRUE : null);
    caller.join();
    assertFalse(acquired[0], "the replayed grant was trusted while another client holds the lock");
    assertNull(redisState.hget("contested", field[0]), "the client has no field in Redis");
    assertTrue(other.isHeldByCurrentThread());
    other.unlock();
    assertTrue(lock.tryLock(5, SECONDS), "acquired afresh once the rival is gone");
    lock.unlock();
  }

  /**
   * Waits until the client's sealed retry ran (its {@code d:} marker is in Redis and the link is
   * black), ends that grant, lets the rival acquire, and opens the link again.
   */
  private <T> T expireAndLetRivalIn(String key, java.util.function.Supplier<T> rivalAcquires) {
    Await.until(Duration.ofSeconds(10), () -> proxy.blackHoled() && grantMarkerExists(key),
        "the first attempt and its sealed retry ran unanswered");
    try (Jedis jedis = redis.server().admin()) {
      jedis.del(key);
      for (String k : jedis.keys("{" + key + "}:*rwlock_timeout*")) {
        jedis.del(k);
      }
    }
    T value = Await.value(Duration.ofSeconds(5), rivalAcquires, "the rival acquires");
    assertNotNull(value);
    long before = redisState.scriptCalls();
    proxy.blackHole(false);
    Await.until(Duration.ofSeconds(5), () -> redisState.scriptCalls() > before,
        "the client's re-send reached Redis");
    return value;
  }

  private boolean grantMarkerExists(String key) {
    try (Jedis jedis = redis.server().admin()) {
      for (String marker : jedis.keys("holdfast_unlock_marker:{" + key + "}:*")) {
        String value = jedis.get(marker);
        if (value != null && value.startsWith("d:1")) {
          return true;
        }
      }
      return false;
    }
  }

  /** Loads the scripts through the proxy: a swallowed NOSCRIPT would mean nothing ran. */
  private static void warmUp(DistributedLock lock) {
    lock.lock();
    lock.unlock();
  }
}
