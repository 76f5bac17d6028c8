package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** The read-write lock's rules against one real redis-server. */
class ReadWriteLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private Map<String, String> config;
  private LockClient client;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    config = Map.of("holdfast.redis.address", redis.server().uri());
    client = clients.create(config);
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private <T> T inOtherThread(Callable<T> task) throws Exception {
    return threads.submit(task).get(10, TimeUnit.SECONDS);
  }

  private Jedis admin() {
    return redis.server().admin();
  }

  private static String field(LockClient c) {
    return c.getClientId() + ":" + Thread.currentThread().getId();
  }

  private static String timeoutKey(String key, String field, int n) {
    return "{" + key + "}:" + field + ":rwlock_timeout:" + n;
  }

  @Test
  void readers_ofTwoClients_holdAtOnce_inRedissonsLayout() throws Exception {
    LockClient other = clients.create(config);
    DistributedReadWriteLock ours = client.getReadWriteLock("prices");
    ours.readLock().lock();
    String theirField = inOtherThread(() -> {
      assertTrue(other.getReadWriteLock("prices").readLock().tryLock());
      return field(other);
    });
    try (Jedis jedis = admin()) {
      assertEquals(Map.of("mode", "read", field(client), "1", theirField, "1"),
          jedis.hgetAll("prices"));
      long mine = jedis.pttl(timeoutKey("prices", field(client), 1));
      long theirs = jedis.pttl(timeoutKey("prices", theirField, 1));
      assertTrue(mine > 25_000 && theirs > 25_000, "each reader's own lease: " + mine + ", "
          + theirs);
      assertTrue(jedis.pttl("prices") >= Math.max(mine, theirs) - 1_000);
    }
    assertTrue(ours.readLock().isLocked());
    assertFalse(ours.writeLock().isLocked());
    assertTrue(ours.readLock().isHeldByCurrentThread());
    assertFalse(ours.writeLock().isHeldByCurrentThread());
    ours.readLock().unlock();
    try (Jedis jedis = admin()) {
      assertEquals(Map.of("mode", "read", theirField, "1"), jedis.hgetAll("prices"),
          "the other reader still holds it");
      assertFalse(jedis.exists(timeoutKey("prices", field(client), 1)));
    }
  }

  @Test
  void writer_isExcludedByReader_andWokenWhenTheLastReaderLeaves() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("doc");
    rw.readLock().lock();
    DistributedReadWriteLock theirs = clients.create(config).getReadWriteLock("doc");
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()));
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock(300, TimeUnit.MILLISECONDS)));
    Future<Long> writer = Waiters.acquireAndRelease(threads, theirs.writeLock());
    awaitSubscriber("doc");
    long released = System.nanoTime();
    rw.readLock().unlock();
    long latency = Waiters.millisUntilAcquired(writer, released);
    assertTrue(latency < 2_000, "woken by the unlock message, not the 30 s lease: " + latency);
    assertFalse(rw.writeLock().isLocked());
  }

  @Test
  void readers_areExcludedByWriter_andAllWakeWhenItUnlocks() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("doc");
    rw.writeLock().lock();
    DistributedReadWriteLock theirs = clients.create(config).getReadWriteLock("doc");
    assertFalse(inOtherThread(() -> theirs.readLock().tryLock()));
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()));
    int readers = 3;
    CountDownLatch allIn = new CountDownLatch(readers);
    List<Future<Long>> waiting = new ArrayList<>();
    for (int i = 0; i < readers; i++) {
      waiting.add(threads.submit(() -> {
        theirs.readLock().lock();
        long at = System.nanoTime();
        allIn.countDown();
        // Holding until every reader is in proves they read at once.
        boolean together = allIn.await(10, TimeUnit.SECONDS);
        theirs.readLock().unlock();
        return together ? at : Long.MIN_VALUE;
      }));
    }
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(admin(),
        "redisson_rwlock:{doc}") > 0,
        "readers subscribed");
    long released = System.nanoTime();
    rw.writeLock().unlock();
    for (Future<Long> reader : waiting) {
      long at = reader.get(20, TimeUnit.SECONDS);
      assertTrue(at != Long.MIN_VALUE, "the readers held the lock together");
      long latency = TimeUnit.NANOSECONDS.toMillis(at - released);
      assertTrue(latency < 2_000, "every reader woken by the write unlock: " + latency);
    }
  }

  @Test
  void bothSides_areReentrant_withCountsAndTimeoutKeysPerSection() {
    DistributedReadWriteLock rw = client.getReadWriteLock("counts");
    DistributedLock read = rw.readLock();
    read.lock();
    read.lock(10, TimeUnit.SECONDS);
    assertTrue(read.tryLock());
    assertEquals(3, read.getHoldCount());
    try (Jedis jedis = admin()) {
      assertEquals("3", jedis.hget("counts", field(client)));
      long second = jedis.pttl(timeoutKey("counts", field(client), 2));
      assertTrue(second > 8_000 && second <= 10_000, "section 2 has its own lease: " + second);
    }
    read.unlock();
    try (Jedis jedis = admin()) {
      assertFalse(jedis.exists(timeoutKey("counts", field(client), 3)), "newest section closed");
      assertTrue(jedis.exists(timeoutKey("counts", field(client), 2)));
    }
    read.unlock();
    read.unlock();
    assertEquals(0, read.getHoldCount());
    assertFalse(read.isLocked());

    DistributedLock write = client.getReadWriteLock("counts2").writeLock();
    write.lock();
    write.lock(10, TimeUnit.SECONDS);
    assertEquals(2, write.getHoldCount());
    try (Jedis jedis = admin()) {
      assertEquals(Map.of("mode", "write", field(client) + ":write", "2"),
          jedis.hgetAll("counts2"));
    }
    write.unlock();
    assertEquals(1, write.getHoldCount());
    assertTrue(write.isLocked());
    write.unlock();
    assertFalse(write.isLocked());
    try (Jedis jedis = admin()) {
      // A final release's marker stays a few seconds, by design: nothing else may.
      List<String> left = jedis.keys("*").stream()
          .filter(k -> !k.startsWith("holdfast_unlock_marker:")).toList();
      assertTrue(left.isEmpty(), "nothing left behind: " + left);
    }
    assertTrue(Clients.engine(client).holds().isEmpty(), "no hold left behind");
  }

  @Test
  void writeHolder_takesReadLock_andDowngradesByReleasingWrite() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("cfg");
    rw.writeLock().lock();
    rw.readLock().lock();
    assertTrue(rw.readLock().isLocked(), "read-held by the writer too, as Redisson says");
    DistributedReadWriteLock theirs = clients.create(config).getReadWriteLock("cfg");
    assertFalse(inOtherThread(() -> theirs.readLock().tryLock()), "still write mode");
    rw.writeLock().unlock();
    try (Jedis jedis = admin()) {
      assertEquals(Map.of("mode", "read", field(client), "1"), jedis.hgetAll("cfg"));
    }
    assertTrue(rw.readLock().isHeldByCurrentThread());
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()), "nobody writes in between");
    assertTrue(inOtherThread(() -> {
      boolean got = theirs.readLock().tryLock();
      theirs.readLock().unlock();
      return got;
    }), "other readers may join a downgraded lock");
    rw.readLock().unlock();
    try (Jedis jedis = admin()) {
      assertFalse(jedis.exists("cfg"));
    }
  }

  @Test
  void readHolder_askingForWriteLock_getsIllegalStateAtOnce() {
    DistributedReadWriteLock rw = client.getReadWriteLock("upgrade");
    rw.readLock().lock();
    Map<String, String> before;
    try (Jedis jedis = admin()) {
      before = jedis.hgetAll("upgrade");
    }
    long start = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> rw.writeLock().lock());
    assertThrows(IllegalStateException.class, () -> rw.writeLock().tryLock(5, TimeUnit.SECONDS));
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 1_000, "at once");
    assertTrue(e.getMessage().contains("'upgrade'") && e.getMessage().contains("unlock the read "
        + "lock first"), e.getMessage());
    try (Jedis jedis = admin()) {
      assertEquals(before, jedis.hgetAll("upgrade"), "Redis untouched");
    }
    assertEquals(1, rw.readLock().getHoldCount());
    rw.readLock().unlock();
    rw.writeLock().lock();
    rw.writeLock().unlock();
  }

  @Test
  void readHolder_tryingTheWriteLockWithoutWaiting_getsFalse_whileTheWaitingFormsThrow()
      throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("upgrade");
    rw.readLock().lock();
    Map<String, String> before;
    try (Jedis jedis = admin()) {
      before = jedis.hgetAll("upgrade");
    }
    // As ReentrantReadWriteLock: an attempt that does not wait cannot hang, it just fails.
    assertFalse(rw.writeLock().tryLock());
    assertFalse(rw.writeLock().tryLock(0, TimeUnit.SECONDS));
    assertFalse(rw.writeLock().tryLock(-1, TimeUnit.SECONDS));
    assertFalse(rw.writeLock().tryLock(0, 10, TimeUnit.SECONDS));
    assertThrows(IllegalStateException.class, () -> rw.writeLock().lock());
    assertThrows(IllegalStateException.class, () -> rw.writeLock().lockInterruptibly());
    assertThrows(IllegalStateException.class,
        () -> rw.writeLock().tryLock(1, TimeUnit.MILLISECONDS));
    assertThrows(IllegalStateException.class,
        () -> rw.writeLock().tryLock(1, 10, TimeUnit.SECONDS));
    try (Jedis jedis = admin()) {
      assertEquals(before, jedis.hgetAll("upgrade"), "Redis untouched");
    }
    assertFalse(rw.writeLock().isHeldByCurrentThread());
    assertEquals(1, rw.readLock().getHoldCount());
    rw.readLock().unlock();
    assertTrue(rw.writeLock().tryLock());
    rw.writeLock().unlock();
  }

  @Test
  void readHold_forceUnlockedOnTheSameClient_noLongerBlocksItsThreadsWriteLock()
      throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("lost-read");
    rw.readLock().lock();
    assertTrue(rw.readLock().forceUnlock());
    assertFalse(rw.readLock().isHeldByCurrentThread());
    assertEquals(0, rw.readLock().getHoldCount());

    assertTrue(rw.writeLock().tryLock(5, TimeUnit.SECONDS));
    assertTrue(rw.writeLock().isHeldByCurrentThread());
    rw.writeLock().unlock();
    rw.writeLock().lock();
    assertTrue(rw.writeLock().isHeldByCurrentThread());
    rw.writeLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock,
        "the lost read section still reports its loss");
    assertFalse(rw.writeLock().isLocked());
  }

  @Test
  void readHold_whoseFixedLeaseRanOut_noLongerBlocksItsThreadsWriteLock() throws Exception {
    LossRecorder losses = LossRecorder.on(client);
    DistributedReadWriteLock rw = client.getReadWriteLock("expired-read");
    rw.readLock().lock(300, TimeUnit.MILLISECONDS);
    losses.awaitFirst(Duration.ofSeconds(10), "read lease ran out");
    assertFalse(rw.readLock().isHeldByCurrentThread());
    assertEquals(0, rw.readLock().getHoldCount());

    rw.writeLock().lock();
    assertTrue(rw.writeLock().isHeldByCurrentThread());
    rw.writeLock().unlock();
    assertTrue(rw.writeLock().tryLock(5, TimeUnit.SECONDS));
    rw.writeLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock);
    assertFalse(rw.writeLock().isLocked());
  }

  @Test
  void readHold_pastItsFixedLeaseButNotYetReported_noLongerBlocksItsThreadsWriteLock()
      throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("expired-read");
    rw.readLock().lock(200, TimeUnit.MILLISECONDS);
    Await.until(Duration.ofSeconds(10), () -> {
      try (Jedis jedis = admin()) {
        return !jedis.exists("expired-read");
      }
    }, "read lease over in Redis");
    assertTrue(rw.writeLock().tryLock(5, TimeUnit.SECONDS));
    rw.writeLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock);
  }

  @Test
  void crashedReader_stopsBlockingWriter_whenItsLeaseEnds_whileLiveReaderKeepsItsOwn()
      throws Exception {
    LockClient crashing = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    LockClient writerClient = clients.create(config);
    String crashedField = inOtherThread(() -> {
      crashing.getReadWriteLock("shared").readLock().lock();
      return field(crashing);
    });
    DistributedReadWriteLock live = client.getReadWriteLock("shared");
    live.readLock().lock();
    crashing.close(); // no unlock: its renewals stop and its 600 ms lease runs out
    DistributedLock writer = writerClient.getReadWriteLock("shared").writeLock();
    assertFalse(inOtherThread(() -> writer.tryLock(1_500, TimeUnit.MILLISECONDS)),
        "the live reader still holds the lock");
    try (Jedis jedis = admin()) {
      assertNull(jedis.hget("shared", crashedField), "the writer removed the dead reader");
      long liveLease = jedis.pttl(timeoutKey("shared", field(client), 1));
      assertTrue(liveLease > 20_000, "the live reader keeps its own lease: " + liveLease);
      assertTrue(jedis.pttl("shared") > 20_000);
    }
    Future<Long> waiting = Waiters.acquireAndRelease(threads, writer);
    awaitSubscriber("shared");
    long released = System.nanoTime();
    live.readLock().unlock();
    assertTrue(Waiters.millisUntilAcquired(waiting, released) < 2_000);
  }

  @Test
  void crashedLastReader_freesTheLockForAWriter_withinItsLease() throws Exception {
    LockClient crashing = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    inOtherThread(() -> {
      crashing.getReadWriteLock("alone").readLock().lock();
      return null;
    });
    long crashed = System.nanoTime();
    crashing.close();
    DistributedLock writer = client.getReadWriteLock("alone").writeLock();
    assertTrue(writer.tryLock(10, TimeUnit.SECONDS));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - crashed);
    assertTrue(waited < 3_000, "within the crashed reader's 600 ms lease (+ slack): " + waited);
    writer.unlock();
  }

  @Test
  void waitingWriter_isToldWhenTheLockWillExpireSooner_andGetsItWhenACrashedReaderExpires()
      throws Exception {
    DistributedReadWriteLock live = client.getReadWriteLock("soon");
    live.readLock().lock(60, TimeUnit.SECONDS);
    LockClient crashing = clients.create(config, "holdfast.watchdog-timeout", "2s");
    inOtherThread(() -> {
      crashing.getReadWriteLock("soon").readLock().lock();
      return null;
    });
    DistributedLock writer = clients.create(config).getReadWriteLock("soon").writeLock();
    Future<Long> waiting = Waiters.acquireAndRelease(threads, writer); // parks up to 60 s
    awaitSubscriber("soon");
    crashing.close();
    long released = System.nanoTime();
    live.readLock().unlock(); // the crashed reader's lease (at most 2 s) is all that is left
    long latency = Waiters.millisUntilAcquired(waiting, released);
    assertTrue(latency < 8_000, "the writer waited for the crashed reader's 2 s lease, not the "
        + "60 s the lock had when it parked: " + latency);
  }

  @Test
  void shortLeaseReader_neverShortensLongLeaseReader() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("leases");
    rw.readLock().lock(60, TimeUnit.SECONDS);
    LockClient other = clients.create(config);
    DistributedReadWriteLock theirs = other.getReadWriteLock("leases");
    inOtherThread(() -> {
      theirs.readLock().lock(300, TimeUnit.MILLISECONDS);
      return null;
    });
    DistributedReadWriteLock third = clients.create(config).getReadWriteLock("leases");
    inOtherThread(() -> {
      // A second short reader that unlocks: its release recomputes the hash's lease.
      third.readLock().lock(200, TimeUnit.MILLISECONDS);
      third.readLock().unlock();
      return null;
    });
    try (Jedis jedis = admin()) {
      assertTrue(jedis.pttl("leases") > 55_000, "hash lives as long as the longest reader");
    }
    DistributedLock writer = clients.create(config).getReadWriteLock("leases").writeLock();
    assertFalse(inOtherThread(() -> writer.tryLock(1_000, TimeUnit.MILLISECONDS)),
        "the 60 s reader still holds it after the short one's lease ended");
    try (Jedis jedis = admin()) {
      long pttl = jedis.pttl("leases");
      assertTrue(pttl > 55_000, "not shortened: " + pttl);
      assertEquals(Map.of("mode", "read", field(client), "1"), jedis.hgetAll("leases"),
          "only the long reader is left");
    }
    assertTrue(rw.readLock().isHeldByCurrentThread());
    rw.readLock().unlock();
    assertTrue(inOtherThread(() -> {
      boolean got = writer.tryLock();
      writer.unlock();
      return got;
    }));
  }

  @Test
  void readHold_whoseTimeoutKeyIsDeleted_isReportedLost() throws Exception {
    LockClient fast = clients.create(config, "holdfast.watchdog-timeout", "600ms");
    LossRecorder losses = LossRecorder.on(fast);
    DistributedLock read = fast.getReadWriteLock("fragile").readLock();
    read.lock();
    try (Jedis jedis = admin()) {
      assertEquals(1, jedis.del(timeoutKey("fragile", field(fast), 1)));
    }
    LossRecorder.Report report = losses.awaitFirst(Duration.ofSeconds(5), "read hold");
    assertEquals("fragile", report.event().lockName());
    assertEquals(Thread.currentThread().getId(), report.event().threadId());
    assertFalse(read.isHeldByCurrentThread());
    assertThrows(IllegalMonitorStateException.class, read::unlock);
    assertEquals(1, losses.count(), "reported once");
  }

  @Test
  void forceUnlock_releasesOnlyTheSideThatHoldsIt() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("force");
    rw.readLock().lock();
    DistributedReadWriteLock theirs = clients.create(config).getReadWriteLock("force");
    assertFalse(theirs.writeLock().forceUnlock(), "write side: not in write mode");
    assertTrue(rw.readLock().isHeldByCurrentThread());
    assertTrue(theirs.readLock().forceUnlock());
    try (Jedis jedis = admin()) {
      // Each force-unlock request's marker stays (its copies must find it): nothing else may.
      List<String> left = jedis.keys("*").stream()
          .filter(k -> !k.startsWith("holdfast_unlock_marker:")).toList();
      assertTrue(left.isEmpty(), "lock and timeout keys gone: " + left);
    }
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock);
  }

  @Test
  void writeSide_forceUnlock_unlockAfter_andAbandon() throws Exception {
    DistributedReadWriteLock rw = client.getReadWriteLock("w");
    rw.writeLock().lock();
    DistributedReadWriteLock theirs = clients.create(config).getReadWriteLock("w");
    assertFalse(theirs.readLock().forceUnlock(), "read side: not in read mode");
    assertTrue(theirs.writeLock().forceUnlock());
    assertFalse(rw.writeLock().isLocked());
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::unlock);

    rw.writeLock().lock();
    Clients.engine(client).unlockAfter(rw.writeLock(), Duration.ofSeconds(5));
    try (Jedis jedis = admin()) {
      long pttl = jedis.pttl("w");
      assertTrue(pttl > 4_000 && pttl <= 5_000, "kept 5 s: " + pttl);
    }
    assertFalse(inOtherThread(() -> theirs.readLock().tryLock()));
    assertFalse(rw.writeLock().tryLock(), "a kept write lock excludes its own thread too");
    assertFalse(rw.readLock().tryLock(), "and its reads: it is no longer the writer");
    assertTrue(theirs.writeLock().forceUnlock());
    rw.writeLock().lock();
    rw.readLock().lock(30, TimeUnit.SECONDS);

    // Giving the write hold up (as after a lost renewal) leaves the writer's read: a downgrade.
    LockNames write = LockNames.of("", "w", ReadWriteLockKind.WRITE);
    assertEquals(List.of(0L, ""), Clients.engine(client).resolve(write, field(client) + ":write",
        "gone", 1, "abandon", 1));
    try (Jedis jedis = admin()) {
      assertEquals(Map.of("mode", "read", field(client), "1"), jedis.hgetAll("w"));
      long pttl = jedis.pttl("w");
      assertTrue(pttl > 25_000, "the hash follows the read lease: " + pttl);
    }
  }

  @Test
  void unlockAfter_keepsAReadHoldInRedis() throws Exception {
    DistributedLock read = client.getReadWriteLock("kept").readLock();
    read.lock();
    Clients.engine(client).unlockAfter(read, Duration.ofSeconds(5));
    assertFalse(read.isHeldByCurrentThread());
    try (Jedis jedis = admin()) {
      // Moved to a reader no thread is, so that the thread's own write lock waits for it too.
      long pttl = jedis.pttl(timeoutKey("kept", field(client) + ":kept", 1));
      assertTrue(pttl > 4_000 && pttl <= 5_000, "kept 5 s: " + pttl);
      assertEquals(-2, jedis.pttl(timeoutKey("kept", field(client), 1)));
      long hash = jedis.pttl("kept");
      assertTrue(hash > 4_000 && hash <= 5_000, "the hash follows its readers: " + hash);
    }
    DistributedLock writer = clients.create(config).getReadWriteLock("kept").writeLock();
    assertFalse(inOtherThread(() -> writer.tryLock()));
  }

  @Test
  void sealedScripts_sentTwice_applyOnce() {
    RedisTopology topology = Clients.engine(client).topology();
    String f = field(client);
    List<String> first = List.of("manual", "holdfast_unlock_marker:{manual}:a1",
        "holdfast_fence:{manual}", "{manual}");
    List<String> fresh = List.of("10000", f, "0", "1", "60000", "0", "0");
    assertEquals(List.of(1L, 1L, 10000L, 0L),
        topology.eval(LockScripts.RW_READ_ACQUIRE, first, fresh));
    assertEquals(1L, ((List<?>) topology.eval(LockScripts.RW_READ_ACQUIRE, first, fresh)).get(1));
    List<String> second = List.of("manual", "holdfast_unlock_marker:{manual}:a2",
        "holdfast_fence:{manual}", "{manual}");
    List<String> reentry = List.of("10000", f, "1", "1", "60000", "0", "0");
    assertEquals(2L, ((List<?>) topology.eval(LockScripts.RW_READ_ACQUIRE, second, reentry))
        .get(1));
    assertEquals(2L, ((List<?>) topology.eval(LockScripts.RW_READ_ACQUIRE, second, reentry))
        .get(1));
    try (Jedis jedis = admin()) {
      assertEquals("2", jedis.hget("manual", f));
      assertTrue(jedis.exists(timeoutKey("manual", f, 2)));
      assertFalse(jedis.exists(timeoutKey("manual", f, 3)));
    }
    // A writer of another thread is refused while the reader holds it, sealed or not.
    List<String> write = List.of("manual", "holdfast_unlock_marker:{manual}:w1",
        "holdfast_fence:{manual}", "{manual}");
    List<String> writeArgs = List.of("10000", f + "0:write", "0", "1", "60000", "0", "0");
    assertEquals(0L, ((List<?>) topology.eval(LockScripts.RW_WRITE_ACQUIRE, write, writeArgs))
        .get(0));
    // The uncertain re-entry is settled: undone once, its timeout key with it.
    assertEquals(List.of(1L, "d"), Clients.engine(client).resolve(
        LockNames.of("", "manual", ReadWriteLockKind.READ), f, "a2", 1, "acquire", 1));
    try (Jedis jedis = admin()) {
      assertEquals("1", jedis.hget("manual", f));
      assertFalse(jedis.exists(timeoutKey("manual", f, 2)));
    }
    assertEquals(List.of(-3L, 0L, 0L, 0L), topology.eval(LockScripts.RW_READ_ACQUIRE,
        second, reentry), "a copy arriving after settling is refused");
    List<String> release = List.of("manual", "holdfast_unlock_marker:{manual}:r1", "{manual}");
    List<String> last = List.of(f, "10000", "1", "publish", "5000", "redisson_rwlock:{manual}",
        "1");
    assertEquals(0L, topology.eval(LockScripts.RW_READ_RELEASE, release, last));
    assertEquals(0L, topology.eval(LockScripts.RW_READ_RELEASE, release, last));
    try (Jedis jedis = admin()) {
      assertFalse(jedis.exists("manual"));
    }
  }

  private void awaitSubscriber(String name) {
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(admin(),
        "redisson_rwlock:{" + name + "}") > 0, "waiter subscribed to the lock channel");
  }
}
