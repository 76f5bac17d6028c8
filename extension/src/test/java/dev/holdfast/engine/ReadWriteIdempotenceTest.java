package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * Read-write lock calls whose replies are lost (the proxy drops them after Redis ran the call):
 * re-sent sealed, they apply once; settled, they are undone with their timeout keys.
 */
class ReadWriteIdempotenceTest {

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
  void readReentry_whoseReplyIsLost_countsOnce_withOneTimeoutKeyPerSection() {
    DistributedLock read = client.getReadWriteLock("retried").readLock();
    read.lock();
    proxy.dropReplies(1);
    read.lock();
    assertEquals(0, proxy.pendingDrops());
    try (Jedis jedis = redis.server().admin()) {
      assertEquals("2", jedis.hget("retried", field), "a replay must not count a third hold");
      assertTrue(jedis.exists("{retried}:" + field + ":rwlock_timeout:2"));
      assertFalse(jedis.exists("{retried}:" + field + ":rwlock_timeout:3"));
    }
    proxy.dropReplies(1);
    read.unlock();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals("1", jedis.hget("retried", field), "a replayed release applies once");
    }
    read.unlock();
    assertFalse(read.isLocked());
  }

  @Test
  void writeReentry_whoseReplyIsLost_countsOnce() {
    DistributedLock write = client.getReadWriteLock("retried").writeLock();
    write.lock();
    proxy.dropReplies(1);
    write.lock();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals("2", jedis.hget("retried", field + ":write"));
    }
    write.unlock();
    write.unlock();
    assertFalse(write.isLocked());
  }

  @Test
  void tryLock_whoseRepliesAreAllLost_failsAndTakesItsSectionBack() {
    DistributedReadWriteLock rw = client.getReadWriteLock("retried");
    rw.readLock().lock();
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    LockException e = assertThrows(LockException.class, rw.readLock()::tryLock);
    assertTrue(e.getMessage().contains("acquire"), e.getMessage());
    try (Jedis jedis = redis.server().admin()) {
      assertEquals("1", jedis.hget("retried", field), "settled: no extra hold");
      assertFalse(jedis.exists("{retried}:" + field + ":rwlock_timeout:2"),
          "and no timeout key of the undone section");
    }
    rw.readLock().unlock();
    assertFalse(rw.readLock().isLocked());
    assertTrue(Clients.engine(client).holds().isEmpty());
  }
}
