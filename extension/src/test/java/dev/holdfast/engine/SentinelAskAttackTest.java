package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisSentinelSetup;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;

/**
 * Attack round 28 on 9d08798 ({@link SentinelMasterCheck}: each sentinel's waits get a third of
 * what is left of the ask; a borrow with others queued uses the last verdict within a term plus
 * an ask). What is measured throughout: how long after the sentinels agree on a new master a
 * verdict naming the former one is still used — documented (docs/safety.md) as at most a term
 * plus an ask ({@code VERDICT_MILLIS + 2 x sentinel timeout}).
 *
 * <p>Real sentinels ({@link RedisSentinelSetup}), the switch staged with {@link SentinelStaging}
 * (no {@code +switch-master}: the check alone decides). A slow link to a sentinel is a {@link
 * FaultProxy} that delays every chunk, or a {@link TrickleProxy} that passes the sentinel's
 * replies on a byte at a time.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SentinelAskAttackTest {

  private static final int TIMEOUT_MILLIS = 1_000;
  private static final long DOCUMENTED_MILLIS =
      SentinelMasterCheck.VERDICT_MILLIS + 2L * TIMEOUT_MILLIS;

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisSentinelSetup sentinels;
  private final List<AutoCloseable> closing = new ArrayList<>();

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
    if (sentinels != null) {
      sentinels.close();
    }
  }

  /**
   * "Twice its socket timeout bounds asking them all": a socket timeout bounds one read, not a
   * reply. Three sentinels: the first two name the master A at once; the link to the third
   * delivers its replies a byte every 300 ms (each read well within its wait of about 660 ms).
   * Meanwhile the sentinels switch to B. The link to the third then breaks, a term plus an ask
   * and a second after the switch. The asking caller gets "2 of 3 name A" — answers as old as
   * its ask — and opens its socket on them: the verdict's age is not checked on the asker's
   * path ({@code now = ask(address); ... return now;}), only on the waiters'.
   */
  @Test
  // A DEFECT of round 28, fixed.
  void sentinelTricklingItsReply_askerDoesNotUseAnswersOlderThanTheBound() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-trickle");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort a = sentinels.master().hostAndPort();
    HostAndPort b = sentinels.replica().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    TrickleProxy trickle = new TrickleProxy(real.get(2).getPort(), 300);
    closing.add(trickle);
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(real.get(0), real.get(1), trickle.address()), config());

    CompletableFuture<Long> asker = CompletableFuture.supplyAsync(() -> {
      try {
        check.confirm(a);
        return System.nanoTime();
      } catch (SentinelMasterCheck.NotConfirmedException refused) {
        return -1L;
      }
    });
    Await.until(Duration.ofSeconds(10), () -> trickle.accepted() > 0,
        "the ask reached the third sentinel (the first two have answered)");
    SentinelStaging.switchSentinelsTo(sentinels, b);
    long agreed = System.nanoTime();
    Await.until(Duration.ofSeconds(30),
        () -> millisSince(agreed) > DOCUMENTED_MILLIS + 1_000 || asker.isDone(),
        "a term plus an ask and a second pass");
    trickle.cut();
    long returned = asker.get(30, TimeUnit.SECONDS);
    if (returned != -1L) {
      long after = (returned - agreed) / 1_000_000L;
      assertTrue(after <= DOCUMENTED_MILLIS + 300, "a new socket to the former master " + a
          + " was allowed " + after + " ms after every sentinel named " + b
          + " (documented bound " + DOCUMENTED_MILLIS + " ms)");
    }
  }

  /**
   * The same defect end to end: two holders. Client A (sentinels S0, S1, and S2 over a slow
   * link; timeout 1 s) is idle past a term plus an ask. Its lock call borrows a pooled
   * connection and asks: S0 and S1 name A at once, S2's replies trickle. The sentinels switch to
   * B (promoted); client B locks there. The link to S2 breaks a term plus an ask and a second
   * later; A's borrow gets "2 of 3 name the former master, none another" and runs the script on
   * the former master (still a master: nothing demoted it yet), which grants — 3.5 s after the
   * switch before the fix, past the documented residual of a term plus an ask; the ask is now
   * cut at its bound, and a grant can come only within the residual.
   */
  @Test
  // A DEFECT of round 28, fixed.
  void idleClientAsksThroughATricklingLink_isNotGrantedOnTheFormerMaster() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-trickle-holders");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort former = sentinels.master().hostAndPort();
    dev.holdfast.testing.RedisServer replica = sentinels.replica();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    TrickleProxy trickle = new TrickleProxy(real.get(2).getPort(), 0);
    closing.add(trickle);
    LockClient a = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, real.get(0) + "," + real.get(1) + "," + trickle.address(),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, TIMEOUT_MILLIS + "ms"));
    SentinelCheckRefreshAttackTest.warmUpPool(a, 2);
    long idle = System.nanoTime();
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 500, "the node is no longer in use");
    trickle.gap(300);
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * TIMEOUT_MILLIS + 500,
        "the verdict is past a term plus an ask");
    SentinelMasterCheck check = SentinelCheckRefreshAttackTest.masterCheckOf(a);
    long asked = check.callerAsks();
    int links = trickle.accepted();
    long[] grantedAt = new long[1];
    CompletableFuture<Boolean> granted = CompletableFuture.supplyAsync(() -> {
      try {
        boolean got = a.getLock("ask-holders").tryLock();
        grantedAt[0] = System.nanoTime();
        return got;
      } catch (LockException refused) {
        return false;
      }
    });
    Await.until(Duration.ofSeconds(10),
        () -> check.callerAsks() > asked && trickle.accepted() > links,
        "A's call asks, S0 and S1 have answered, S2 is being asked");
    replica.withAdmin(redis.clients.jedis.Jedis::replicaofNoOne);
    SentinelStaging.switchSentinelsTo(sentinels, replica.hostAndPort());
    long agreed = System.nanoTime();
    LockClient b = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, sentinels.sentinelNodes(),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, "2s"));
    assertTrue(b.getLock("ask-holders").tryLock(), "B locks on the promoted master");
    Await.until(Duration.ofSeconds(30),
        () -> millisSince(agreed) > DOCUMENTED_MILLIS + 1_000 || granted.isDone(),
        "a term plus an ask and a second pass");
    trickle.cut();
    boolean aHolds = granted.get(30, TimeUnit.SECONDS);
    // Within the documented residual (a term plus an ask after the sentinels agree) a client
    // that missed the switch may still be granted there; past it, never.
    long after = (grantedAt[0] - agreed) / 1_000_000L;
    assertTrue(!aHolds || after <= DOCUMENTED_MILLIS, "A was granted the lock B holds, on the "
        + "former master " + former + ", " + after + " ms after every sentinel named "
        + replica.hostAndPort() + " (documented bound " + DOCUMENTED_MILLIS + " ms)");
  }

  /**
   * Questions 1 and 3 together (the part that holds): asks are always in flight (two sentinels
   * behind links delaying every chunk by 250 ms), six threads loop over a new socket's check and
   * a borrow's, the background renews as in a client; the sentinels switch while asks are in
   * flight (answers "A" given before the switch, received after). No call accepts A later than
   * a term plus an ask after the switch — queued waiters handing the verdict on, borrows "with
   * others queued", and answers received late included.
   */
  @Test
  void switchWhileAsksAreInFlight_noCallAcceptsTheFormerMasterPastTheBound() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-inflight");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort a = sentinels.master().hostAndPort();
    HostAndPort b = sentinels.replica().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    FaultProxy first = new FaultProxy(real.get(0).getPort());
    FaultProxy second = new FaultProxy(real.get(1).getPort());
    closing.add(first);
    closing.add(second);
    first.delay(Duration.ofMillis(250));
    second.delay(Duration.ofMillis(250));
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(address(first), address(second), real.get(2)), config());
    ScheduledExecutorService timer = Executors.newScheduledThreadPool(2);
    int threads = 6;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    AtomicLong lastAccepted = new AtomicLong();
    AtomicInteger accepted = new AtomicInteger();
    AtomicBoolean stop = new AtomicBoolean();
    List<CompletableFuture<Void>> loops = new ArrayList<>();
    try {
      timer.scheduleWithFixedDelay(() -> check.refreshDue(timer), 0,
          SentinelMasterCheck.REFRESH_TICK_MILLIS, TimeUnit.MILLISECONDS);
      for (int i = 0; i < threads; i++) {
        boolean borrows = i % 2 == 0;
        loops.add(CompletableFuture.runAsync(() -> {
          while (!stop.get()) {
            try {
              if (borrows) {
                check.refuseIfNamedOther(a);
              } else {
                check.confirm(a);
              }
              lastAccepted.accumulateAndGet(System.nanoTime(), Math::max);
              accepted.incrementAndGet();
            } catch (SentinelMasterCheck.NotConfirmedException refused) {
              // after the switch
            }
            java.util.concurrent.locks.LockSupport.parkNanos(2_000_000L); // pacing, 2 cores
          }
        }, pool));
      }
      Await.until(Duration.ofSeconds(20), () -> accepted.get() > 100, "A is accepted before");
      SentinelStaging.switchSentinelsTo(sentinels, b);
      long agreed = System.nanoTime();
      Await.until(Duration.ofSeconds(30), () -> millisSince(agreed) > DOCUMENTED_MILLIS + 2_000,
          "a term plus an ask and two seconds pass");
      stop.set(true);
      CompletableFuture.allOf(loops.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
      long after = (lastAccepted.get() - agreed) / 1_000_000L;
      assertTrue(after <= DOCUMENTED_MILLIS + 500, "A was last accepted " + after
          + " ms after every sentinel named " + b + " (bound " + DOCUMENTED_MILLIS + " ms; caller "
          + "asks " + check.callerAsks() + ", background " + check.backgroundAsks() + ")");
    } finally {
      stop.set(true);
      timer.shutdownNow();
      pool.shutdownNow();
    }
  }

  /**
   * Question 2: the sentinels switch to B, but this client reaches only one of the three (the
   * other two silent to it), and that one has not followed (it still names A, as a sentinel
   * partitioned with the former master does). A new socket is refused (1 of 3 is no majority);
   * a pooled connection is not: no answering sentinel names another, so the borrow check passes
   * however long this lasts. docs/safety.md: "While fewer than a majority of the listed
   * sentinels answer, new connections fail; pooled ones go on working."
   */
  @Test
  @Disabled("LIMITATION: with a majority of sentinels silent and the one answering stale, pooled "
      + "connections to the former master stay usable (documented in docs/safety.md)")
  void majoritySilent_minorityStale_pooledBorrowOfTheFormerMasterIsRefused() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-minority");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort a = sentinels.master().hostAndPort();
    HostAndPort b = sentinels.replica().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelStaging.monitor(sentinels, real.get(0), b);
    SentinelStaging.monitor(sentinels, real.get(1), b);
    long agreed = System.nanoTime();
    ServerSocket silent1 = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    ServerSocket silent2 = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closing.add(silent1);
    closing.add(silent2);
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(address(silent1), address(silent2), real.get(2)), config());
    assertThrows(SentinelMasterCheck.NotConfirmedException.class, () -> check.confirm(a),
        "a new socket needs a majority");
    Await.until(Duration.ofSeconds(30), () -> millisSince(agreed) > DOCUMENTED_MILLIS + 500,
        "a term plus an ask passes");
    assertThrows(SentinelMasterCheck.NotConfirmedException.class,
        () -> check.refuseIfNamedOther(a), "a pooled connection to the former master " + a
            + " is still handed out while the majority name " + b);
  }

  /**
   * Question 2, the part that holds: the sentinels disagree — S0 still names A, S1 names B, S2
   * (which also names B) is silent to this client. Neither node is used: A is refused for new
   * sockets and borrows (S1 names another), B for new sockets (1 of 3 is no majority, and S0
   * names another).
   */
  @Test
  void sentinelsDisagree_oneSilent_neitherNodeIsUsed() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-disagree");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort a = sentinels.master().hostAndPort();
    HostAndPort b = sentinels.replica().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelStaging.monitor(sentinels, real.get(1), b);
    SentinelStaging.monitor(sentinels, real.get(2), b);
    ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closing.add(silent);
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(real.get(0), real.get(1), address(silent)), config());
    assertThrows(SentinelMasterCheck.NotConfirmedException.class, () -> check.confirm(a));
    assertThrows(SentinelMasterCheck.NotConfirmedException.class,
        () -> check.refuseIfNamedOther(a));
    assertThrows(SentinelMasterCheck.NotConfirmedException.class, () -> check.confirm(b));
  }

  /**
   * Question 5 (the part that holds): an idle client (its verdict past a term plus an ask), one
   * sentinel black-holed: thread 1's call asks the sentinels; thread 2's {@code tryLock(100 ms)}
   * borrows meanwhile and waits for that ask on the node's lock. It returns within about one
   * call's timeout (what any call may take), not an unbounded or repeated ask.
   */
  @Test
  void tryLockWithShortWait_duringAnotherThreadsAsk_returnsWithinACallTimeout() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-trylock");
    SentinelStaging.slowAutomaticFailover(sentinels);
    List<FaultProxy> proxies = new ArrayList<>();
    for (HostAndPort sentinel : sentinels.sentinels()) {
      FaultProxy p = new FaultProxy(sentinel.getPort());
      closing.add(p);
      proxies.add(p);
    }
    int clientTimeout = 2_000;
    LockClient client = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, String.join(",",
            proxies.stream().map(p -> "127.0.0.1:" + p.port()).toList()),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, clientTimeout + "ms"));
    SentinelCheckRefreshAttackTest.warmUpPool(client, 2);
    proxies.get(0).blackHole(true);
    long idle = System.nanoTime();
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * clientTimeout + 500,
        "the verdict is past a term plus an ask");
    SentinelMasterCheck check = SentinelCheckRefreshAttackTest.masterCheckOf(client);
    long asked = check.callerAsks();
    CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
      try {
        client.getLock("ask-first").tryLock();
      } catch (LockException e) {
        // only the timing matters
      }
    });
    Await.until(Duration.ofSeconds(10), () -> check.callerAsks() > asked,
        "thread 1 asks the sentinels");
    long began = System.nanoTime();
    String outcome;
    try {
      outcome = "tryLock=" + client.getLock("ask-second").tryLock(100, TimeUnit.MILLISECONDS);
    } catch (LockException e) {
      outcome = e.toString();
    }
    long took = millisSince(began);
    first.get(30, TimeUnit.SECONDS);
    assertTrue(took <= clientTimeout + 1_000, "tryLock(100 ms) took " + took + " ms ("
        + outcome + "; client timeout " + clientTimeout + " ms)");
  }

  /**
   * Question 5 with a slow link instead of a silent sentinel: an idle client, the link to its
   * third sentinel delivering a byte every 300 ms. Thread 1's call asks; thread 2's {@code
   * tryLock(100 ms)} waits for that ask on the node's lock ({@code ReentrantLock.lock()}), and
   * the ask lasts as long as the link trickles — here until it is cut, seconds later — instead
   * of the two sentinel timeouts an ask is said to take at most.
   */
  @Test
  // A DEFECT of round 28, fixed.
  void tryLockWithShortWait_duringAnAskOverATricklingLink_returnsWithinAnAsk() throws Exception {
    sentinels = RedisSentinelSetup.start("ask-trickle-lock");
    SentinelStaging.slowAutomaticFailover(sentinels);
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    TrickleProxy trickle = new TrickleProxy(real.get(2).getPort(), 0);
    closing.add(trickle);
    LockClient client = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, real.get(0) + "," + real.get(1) + "," + trickle.address(),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, TIMEOUT_MILLIS + "ms"));
    SentinelCheckRefreshAttackTest.warmUpPool(client, 2);
    long idle = System.nanoTime();
    // The link slows only once no renewal can start (the node unused for IN_USE_MILLIS).
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 500, "the node is no longer in use");
    trickle.gap(300);
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * TIMEOUT_MILLIS + 500,
        "the verdict is past a term plus an ask");
    SentinelMasterCheck check = SentinelCheckRefreshAttackTest.masterCheckOf(client);
    long asked = check.callerAsks();
    CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
      try {
        client.getLock("ask-first").tryLock();
      } catch (LockException e) {
        // only the timing matters
      }
    });
    Await.until(Duration.ofSeconds(10), () -> check.callerAsks() > asked,
        "thread 1 asks the sentinels");
    long began = System.nanoTime();
    CompletableFuture<String> second = CompletableFuture.supplyAsync(() -> {
      try {
        return "tryLock=" + client.getLock("ask-second").tryLock(100, TimeUnit.MILLISECONDS);
      } catch (LockException e) {
        return e.toString();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return e.toString();
      }
    });
    Await.until(Duration.ofSeconds(30),
        () -> second.isDone() || millisSince(began) > 2L * TIMEOUT_MILLIS + 4_000,
        "thread 2 returns, or an ask and four seconds pass");
    trickle.cut();
    String outcome = second.get(30, TimeUnit.SECONDS);
    long took = millisSince(began);
    first.get(30, TimeUnit.SECONDS);
    assertTrue(took <= 2L * TIMEOUT_MILLIS + 1_000, "tryLock(100 ms) took " + took + " ms ("
        + outcome + "; sentinel timeout " + TIMEOUT_MILLIS + " ms: an ask is at most "
        + 2L * TIMEOUT_MILLIS + " ms)");
  }

  /**
   * Question 4: the renewal's executor fails with an {@code Error} — {@code OutOfMemoryError:
   * unable to create native thread} is what {@code ThreadPoolExecutor.execute} throws when the
   * process is out of threads, and the client's I/O pool makes a thread per task. {@code
   * refreshDue} sets its flag, then catches only {@code RuntimeException}: the flag stays set and
   * no later tick renews anything, for the client's life (callers then ask the sentinels
   * themselves, each term: safe, but every lock call waits for them again). The engine's tick
   * ({@code LockEngine.refreshMasterCheck}) also catches only {@code RuntimeException}, so the
   * scheduled task itself is cancelled. Style rule 5: every scheduled task catches Throwable.
   */
  @Test
  // A DEFECT of round 28, fixed.
  void renewal_executorThrowingAnError_doesNotStopLaterRenewals() {
    sentinels = RedisSentinelSetup.start("ask-renew-error");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort master = sentinels.master().hostAndPort();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        new ArrayList<>(sentinels.sentinels()), config());
    check.confirm(master); // in use from now on
    long from = System.nanoTime();
    Await.until(Duration.ofSeconds(10),
        () -> millisSince(from) > SentinelMasterCheck.VERDICT_MILLIS - 150, "the verdict is due");
    try {
      check.refreshDue(task -> {
        throw new OutOfMemoryError("unable to create native thread: possibly out of memory");
      });
    } catch (OutOfMemoryError expected) {
      // what the engine's tick would see
    }
    long after = System.nanoTime();
    Await.until(Duration.ofSeconds(10), () -> {
      check.refuseIfNamedOther(master);
      check.refreshDue(Runnable::run);
      return check.backgroundAsks() >= 1 || millisSince(after) > 3_000;
    }, "a later tick renews, or three seconds pass");
    assertTrue(check.backgroundAsks() >= 1, "no renewal ran in the 3 s after one tick's executor "
        + "failed with an Error (caller asks " + check.callerAsks() + ")");
  }

  private static JedisClientConfig config() {
    return DefaultJedisClientConfig.builder().connectionTimeoutMillis(TIMEOUT_MILLIS)
        .socketTimeoutMillis(TIMEOUT_MILLIS).build();
  }

  private static HostAndPort address(FaultProxy proxy) {
    return new HostAndPort("127.0.0.1", proxy.port());
  }

  private static HostAndPort address(ServerSocket socket) {
    return new HostAndPort(socket.getInetAddress().getHostAddress(), socket.getLocalPort());
  }

  private static long millisSince(long nanos) {
    return SentinelCheckRefreshAttackTest.millisSince(nanos);
  }

  /**
   * A slow link: requests pass at once, replies a byte every {@code gapMillis}; {@link #cut}
   * breaks every connection (the link fails) and lets later ones through at full speed.
   */
  static final class TrickleProxy implements AutoCloseable {
    private final ServerSocket server;
    private final int upstreamPort;
    private volatile long gapMillis;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger accepted = new AtomicInteger();

    TrickleProxy(int upstreamPort, long gapMillis) throws IOException {
      this.upstreamPort = upstreamPort;
      this.gapMillis = gapMillis;
      this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
      Thread acceptor = new Thread(this::accept, "trickle-accept");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    HostAndPort address() {
      return new HostAndPort("127.0.0.1", server.getLocalPort());
    }

    /** From now on, replies pass a byte every {@code millis} (0: at once). */
    void gap(long millis) {
      gapMillis = millis;
    }

    int accepted() {
      return accepted.get();
    }

    void cut() {
      gapMillis = 0; // the link recovers: new connections are fast
      for (Socket s : sockets) {
        try {
          s.close();
        } catch (IOException ignored) {
          // closing anyway
        }
      }
    }

    private void accept() {
      while (!server.isClosed()) {
        try {
          Socket client = server.accept();
          Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
          sockets.add(client);
          sockets.add(upstream);
          accepted.incrementAndGet();
          pump(client, upstream, false);
          pump(upstream, client, true);
        } catch (IOException e) {
          return;
        }
      }
    }

    private void pump(Socket from, Socket to, boolean slowed) {
      Thread t = new Thread(() -> {
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
          byte[] buffer = new byte[8192];
          int n;
          while ((n = in.read(buffer, 0, slowed && gapMillis > 0 ? 1 : buffer.length)) > 0) {
            if (slowed && gapMillis > 0) {
              Thread.sleep(gapMillis); // the slow link itself, not synchronisation
            }
            out.write(buffer, 0, n);
            out.flush();
          }
        } catch (IOException | InterruptedException e) {
          // cut
        } finally {
          try {
            from.close();
            to.close();
          } catch (IOException ignored) {
            // closing anyway
          }
        }
      }, "trickle-pump");
      t.setDaemon(true);
      t.start();
    }

    @Override
    public void close() throws IOException {
      server.close();
      cut();
    }
  }
}
