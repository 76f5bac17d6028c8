package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.args.ClientType;
import redis.clients.jedis.params.ClientKillParams;

/**
 * Attacks on "two locks, one channel" (issue 15 §1): locks {@code a} and {@code {a}} share
 * Redisson's unlock channel but must stay two locks — for local handoff, wake-ups, the
 * subscription's life cycle, and the keys a kind derives — while Redisson interop holds.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SharedChannelAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** A 3-primary cluster (sharded pub/sub): a and {a} share a slot and a sharded channel. */
  @RegisterExtension
  static final RedisExtension cluster = RedisExtension.cluster(3, 0);

  @RegisterExtension
  final Clients clients = new Clients();

  private static RedissonClient redisson;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  /** Redisson's locks are per thread: its holder locks and unlocks on this one thread. */
  private final ExecutorService redissonHolder = Executors.newSingleThreadExecutor();
  private RedisProbe redisState;

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
    redisState = new RedisProbe(redis.server());
  }

  @AfterEach
  void stopThreads() throws InterruptedException {
    threads.shutdownNow();
    redissonHolder.shutdownNow();
    threads.awaitTermination(10, TimeUnit.SECONDS);
  }

  private LockClient clusterClient() {
    return clients.create(Map.of("holdfast.redis.mode", "cluster",
        "holdfast.redis.nodes", cluster.clusterSetup().seedNodes(),
        "holdfast.redis.timeout", "1s"));
  }

  private LockClient client(String... extra) {
    return clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()), extra);
  }

  private <T> T onRedissonHolder(Callable<T> task) throws Exception {
    return redissonHolder.submit(task).get(10, TimeUnit.SECONDS);
  }

  private <T> T inOtherThread(Callable<T> task) throws Exception {
    return threads.submit(task).get(10, TimeUnit.SECONDS);
  }

  private static void awaitParked(Thread t, String what) {
    Await.until(Duration.ofSeconds(10),
        () -> LockSupport.getBlocker(t) instanceof WaitEntry.Waiter, what + " parked");
  }

  private <T> Future<T> onThread(Callable<T> task, Thread[] thread) throws InterruptedException {
    CountDownLatch started = new CountDownLatch(1);
    Future<T> f = threads.submit(() -> {
      thread[0] = Thread.currentThread();
      started.countDown();
      return task.call();
    });
    assertTrue(started.await(10, TimeUnit.SECONDS));
    return f;
  }

  /** A thread that waits for {@code lock} up to 60 s and returns when it held it (nanoTime). */
  private Future<Long> waiter(DistributedLock lock, String what) throws InterruptedException {
    Thread[] t = new Thread[1];
    Future<Long> f = onThread(() -> {
      lock.lock();
      long at = System.nanoTime();
      lock.unlock();
      return at;
    }, t);
    awaitParked(t[0], what);
    return f;
  }

  // ---- Redisson interop on a braced read-write lock (timeout keys stay Redisson's) ----

  /**
   * Redisson reads {@code {a}}: its reader's timeout key is {@code {a}:<field>:rwlock_timeout:1}
   * (Redisson's naming). A first fix of issue 15 §1 moved Holdfast's readers' timeout keys of a
   * braced key to {@code {a}~}: its writer then found none for Redisson's reader, judged it
   * dead and took the write lock while Redisson's reader held it. The keys stay Redisson's; only
   * the field tells {@code a} and {@code {a}} apart.
   */
  @Test
  void redissonReaderOfBracedName_excludesHoldfastWriter() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("{a}");
    onRedissonHolder(() -> {
      theirs.readLock().lock();
      return null;
    });
    LockClient ours = client();
    DistributedReadWriteLock mine = ours.getReadWriteLock("{a}");
    boolean got = inOtherThread(() -> {
      boolean w = mine.writeLock().tryLock();
      if (w) {
        mine.writeLock().unlock();
      }
      return w;
    });
    assertFalse(got, "Holdfast took the write lock of {a} while Redisson's reader holds it");
  }

  /**
   * Holdfast reads {@code {a}}, then Redisson joins the read and leaves: Redisson's read unlock
   * keeps the hash only while some reader's timeout key (under {@code {a}}) lives; had ours
   * lived elsewhere (a first fix put them under {@code {a}~}), Redisson would delete the whole
   * lock and a Redisson writer would get it while our reader still believes it holds.
   */
  @Test
  void holdfastReaderOfBracedName_survivesARedissonReaderLeaving() throws Exception {
    LockClient ours = client();
    DistributedReadWriteLock mine = ours.getReadWriteLock("{a}");
    mine.readLock().lock();
    RReadWriteLock theirs = redisson.getReadWriteLock("{a}");
    assertTrue(onRedissonHolder(() -> theirs.readLock().tryLock()), "Redisson joins our read");
    onRedissonHolder(() -> {
      theirs.readLock().unlock();
      return null;
    });
    boolean survived = redisState.exists("{a}");
    boolean writerGot = inOtherThread(() -> {
      boolean w = theirs.writeLock().tryLock();
      if (w) {
        theirs.writeLock().unlock();
      }
      return w;
    });
    assertFalse(writerGot, "a Redisson writer took {a} while our reader holds it (the lock "
        + (survived ? "survived" : "was deleted by") + " Redisson's read unlock)");
    assertTrue(survived, "Redisson's read unlock deleted {a} under our live reader");
    mine.readLock().unlock();
  }

  /** Control: on an ordinary name, both directions of the two probes above hold. */
  @Test
  void ordinaryName_readersOfBothLibraries_excludeWriters() throws Exception {
    RReadWriteLock theirs = redisson.getReadWriteLock("a");
    onRedissonHolder(() -> {
      theirs.readLock().lock();
      return null;
    });
    LockClient ours = client();
    DistributedReadWriteLock mine = ours.getReadWriteLock("a");
    assertFalse(inOtherThread(() -> mine.writeLock().tryLock()));
    mine.readLock().lock();
    onRedissonHolder(() -> {
      theirs.readLock().unlock();
      return null;
    });
    assertFalse(inOtherThread(() -> theirs.writeLock().tryLock()), "our reader still holds a");
    mine.readLock().unlock();
  }

  /**
   * Fair lock {@code {a}}: a Redisson waiter queues in Redisson's {@code redisson_lock_queue:{a}},
   * Holdfast's unlock now serves {@code redisson_lock_queue:{a}~} only, so Redisson's waiter is
   * never woken and sleeps the holder's whole lease (30 s) instead of about a round trip. On
   * an ordinary name the same sequence takes well under 2 s (RedissonFairLockInteropTest).
   */
  @Test
  @Disabled("documented interop exception (LockNames): a braced fair lock keeps its own "
      + "queue, so Holdfast and Redisson waiters on such a name do not wake each other")
  void bracedFairLock_holdfastUnlock_wakesARedissonWaiter() throws Exception {
    LockClient ours = client("holdfast.fair.waiter-timeout", "60s");
    DistributedLock mine = ours.getFairLock("{a}");
    mine.lock();
    org.redisson.api.RLock theirs = redisson.getFairLock("{a}");
    Future<Long> waiter = Waiters.acquireAndRelease(threads, theirs);
    Await.until(Duration.ofSeconds(10), () -> {
      try (Jedis jedis = redis.server().admin()) {
        java.util.List<String> q = jedis.lrange("redisson_lock_queue:{a}", 0, -1);
        return q.size() == 1
            && jedis.pubsubNumSub("redisson_lock__channel:{a}:" + q.get(0))
                .getOrDefault("redisson_lock__channel:{a}:" + q.get(0), 0L) > 0;
      }
    }, "Redisson's waiter queued and subscribed");
    long released = System.nanoTime();
    mine.unlock();
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "Redisson's waiter slept through our unlock: " + latency + " ms");
  }

  /** The mirror: a Holdfast fair waiter of {@code {a}} behind a Redisson holder. */
  @Test
  @Disabled("documented interop exception (LockNames): a braced fair lock keeps its own "
      + "queue, so Holdfast and Redisson waiters on such a name do not wake each other")
  void bracedFairLock_redissonUnlock_wakesAHoldfastWaiter() throws Exception {
    org.redisson.api.RLock theirs = redisson.getFairLock("{a}");
    onRedissonHolder(() -> {
      theirs.lock();
      return null;
    });
    LockClient ours = client("holdfast.fair.waiter-timeout", "60s");
    Future<Long> waiter = waiter(ours.getFairLock("{a}"), "Holdfast's fair waiter of {a}");
    long released = System.nanoTime();
    onRedissonHolder(() -> {
      theirs.unlock();
      return null;
    });
    long latency = Waiters.millisUntilAcquired(waiter, released);
    assertTrue(latency < 2_000, "our waiter slept through Redisson's unlock: " + latency + " ms");
  }

  // ---- Local handoff between two locks on one channel ----

  /** The mirror of SharedChannelTest's probe: the final unlock of {@code {a}}, a waiter for a. */
  @Test
  void finalUnlockOfBracedA_withOnlyAWaiterForA_freesBracedA_andNeverGrantsA() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    LossRecorder lost = LossRecorder.on(ours);
    DistributedLock otherA = other.getLock("a");
    assertTrue(otherA.tryLock());
    DistributedLock braced = ours.getLock("{a}");
    braced.lock();
    Thread[] t = new Thread[1];
    Future<Boolean> plain = onThread(() -> ours.getLock("a").tryLock(30, TimeUnit.SECONDS), t);
    awaitParked(t[0], "the waiter for a");
    braced.unlock();
    assertFalse(redisState.exists("{a}"), "the final unlock of {a} freed {a}");
    assertTrue(otherA.isHeldByCurrentThread());
    assertFalse(plain.isDone(), "the waiter for a got it while another client holds a");
    otherA.unlock();
    assertTrue(plain.get(30, TimeUnit.SECONDS));
    assertEquals(0, lost.count(), lost.toString());
  }

  /**
   * Both locks held by this client with waiters for each: both streams of final unlocks hand off
   * to their own waiters only; a thread inside one lock never overlaps another inside it.
   */
  @Test
  void busyHandoffsOnAAndBracedA_inOneClient_keepEachLockExclusive() throws Exception {
    LockClient ours = client();
    String[] names = {"a", "{a}"};
    java.util.List<Future<?>> workers = new java.util.ArrayList<>();
    dev.holdfast.testing.ExclusionProbe[] probes = {new dev.holdfast.testing.ExclusionProbe(),
        new dev.holdfast.testing.ExclusionProbe()};
    for (int n = 0; n < 2; n++) {
      DistributedLock lock = ours.getLock(names[n]);
      dev.holdfast.testing.ExclusionProbe probe = probes[n];
      for (int t = 0; t < 4; t++) {
        workers.add(threads.submit(() -> {
          for (int i = 0; i < 100; i++) {
            lock.lock();
            try {
              probe.enter();
              probe.exit();
            } finally {
              lock.unlock();
            }
          }
          return null;
        }));
      }
    }
    for (Future<?> w : workers) {
      w.get(90, TimeUnit.SECONDS);
    }
    assertEquals(0, probes[0].overlaps(), "two threads inside a");
    assertEquals(0, probes[1].overlaps(), "two threads inside {a}");
    assertTrue(Clients.engine(ours).localHandoffs() > 0, "a run with no handoff proves nothing");
    assertFalse(redisState.exists("a"));
    assertFalse(redisState.exists("{a}"));
  }

  // ---- Wake-ups and the subscription's life cycle on a shared channel ----

  /**
   * A waiter of {@code {a}} registered first, then one of {@code a}: the unlock of {@code a}
   * must wake a's waiter at once, not spend its one wake-up on the waiter of the other lock.
   */
  @Test
  void unlockOfA_wakesItsWaiter_evenWhenTheOtherLocksWaiterCameFirst() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedLock otherA = other.getLock("a");
    DistributedLock otherBraced = other.getLock("{a}");
    otherA.lock();
    otherBraced.lock(); // 30 s watchdog leases: a missed wake-up would show as a long park
    Future<Long> bracedWaiter = waiter(ours.getLock("{a}"), "the waiter for {a}");
    Future<Long> plainWaiter = waiter(ours.getLock("a"), "the waiter for a");
    long released = System.nanoTime();
    otherA.unlock();
    long millis = Waiters.millisUntilAcquired(plainWaiter, released);
    assertTrue(millis < 10_000, "the waiter for a slept through its unlock: " + millis + " ms");
    assertFalse(bracedWaiter.isDone(), "{a} is still held");
    released = System.nanoTime();
    otherBraced.unlock();
    millis = Waiters.millisUntilAcquired(bracedWaiter, released);
    assertTrue(millis < 10_000, "the waiter for {a} slept through its unlock: " + millis + " ms");
  }

  /**
   * The last waiter of {@code a} gives up while {@code {a}}'s waiter stays: the channel they
   * share must stay subscribed, so {@code {a}}'s next unlock still wakes its waiter promptly.
   */
  @Test
  void lastWaiterOfOneLockLeaves_theChannelStaysSubscribedForTheOther() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedLock otherA = other.getLock("a");
    DistributedLock otherBraced = other.getLock("{a}");
    otherA.lock();
    otherBraced.lock();
    Thread[] t = new Thread[1];
    Future<Boolean> shortWaiter = onThread(
        () -> ours.getLock("a").tryLock(1_500, TimeUnit.MILLISECONDS), t);
    awaitParked(t[0], "the short waiter for a");
    Future<Long> bracedWaiter = waiter(ours.getLock("{a}"), "the waiter for {a}");
    assertFalse(shortWaiter.get(20, TimeUnit.SECONDS), "a is held elsewhere");
    String channel = "redisson_lock__channel:{a}";
    assertEquals(1, redisState.subscribers(channel), "the shared channel is still carried");
    assertTrue(Clients.engine(ours).subscriptions().activeChannels().contains(channel));
    long released = System.nanoTime();
    otherBraced.unlock();
    long millis = Waiters.millisUntilAcquired(bracedWaiter, released);
    assertTrue(millis < 10_000, "the waiter for {a} slept through its unlock: " + millis + " ms");
    otherA.unlock();
    Await.until(Duration.ofSeconds(10), () -> redisState.subscribers(channel) == 0,
        "the last waiter out unsubscribed");
  }

  /**
   * The subscriber connection is killed while waiters of both locks wait on their shared
   * channel: after the reconnect each lock's next unlock still wakes its own waiter promptly.
   */
  @Test
  void subscriberReconnect_keepsWakingTheWaitersOfBothLocks() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedLock otherA = other.getLock("a");
    DistributedLock otherBraced = other.getLock("{a}");
    otherA.lock();
    otherBraced.lock();
    Future<Long> plainWaiter = waiter(ours.getLock("a"), "the waiter for a");
    Future<Long> bracedWaiter = waiter(ours.getLock("{a}"), "the waiter for {a}");
    String channel = "redisson_lock__channel:{a}";
    long subscribes = redisState.subscribeCalls();
    try (Jedis jedis = redis.server().admin()) {
      jedis.clientKill(new ClientKillParams().type(ClientType.PUBSUB));
    }
    Await.until(Duration.ofSeconds(15), () -> redisState.subscribeCalls() > subscribes
        && redisState.subscribers(channel) == 1, "resubscribed");
    // Both waiters re-poll after the resubscription and park again (locks still held).
    Await.until(Duration.ofSeconds(10), () -> !plainWaiter.isDone() && !bracedWaiter.isDone()
        && Clients.engine(ours).subscriptions().peek(LockNames.of("", "a")).subscribed()
        && Clients.engine(ours).subscriptions().peek(LockNames.of("", "{a}")).subscribed(),
        "both entries subscribed again");
    long released = System.nanoTime();
    otherA.unlock();
    long millis = Waiters.millisUntilAcquired(plainWaiter, released);
    assertTrue(millis < 10_000, "the waiter for a slept through its unlock: " + millis + " ms");
    released = System.nanoTime();
    otherBraced.unlock();
    millis = Waiters.millisUntilAcquired(bracedWaiter, released);
    assertTrue(millis < 10_000, "the waiter for {a} slept through its unlock: " + millis + " ms");
  }

  /**
   * Both locks are freed without an unlock message (deleted behind the holder's back), then the
   * subscriber connection breaks: the reconnect must wake the waiters of every lock on the
   * channel, which then find their lock free, instead of leaving one parked for the lease.
   */
  @Test
  void reconnectAfterMissedUnlocks_wakesTheWaitersOfBothLocks() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    other.getLock("a").lock();
    other.getLock("{a}").lock(); // 30 s watchdog leases: a waiter not woken parks about that long
    Future<Long> plainWaiter = waiter(ours.getLock("a"), "the waiter for a");
    Future<Long> bracedWaiter = waiter(ours.getLock("{a}"), "the waiter for {a}");
    long freed = System.nanoTime();
    try (Jedis jedis = redis.server().admin()) {
      jedis.del("a", "{a}"); // no message: as if the unlock messages were lost
      jedis.clientKill(new ClientKillParams().type(ClientType.PUBSUB));
    }
    long plain = Waiters.millisUntilAcquired(plainWaiter, freed);
    long braced = Waiters.millisUntilAcquired(bracedWaiter, freed);
    assertTrue(plain < 10_000 && braced < 10_000,
        "a waiter stayed parked after the reconnect: a " + plain + " ms, {a} " + braced + " ms");
  }

  /**
   * A waiter for {@code {a}} joins while a's entry already carries the subscription: its entry
   * must count as subscribed at once (else it polls, and never queues for handoff).
   */
  @Test
  void secondLockJoiningASubscribedChannel_isSubscribedAtOnce() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedLock otherA = other.getLock("a");
    DistributedLock otherBraced = other.getLock("{a}");
    otherA.lock();
    otherBraced.lock();
    Future<Long> plainWaiter = waiter(ours.getLock("a"), "the waiter for a");
    Await.until(Duration.ofSeconds(10),
        () -> Clients.engine(ours).subscriptions().peek(LockNames.of("", "a")).subscribed(),
        "a's entry subscribed");
    Future<Long> bracedWaiter = waiter(ours.getLock("{a}"), "the waiter for {a}");
    Await.until(Duration.ofSeconds(10),
        () -> Clients.engine(ours).subscriptions().peek(LockNames.of("", "{a}")).subscribed(),
        "{a}'s entry subscribed");
    assertEquals(1, redisState.subscribers("redisson_lock__channel:{a}"),
        "one subscription serves both");
    otherA.unlock();
    otherBraced.unlock();
    plainWaiter.get(20, TimeUnit.SECONDS);
    bracedWaiter.get(20, TimeUnit.SECONDS);
  }

  // ---- Kinds on one name and channel; the braced-key rule ----

  /**
   * Read-write locks {@code a} and {@code {a}} share channel {@code redisson_rwlock:{a}}; a
   * writer of one and a reader of the other wait in one client; each is woken by its own lock.
   */
  @Test
  void readWriteLocksOnOneChannel_wakeTheirOwnWaiters() throws Exception {
    LockClient ours = client();
    LockClient other = client();
    DistributedReadWriteLock otherA = other.getReadWriteLock("a");
    DistributedReadWriteLock otherBraced = other.getReadWriteLock("{a}");
    otherA.writeLock().lock();
    otherBraced.readLock().lock();
    Future<Long> readerOfA = waiter(ours.getReadWriteLock("a").readLock(), "reader of a");
    Future<Long> writerOfBraced = waiter(ours.getReadWriteLock("{a}").writeLock(),
        "writer of {a}");
    long released = System.nanoTime();
    otherBraced.readLock().unlock();
    long millis = Waiters.millisUntilAcquired(writerOfBraced, released);
    assertTrue(millis < 10_000, "writer of {a} slept through its unlock: " + millis + " ms");
    assertFalse(readerOfA.isDone(), "a is write-locked elsewhere");
    released = System.nanoTime();
    otherA.writeLock().unlock();
    millis = Waiters.millisUntilAcquired(readerOfA, released);
    assertTrue(millis < 10_000, "reader of a slept through its unlock: " + millis + " ms");
  }

  /** Braced-rule edge names: each distinct key gets a distinct base, in the key's slot. */
  @Test
  void bracedRule_edgeNames_distinctBases() {
    String[] keys = {"a", "{a}", "{a}~", "{a}~~", "{a}}", "{a}}~", "x{a}", "{a}x",
        "{a}b}", "{a{b}", "~", "{~}", "{a}~}"};
    java.util.Set<String> bases = new java.util.HashSet<>();
    for (String k : keys) {
      LockNames n = LockNames.of("", k);
      assertTrue(bases.add(n.derivedBase()), "base of " + k + " collides: " + n.derivedBase());
    }
    // '{}' has no hash tag, 'a}' a brace without one: refused.
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> LockNames.of("", "{}"));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> LockNames.of("", "a}"));
  }

  // ---- Cluster: a and {a} share a slot and a sharded channel ----

  /** SharedChannelTest's handoff probe on a cluster, where the channel is sharded. */
  @Test
  void cluster_finalUnlockOfA_neverHandsAWaiterForBracedATheOtherLock() throws Exception {
    cluster.flushAll();
    LockClient ours = clusterClient();
    LockClient other = clusterClient();
    LossRecorder lost = LossRecorder.on(ours);
    DistributedLock otherBraced = other.getLock("{a}");
    assertTrue(otherBraced.tryLock());
    DistributedLock a = ours.getLock("a");
    a.lock();
    Thread[] t = new Thread[1];
    Future<Boolean> braced = onThread(() -> ours.getLock("{a}").tryLock(30, TimeUnit.SECONDS), t);
    awaitParked(t[0], "the waiter for {a}");
    Future<Long> plain = waiter(ours.getLock("a"), "the waiter for a");
    a.unlock();
    assertTrue(plain.get(30, TimeUnit.SECONDS) > 0, "a's own waiter got a");
    assertFalse(braced.isDone(), "the waiter for {a} got it while another client holds {a}");
    assertTrue(otherBraced.isHeldByCurrentThread());
    long released = System.nanoTime();
    otherBraced.unlock();
    assertTrue(braced.get(30, TimeUnit.SECONDS));
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released) < 10_000,
        "the waiter for {a} was woken by its unlock");
    assertEquals(0, lost.count(), lost.toString());
  }

  /**
   * Lock {@code a}} (no hash tag: Redis hashes the whole key) would be slotted {@code {a}}},
   * whose tag is {@code a}: its markers, channel and derived keys would hash to another slot than
   * the key, and on a cluster every script for it would be refused (CROSSSLOT). It is refused up
   * front, naming the key, on every topology.
   */
  @Test
  void lockNamedWithACloseBraceOnly_isRefusedUpFront() throws Exception {
    LockClient ours = clusterClient();
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
        IllegalArgumentException.class, () -> ours.getLock("a}"));
    assertTrue(e.getMessage().contains("a}"), e.getMessage());
  }
}
