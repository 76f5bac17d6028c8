package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;

/**
 * A script that ran but whose reply was lost is retried; the retry must not apply it twice.
 * The proxy makes that happen for real: Redis runs the request, the reply never arrives.
 */
class IdempotenceTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private FaultProxy proxy;
  private LockClient client;
  private String field;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    proxy = new FaultProxy(redis.server().port());
    client = clients.create(Map.of("holdfast.redis.address", proxy.uri(),
        "holdfast.redis.timeout", "300ms"));
    field = client.getClientId() + ":" + Thread.currentThread().getId();
  }

  @AfterEach
  void tearDown() {
    proxy.close();
  }

  @Test
  void reentrantAcquire_whoseReplyIsLost_countsOnce() {
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    long scriptsBefore = scriptCalls();
    proxy.dropReplies(1);
    lock.lock();
    assertEquals(0, proxy.pendingDrops());
    long ran = scriptCalls() - scriptsBefore;
    assertTrue(ran >= 2, "the script really ran twice, but ran " + ran + " times");
    assertEquals("2", hold("retried"), "a replay must not count as a third hold");
    lock.unlock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @Test
  void firstAcquire_whoseReplyIsLost_countsOnce() {
    DistributedLock lock = client.getLock("retried");
    proxy.dropReplies(1);
    lock.lock(5, TimeUnit.SECONDS);
    assertEquals("1", hold("retried"));
    lock.unlock();
    assertFalse(lock.isLocked(), "one unlock releases a lock taken once");
  }

  @Test
  void release_whoseReplyIsLost_decrementsOnce() {
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    lock.lock();
    proxy.dropReplies(1);
    lock.unlock();
    assertEquals("1", hold("retried"), "a replayed decrement would have freed the lock");
    proxy.dropReplies(1);
    lock.unlock(); // the replay finds the key deleted by its first run: not an error
    assertFalse(lock.isLocked());
    assertTrue(Clients.engine(client).holds().isEmpty());
  }

  @Test
  void tryLock_whoseRepliesAreAllLost_failsAndTakesItsHoldBack() {
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    LockException e = assertThrows(LockException.class, lock::tryLock);
    assertTrue(e.getMessage().contains("acquire"), e.getMessage());
    assertEquals("1", hold("retried"), "the failed acquisition was settled: no extra hold");
    lock.unlock();
    assertFalse(lock.isLocked());
    assertTrue(Clients.engine(client).holds().isEmpty());
  }

  @Test
  void lock_whoseRepliesAreAllLost_resendsTheSameRequestAndCountsOnce() {
    DistributedLock lock = client.getLock("retried");
    lock.lock();
    proxy.dropReplies(RedisTopology.ATTEMPTS + 1);
    lock.lock(); // a waiting call rides out the silence, re-sending one sealed request
    assertEquals(0, proxy.pendingDrops());
    assertEquals("2", hold("retried"));
    lock.unlock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @Test
  void acquire_replayedAfterClientPause_countsOnce() {
    LockClient direct = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.redis.timeout", "200ms"));
    DistributedLock lock = direct.getLock("paused");
    lock.lock();
    try (Jedis jedis = redis.server().admin()) {
      // Writes (and scripts) wait 450 ms: longer than two socket timeouts.
      jedis.sendCommand(Protocol.Command.CLIENT, "PAUSE", "450", "WRITE");
    }
    lock.lock();
    String directField = direct.getClientId() + ":" + Thread.currentThread().getId();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals("2", jedis.hget("paused", directField));
    }
    lock.unlock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @Test
  void scripts_replayedByHand_areAnsweredNotApplied() {
    LockEngine engine = Clients.engine(client);
    RedisTopology topology = engine.topology();
    List<String> acquireKeys = List.of("manual", "holdfast_unlock_marker:{manual}:a1");
    List<String> firstAcquire = List.of("10000", field, "0", "0", "60000");
    assertEquals(List.of(1L, 1L, 10000L, 0L), topology.eval(LockScripts.ACQUIRE, acquireKeys,
        firstAcquire));
    assertEquals(List.of(1L, 1L, 10000L, 0L), topology.eval(LockScripts.ACQUIRE, acquireKeys,
        firstAcquire));
    List<String> reentryKeys = List.of("manual", "holdfast_unlock_marker:{manual}:a2");
    List<String> reentry = List.of("10000", field, "1", "0", "60000");
    assertEquals(2L, ((List<?>) topology.eval(LockScripts.ACQUIRE, reentryKeys, reentry)).get(1));
    assertEquals(2L, ((List<?>) topology.eval(LockScripts.ACQUIRE, reentryKeys, reentry)).get(1));
    List<String> release = List.of("manual", "holdfast_unlock_marker:{manual}:r1");
    String channel = "redisson_lock__channel:{manual}";
    List<String> fromTwo = List.of(field, "10000", "2", "publish", "5000", channel, "0");
    assertEquals(1L, topology.eval(LockScripts.RELEASE, release, fromTwo));
    assertEquals(1L, topology.eval(LockScripts.RELEASE, release, fromTwo));
    List<String> finalRelease = List.of("manual", "holdfast_unlock_marker:{manual}:r2");
    List<String> fromOne = List.of(field, "10000", "1", "publish", "5000", channel, "0");
    assertEquals(0L, topology.eval(LockScripts.RELEASE, finalRelease, fromOne));
    assertEquals(0L, topology.eval(LockScripts.RELEASE, finalRelease, fromOne));
    List<String> otherRequest = List.of("manual", "holdfast_unlock_marker:{manual}:r3");
    assertEquals(-1L, topology.eval(LockScripts.RELEASE, otherRequest, fromOne),
        "a new release of a lock not held is refused");
    assertEquals(List.of(-1L, 0L, 0L, 0L), topology.eval(LockScripts.ACQUIRE,
        List.of("manual", "holdfast_unlock_marker:{manual}:a3"), reentry),
        "a re-entry whose hold is gone is refused, not turned into a new hold");
  }

  @Test
  void settledRequest_arrivingLate_isRefused() {
    LockEngine engine = Clients.engine(client);
    RedisTopology topology = engine.topology();
    List<String> keys = List.of("late", "holdfast_unlock_marker:{late}:a1");
    LockNames names = LockNames.of("", "late");
    assertEquals(List.of(0L, ""), engine.resolve(names, field, "a1", 0, "acquire", 1),
        "nothing to undo: the request never ran");
    assertEquals(List.of(-3L, 0L, 0L, 0L), topology.eval(LockScripts.ACQUIRE, keys,
        List.of("10000", field, "0", "0", "60000")), "a copy arriving after settling is refused");
    try (Jedis jedis = redis.server().admin()) {
      assertFalse(jedis.exists("late"));
    }
  }

  private String hold(String key) {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.hget(key, field);
    }
  }

  private long scriptCalls() {
    try (Jedis jedis = redis.server().admin()) {
      String stats = jedis.info("commandstats");
      long calls = 0;
      for (String line : stats.split("\r?\n")) {
        if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
          String count = line.replaceAll("^cmdstat_\\w+:calls=(\\d+),.*", "$1");
          calls += Long.parseLong(count);
        }
      }
      return calls;
    }
  }
}
