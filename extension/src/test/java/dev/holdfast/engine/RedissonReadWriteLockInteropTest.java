package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.Jedis;

/**
 * Holdfast's read-write lock and Redisson 4.7's {@code RReadWriteLock} on the same name: writers
 * exclude each other and readers of the other library, readers share, and each library's unlock
 * wakes the other's waiters.
 */
class RedissonReadWriteLockInteropTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedissonClient redisson;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  /** Redisson's locks are per thread: its holder locks and unlocks on this one thread. */
  private final ExecutorService redissonHolder = Executors.newSingleThreadExecutor();
  private LockClient holdfast;

  @BeforeAll
  static void startRedisson() {
    Config config = new Config();
    config.useSingleServer().setAddress(redis.server().uri());
    redisson = Redisson.create(config);
  }

  @AfterAll
  static void stopRedisson() {
    redisson.shutdown();
  }

  @BeforeEach
  void setUp() {
    redis.flushAll();
    holdfast = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
    redissonHolder.shutdownNow();
  }

  private <T> T onRedissonHolder(Callable<T> task) throws Exception {
    return redissonHolder.submit(task).get(10, TimeUnit.SECONDS);
  }

  private <T> T inOtherThread(Callable<T> task) throws Exception {
    return threads.submit(task).get(10, TimeUnit.SECONDS);
  }

  @Test
  void holdfastWriter_excludesRedisson_andItsUnlockWakesRedissonReaders() throws Exception {
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("shared");
    ours.writeLock().lock();
    RReadWriteLock theirs = redisson.getReadWriteLock("shared");
    assertFalse(inOtherThread(() -> theirs.readLock().tryLock()));
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()));
    assertTrue(theirs.writeLock().isLocked());
    Future<Long> first = Waiters.acquireAndRelease(threads, theirs.readLock());
    Future<Long> second = Waiters.acquireAndRelease(threads, theirs.readLock());
    awaitSubscriber();
    long released = System.nanoTime();
    ours.writeLock().unlock();
    assertTrue(Waiters.millisUntilAcquired(first, released) < 2_000, "woken by our message");
    assertTrue(Waiters.millisUntilAcquired(second, released) < 2_000, "all readers woken");
  }

  @Test
  void holdfastReader_excludesRedissonWriter_andItsUnlockWakesIt() throws Exception {
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("shared");
    ours.readLock().lock();
    RReadWriteLock theirs = redisson.getReadWriteLock("shared");
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()));
    Future<Long> writer = Waiters.acquireAndRelease(threads, theirs.writeLock());
    awaitSubscriber();
    long released = System.nanoTime();
    ours.readLock().unlock();
    assertTrue(Waiters.millisUntilAcquired(writer, released) < 2_000, "woken by our message");
  }

  @Test
  void redissonWriter_excludesHoldfast_andItsUnlockWakesHoldfastWaiters() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("shared");
    onRedissonHolder(() -> {
      theirs.writeLock().lock();
      return null;
    });
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("shared");
    assertFalse(ours.readLock().tryLock());
    assertFalse(ours.writeLock().tryLock());
    assertTrue(ours.writeLock().isLocked());
    Future<Long> reader = Waiters.acquireAndRelease(threads, ours.readLock());
    Future<Long> otherReader = Waiters.acquireAndRelease(threads, ours.readLock());
    awaitSubscriber();
    long released = System.nanoTime();
    onRedissonHolder(() -> {
      theirs.writeLock().unlock();
      return null;
    });
    assertTrue(Waiters.millisUntilAcquired(reader, released) < 2_000, "woken by its message");
    assertTrue(Waiters.millisUntilAcquired(otherReader, released) < 2_000, "all woken");
  }

  @Test
  void redissonReader_excludesHoldfastWriter_andItsUnlockWakesIt() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("shared");
    onRedissonHolder(() -> {
      theirs.readLock().lock();
      return null;
    });
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("shared");
    assertFalse(ours.writeLock().tryLock());
    assertTrue(ours.readLock().isLocked());
    Future<Long> writer = Waiters.acquireAndRelease(threads, ours.writeLock());
    awaitSubscriber();
    long released = System.nanoTime();
    onRedissonHolder(() -> {
      theirs.readLock().unlock();
      return null;
    });
    assertTrue(Waiters.millisUntilAcquired(writer, released) < 2_000, "woken by its message");
  }

  @Test
  void readersOfBothLibraries_shareTheLock_andTheLastToLeaveFreesIt() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("shared");
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("shared");
    ours.readLock().lock();
    assertTrue(onRedissonHolder(() -> theirs.readLock().tryLock()), "Redisson joins our read");
    try (Jedis jedis = redis.server().admin()) {
      Map<String, String> hash = jedis.hgetAll("shared");
      assertEquals("read", hash.get("mode"));
      assertEquals(3, hash.size(), "mode and two readers: " + hash);
    }
    Future<Long> writer = Waiters.acquireAndRelease(threads, ours.writeLock());
    awaitSubscriber();
    ours.readLock().unlock();
    try (Jedis jedis = redis.server().admin()) {
      long pttl = jedis.pttl("shared");
      assertTrue(pttl > 20_000, "the Redisson reader's lease keeps the lock: " + pttl);
    }
    assertFalse(writer.isDone(), "the Redisson reader still holds it");
    long released = System.nanoTime();
    onRedissonHolder(() -> {
      theirs.readLock().unlock();
      return null;
    });
    assertTrue(Waiters.millisUntilAcquired(writer, released) < 2_000);

    // And the other way round: Redisson reads first, Holdfast joins and leaves last.
    assertTrue(onRedissonHolder(() -> theirs.readLock().tryLock()));
    assertTrue(ours.readLock().tryLock(), "we join Redisson's read");
    onRedissonHolder(() -> {
      theirs.readLock().unlock();
      return null;
    });
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()), "our reader still holds it");
    ours.readLock().unlock();
    assertTrue(onRedissonHolder(() -> {
      boolean got = theirs.writeLock().tryLock();
      theirs.writeLock().unlock();
      return got;
    }));
  }

  @Test
  void redissonDowngrade_andOurs_leaveTheSameLayout() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("theirs");
    onRedissonHolder(() -> {
      theirs.writeLock().lock();
      theirs.readLock().lock();
      return null;
    });
    DistributedReadWriteLock ours = holdfast.getReadWriteLock("ours");
    ours.writeLock().lock();
    ours.readLock().lock();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(shape(jedis.hgetAll("theirs")), shape(jedis.hgetAll("ours")));
      String theirField = jedis.hkeys("theirs").stream().filter(f -> f.matches(".*:\\d+"))
          .findFirst().orElseThrow();
      assertTrue(jedis.exists("{theirs}:" + theirField + ":rwlock_timeout:1"));
    }
    ours.writeLock().unlock();
    onRedissonHolder(() -> {
      theirs.writeLock().unlock();
      return null;
    });
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(shape(jedis.hgetAll("theirs")), shape(jedis.hgetAll("ours")));
      assertEquals("read", jedis.hget("ours", "mode"));
    }
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()));
    assertFalse(inOtherThread(() -> redisson.getReadWriteLock("ours").writeLock().tryLock()),
        "Redisson sees our downgraded read lock");
  }

  /** A hash's fields with ids and thread numbers blanked out. */
  private static Map<String, String> shape(Map<String, String> hash) {
    Map<String, String> shape = new java.util.TreeMap<>();
    hash.forEach((k, v) -> shape.put(k.replaceAll("^[0-9a-f-]{36}:\\d+", "ID"), v));
    return shape;
  }

  private void awaitSubscriber() {
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_rwlock:{shared}") > 0, "waiter subscribed to the lock channel");
  }
}
