package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * The fair scripts keep the hold protocol's promises for the queue too: a re-sent request
 * enqueues once, a settled one leaves the queue and is refused if a copy arrives late, and
 * settling a grant that freed the lock wakes the next waiter.
 */
class FairLockIdempotenceTest {
  private static final String QUEUE = "redisson_lock_queue:{fair}";
  private static final String CHANNEL = "redisson_lock__channel:{fair}";

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private FaultProxy proxy;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    proxy = new FaultProxy(redis.server().port());
  }

  @AfterEach
  void tearDown() {
    threads.shutdownNow();
    proxy.close();
  }

  private static List<String> queue() {
    try (Jedis jedis = redis.server().admin()) {
      return jedis.lrange(QUEUE, 0, -1);
    }
  }

  private static List<String> keys(String request) {
    return List.of("fair", "holdfast_unlock_marker:{fair}:" + request, "holdfast_fence:{fair}",
        QUEUE, "redisson_lock_timeout:{fair}");
  }

  /** ACQUIRE's arguments for a fresh acquisition by {@code field}, then the fair extras. */
  private static List<String> fresh(String field, boolean sealed) {
    return List.of("10000", field, "0", sealed ? "1" : "0", "60000", "0", "60000", "60000",
        "publish", CHANNEL);
  }

  @Test
  void waitingAcquisition_resentSealed_enqueuesOnce_andSettlingLeavesTheQueue() {
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
    LockEngine engine = Clients.engine(client);
    RedisTopology topology = engine.topology();
    try (Jedis jedis = redis.server().admin()) {
      jedis.hset("fair", "holder:1", "1");
      jedis.pexpire("fair", 30_000);
    }
    List<?> first = (List<?>) topology.eval(LockScripts.FAIR_ACQUIRE, keys("a1"),
        fresh("me:1", false));
    List<?> resent = (List<?>) topology.eval(LockScripts.FAIR_ACQUIRE, keys("a1"),
        fresh("me:1", true));
    assertEquals(0L, first.get(0));
    assertEquals(0L, resent.get(0));
    assertEquals(List.of("me:1"), queue(), "one entry for one waiter");

    LockNames names = LockNames.of("", "fair", FairKind.INSTANCE);
    engine.resolve(names, "me:1", "a1", 0, "acquire", 1);
    assertEquals(List.of(), queue(), "settling an acquisition takes it out of the queue");
    assertEquals(List.of(-3L, 0L, 0L, 0L), topology.eval(LockScripts.FAIR_ACQUIRE, keys("a1"),
        fresh("me:1", true)), "a late copy is refused");
    assertEquals(List.of(), queue(), "and does not enqueue");
  }

  @Test
  void grantedAcquisition_resent_grantsOnce_andSettlingItWakesTheNextWaiter() throws Exception {
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.fair.waiter-timeout", "60s")); // its waiter parks 20s unless woken
    LockEngine engine = Clients.engine(client);
    RedisTopology topology = engine.topology();
    assertEquals(1L, ((List<?>) topology.eval(LockScripts.FAIR_ACQUIRE, keys("g1"),
        fresh("me:1", false))).get(0));
    assertEquals(List.of(1L, 1L, 10000L, 0L), topology.eval(LockScripts.FAIR_ACQUIRE,
        keys("g1"), fresh("me:1", true)), "the copy finds its own grant: count 1, not 2");

    Future<Long> waiter = Waiters.acquireAndRelease(threads, client.getFairLock("fair"));
    Await.until(Duration.ofSeconds(10), () -> queue().size() == 1, "a waiter queued");
    String field = queue().get(0);
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        CHANNEL + ":" + field) > 0, "waiter subscribed");
    long settled = System.nanoTime();
    engine.resolve(LockNames.of("", "fair", FairKind.INSTANCE), "me:1", "g1", 0, "acquire", 1);
    long latency = Waiters.millisUntilAcquired(waiter, settled);
    assertTrue(latency < 2_000, "the undone grant woke the head waiter: " + latency + "ms");
    assertEquals(List.of(), queue());
  }

  @Test
  void fairLock_whoseRepliesAreLost_countsOnce_andLeavesNoQueueEntry() throws Exception {
    LockClient direct = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
    LockClient proxied = clients.create(Map.of("holdfast.redis.address", proxy.uri(),
        "holdfast.redis.timeout", "300ms"));
    DistributedLock lock = proxied.getFairLock("fair");
    proxy.dropReplies(1);
    lock.lock();
    assertEquals(1, lock.getHoldCount());
    lock.unlock();
    assertFalse(lock.isLocked());

    DistributedLock holder = direct.getFairLock("fair");
    holder.lock();
    proxy.dropReplies(2);
    assertFalse(lock.tryLock(1_500, TimeUnit.MILLISECONDS));
    assertEquals(List.of(), queue(), "the waiter left the queue after its silent attempts");
    holder.unlock();
    assertTrue(lock.tryLock());
    lock.unlock();
  }
}
