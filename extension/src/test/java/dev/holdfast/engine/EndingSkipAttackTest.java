package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Attack round 31 on e70979c (the ending-hold skip recorded on the hold), staged on a real Redis:
 * a thread's final call (release, local handoff, keep) is held back by a per-command proxy
 * while another thread of the same client force-unlocks the key; the force-unlock's check finds
 * the field gone and skips the hold as ending; the final call is then answered with an error
 * (BUSY, OOM, NOSCRIPT then OOM) that changed nothing. Invariant: once both calls returned, the
 * thread does not believe a hold that Redis does not have while another client takes the lock,
 * and the deleted hold is reported lost (not silently believed). Orders: the check before the
 * refused reply, and after it (the force-unlock's HMGET held back).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class EndingSkipAttackTest extends ProxiedClientFixture {

  private static final String BUSY =
      "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
  private static final String OOM =
      "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
  private static final String NOSCRIPT = "-NOSCRIPT No matching script. Please use EVAL.\r\n";

  /** A master with one replica: sync-replicas {@code auto} sends WAIT after a state change. */
  @RegisterExtension
  static final RedisExtension replicated = RedisExtension.replicated(1);

  private CommandProxy commands;
  private LockClient c;
  private LossRecorder losses;
  private final List<ExecutorService> threads = new ArrayList<>();

  @BeforeEach
  void startCommandProxy() throws IOException {
    commands = new CommandProxy(redis.server().port());
    c = viaCommandProxy();
    losses = LossRecorder.on(c);
  }

  @AfterEach
  void stop() {
    commands.releaseAll();
    threads.forEach(ExecutorService::shutdownNow);
    commands.close();
  }

  private LockClient viaCommandProxy() {
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, commands.uri(),
        LockClientConfig.TIMEOUT, "20s", LockClientConfig.WATCHDOG_TIMEOUT, "30s"));
    DistributedLock warm = client.getLock("warm"); // scripts loaded
    warm.lock();
    warm.lock();
    warm.unlock();
    warm.unlock();
    warm.forceUnlock();
    return client;
  }

  private ExecutorService thread(String name) {
    ExecutorService e = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    });
    threads.add(e);
    return e;
  }

  private static <T> T get(Future<T> f) throws Exception {
    return f.get(40, TimeUnit.SECONDS);
  }

  private static Predicate<List<String>> script() {
    return args -> args.get(0).toUpperCase(Locale.ROOT).startsWith("EVAL");
  }

  private static Predicate<List<String>> hmget() {
    return args -> args.get(0).equalsIgnoreCase("HMGET");
  }

  /**
   * Whether this client believes a hold of {@code key} by the owner {@code threadId} (its own
   * registry, as every call of the thread sees it: {@code isHeldByCurrentThread()} would ask
   * Redis, and hide a belief the thread's next calls act on).
   */
  private boolean believes(String key, long threadId) {
    return believes(c, key, threadId);
  }

  private static boolean believes(LockClient client, String key, long threadId) {
    LockEngine engine = Clients.engine(client);
    return engine.holds().values().stream().anyMatch(h -> h.names.key().equals(key)
        && h.threadId == threadId && engine.live(h));
  }

  private long threadIdOf(ExecutorService owner) throws Exception {
    return get(owner.submit(() -> Thread.currentThread().getId()));
  }

  /** The lock's key has a field, or nobody believes {@code believed}; a rival cannot share it. */
  private void assertOneHolder(String key, boolean believed, String who) {
    if (believed) {
      assertTrue(redisState.exists(key), who + " believes a hold Redis does not have; losses "
          + losses);
    }
    DistributedLock rivals = rival.getLock(key);
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(believed && rivalTakes, "two holders: " + who + " and a rival; losses "
          + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }

  private void assertReportedForced(String key) {
    Await.until(Duration.ofSeconds(20), () -> losses.reports().stream()
        .anyMatch(r -> r.event().lockName().equals(key)), "the force-unlocked hold reported");
    assertTrue(losses.reports().stream().anyMatch(r -> r.event().lockName().equals(key)
        && r.event().reason().contains("forceUnlock")), "reported as force-unlocked: " + losses);
  }

  /**
   * The release is held; forceUnlock() deletes the key and its check skips the ending hold;
   * then the release is answered with {@code error}: the hold is not believed again.
   */
  private void checkThenRefused(Function<LockClient, DistributedLock> lockOf, String name,
      String error) throws Exception {
    DistributedLock lock = lockOf.apply(c);
    ExecutorService owner = thread("owner");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule release = commands.arm(script());
    Future<?> unlock = owner.submit(lock::unlock);
    release.awaitHeld();
    assertTrue(lock.forceUnlock(), "the force-unlock deleted the key");
    assertFalse(redisState.exists(name));
    if (error.equals(NOSCRIPT)) {
      commands.arm(args -> args.get(0).equalsIgnoreCase("EVAL")).answer(OOM);
    }
    release.answer(error);
    Exception thrown = assertThrows(Exception.class, () -> get(unlock));
    assertTrue(thrown.getCause() instanceof LockException, "unlock() refused: " + thrown);
    boolean believed = believes(name, threadIdOf(owner));
    assertOneHolder(name, believed, "the owner whose refused release met a skipped check");
    assertReportedForced(name);
    assertFalse(get(owner.submit(lock::isHeldByCurrentThread)));
  }

  @ParameterizedTest
  @ValueSource(strings = {BUSY, OOM, NOSCRIPT})
  void unlock_refusedAfterTheCheckSkippedIt_isLostNotBelieved(String error) throws Exception {
    checkThenRefused(client -> client.getLock("plain"), "plain", error);
  }

  @Test
  void fairUnlock_refusedAfterTheCheckSkippedIt_isLostNotBelieved() throws Exception {
    checkThenRefused(client -> client.getFairLock("fair"), "fair", BUSY);
  }

  @Test
  void writeUnlock_refusedAfterTheCheckSkippedIt_isLostNotBelieved() throws Exception {
    checkThenRefused(client -> client.getReadWriteLock("rw").writeLock(), "rw", OOM);
  }

  @Test
  void readUnlock_refusedAfterTheCheckSkippedIt_isLostNotBelieved() throws Exception {
    checkThenRefused(client -> client.getReadWriteLock("rr").readLock(), "rr", BUSY);
  }

  /**
   * The other order: the release is refused while the force-unlock's check (HMGET) is held back;
   * the check then sees a hold no longer ending and decides.
   */
  @Test
  void unlock_refusedBeforeTheCheck_checkDecides() throws Exception {
    DistributedLock lock = c.getLock("before");
    ExecutorService owner = thread("owner");
    ExecutorService forcer = thread("forcer");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule release = commands.arm(script());
    Future<?> unlock = owner.submit(lock::unlock);
    release.awaitHeld();
    CommandProxy.Rule check = commands.arm(hmget());
    Future<Boolean> forced = forcer.submit(lock::forceUnlock);
    check.awaitHeld();
    assertFalse(redisState.exists("before"), "the force-unlock deleted the key");
    release.answer(BUSY);
    assertThrows(Exception.class, () -> get(unlock));
    check.forward();
    assertTrue(get(forced));
    boolean believed = believes("before", threadIdOf(owner));
    assertOneHolder("before", believed, "the owner whose refused release preceded the check");
    assertReportedForced("before");
  }

  /**
   * The refused release's own re-check (HMGET) is refused too (Redis still BUSY): a hold that
   * cannot be asked about after a delete is lost, not believed.
   */
  @Test
  void unlock_refusedAfterTheSkip_recheckRefusedToo_isLost() throws Exception {
    DistributedLock lock = c.getLock("recheck");
    ExecutorService owner = thread("owner");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule release = commands.arm(script());
    Future<?> unlock = owner.submit(lock::unlock);
    release.awaitHeld();
    assertTrue(lock.forceUnlock());
    CommandProxy.Rule recheck = commands.arm(hmget());
    release.answer(BUSY);
    recheck.awaitHeld();
    recheck.answer(BUSY);
    assertThrows(Exception.class, () -> get(unlock));
    boolean believed = believes("recheck", threadIdOf(owner));
    assertOneHolder("recheck", believed, "the owner whose re-check was refused");
    assertReportedForced("recheck");
  }

  /**
   * Not a force-unlock: the final release RAN (the key is gone), then the WAIT that sync-replicas
   * {@code auto} sends after it on the same connection, in its own round trip, is answered
   * {@code -BUSY} (a slow script of another application started between the two; real Redis,
   * real BUSY). The error is taken as the release's, "refused, nothing changed": the hold is
   * believed again while Redis has no field and a rival takes the lock.
   */
  // A DEFECT of round 31, fixed: a WAIT refused after its script ran is "ran, unconfirmed".
  @Test
  void finalUnlock_ranButItsWaitAnsweredBusy_holdNotBelievedAgain() throws Exception {
    assertWaitRefusalEndsTheHold("waited", (r, lock, owner, arm) -> {
      arm.run();
      return owner.submit(lock::unlock);
    });
  }

  /**
   * sync-replicas 1 pipelines the WAIT with the script in one write; the proxy splits them so
   * that a slow script runs between the two (rare on a real network: one write is usually read
   * whole). Same code shape: the WAIT's error is taken as the script's.
   */
  // A DEFECT of round 31, fixed: a WAIT refused after its script ran is "ran, unconfirmed".
  @Test
  void finalUnlock_syncReplicasFixed_ranButItsWaitAnsweredBusy_holdNotBelievedAgain()
      throws Exception {
    assertWaitRefusalEndsTheHold("waitfixed", "1", (r, lock, owner, arm) -> {
      arm.run();
      return owner.submit(lock::unlock);
    });
  }

  /** The same with unlockAfter's keep: the keep ran, its WAIT answered BUSY. */
  // A DEFECT of round 31, fixed: a WAIT refused after its script ran is "ran, unconfirmed".
  @Test
  void keep_ranButItsWaitAnsweredBusy_holdNotBelievedAgain() throws Exception {
    assertWaitRefusalEndsTheHold("waitkeep", (r, lock, owner, arm) -> {
      arm.run();
      return owner.submit(() -> Clients.engine(r).unlockAfter(lock, Duration.ofMillis(300)));
    });
  }

  /**
   * The same with a local handoff: TRANSFER ran (the waiter's field is in Redis), its WAIT
   * answered BUSY. The releaser must not believe its hold again (and never together with the
   * waiter, who settles its uncertain grant).
   */
  // A DEFECT of round 31, fixed: a WAIT refused after its script ran is "ran, unconfirmed".
  @Test
  void handOff_ranButItsWaitAnsweredBusy_releaserNotBelievedAgain() throws Exception {
    AtomicBoolean waiterHeld = new AtomicBoolean();
    ExecutorService waiting = thread("waiter");
    assertWaitRefusalEndsTheHold("waithand", (r, lock, owner, arm) -> {
      Future<Boolean> waiter = waiting.submit(() -> {
        boolean got = lock.tryLock(40, TimeUnit.SECONDS);
        waiterHeld.set(got);
        return got;
      });
      LockEngine engine = Clients.engine(r);
      LockNames names = LockNames.of("", "waithand");
      Await.until(Duration.ofSeconds(20), () -> {
        WaitEntry entry = engine.subscriptions().peek(names);
        return entry != null && entry.subscribed() && entry.candidates() == 1;
      }, "a handoff candidate parked");
      arm.run();
      return owner.submit(lock::unlock);
    });
  }

  /** What the final call is, on the owner's thread. */
  interface FinalCall {
    /** Calls {@code armWait} just before sending the final call (after any preparation). */
    Future<?> send(LockClient client, DistributedLock lock, ExecutorService owner,
        Runnable armWait);
  }

  private void assertWaitRefusalEndsTheHold(String name, FinalCall finalCall) throws Exception {
    assertWaitRefusalEndsTheHold(name, "auto", finalCall);
  }

  private void assertWaitRefusalEndsTheHold(String name, String syncReplicas, FinalCall finalCall)
      throws Exception {
    CommandProxy toMaster = new CommandProxy(replicated.server().port());
    ExecutorService slow = thread("slow-script");
    Future<?> busy = null;
    try {
      LockClient r = clients.create(Map.of(LockClientConfig.ADDRESS, toMaster.uri(),
          LockClientConfig.TIMEOUT, "20s", LockClientConfig.WATCHDOG_TIMEOUT, "30s",
          LockClientConfig.SYNC_REPLICAS, syncReplicas));
      RedisProbe master = new RedisProbe(replicated.server());
      DistributedLock warm = r.getLock(name + "-warm"); // the release script loaded
      warm.lock();
      warm.unlock();
      DistributedLock lock = r.getLock(name);
      ExecutorService owner = thread("owner");
      get(owner.submit(() -> lock.lock()));
      long ownerId = threadIdOf(owner);
      String field = r.getClientId() + ":" + ownerId;
      CompletableFuture<CommandProxy.Rule> armed = new CompletableFuture<>();
      // The WAIT right after the owner's final call (a script naming the owner's field).
      Future<?> ending = finalCall.send(r, lock, owner, () -> armed.complete(
          toMaster.arm(args -> args.get(0).equalsIgnoreCase("WAIT")
              && args.subList(args.indexOf(CommandProxy.AFTER), args.size()).contains(field))));
      CommandProxy.Rule wait = armed.get(30, TimeUnit.SECONDS);
      wait.awaitHeld();
      replicated.server().withAdmin(j -> j.configSet("busy-reply-threshold", "50"));
      busy = slow.submit(() -> replicated.server().withAdmin(j -> j.eval(
          "local t = redis.call('TIME')[1] while redis.call('TIME')[1] - t < 4 do end return 1")));
      Await.until(Duration.ofSeconds(10), () -> {
        try {
          replicated.server().withAdmin(j -> j.ping());
          return false;
        } catch (RuntimeException e) {
          return String.valueOf(e.getMessage()).startsWith("BUSY");
        }
      }, "Redis busy with a slow script");
      wait.forward();
      Throwable thrown = null; // the call ran: it may succeed unconfirmed, or report a loss
      try {
        get(ending);
      } catch (Exception e) {
        thrown = e;
      }
      killSlowScript(busy);
      // The keep's 300 ms run out; a release's field is gone already (a handoff's too).
      Await.until(Duration.ofSeconds(10), () -> master.hget(name, field) == null,
          "the owner's field gone from Redis");
      boolean believed = believes(r, name, ownerId);
      LockClient other = clients.create(Map.of(LockClientConfig.ADDRESS,
          replicated.server().uri()));
      DistributedLock rivals = other.getLock(name);
      boolean rivalTakes = rivals.tryLock();
      assertFalse(believed, "two holders: the owner, told " + (thrown == null
          ? "its final call succeeded" : "its final call failed (" + thrown.getCause() + ")")
          + ", believes the hold that call ended (its field is gone from Redis), while "
          + (rivalTakes ? "a rival took the lock" : "another holds it"));
    } finally {
      toMaster.releaseAll();
      toMaster.close();
      if (busy != null) {
        killSlowScript(busy); // a failed probe must not leave the next one a busy Redis
      }
    }
  }

  private void killSlowScript(Future<?> busy) {
    Await.until(Duration.ofSeconds(10), () -> {
      try {
        replicated.server().withAdmin(j -> j.scriptKill());
      } catch (RuntimeException e) {
        // not busy any more, or not yet killable
      }
      return busy.isDone();
    }, "the slow script killed");
  }

  /** A re-entered hold (count 2): its inner unlock is not final, so the check decides at once. */
  @Test
  void innerUnlock_refusedAfterTheCheck_holdLostAtTheCheck() throws Exception {
    DistributedLock lock = c.getLock("inner");
    ExecutorService owner = thread("owner");
    get(owner.submit(() -> {
      lock.lock();
      lock.lock();
    }));
    CommandProxy.Rule release = commands.arm(script());
    Future<?> unlock = owner.submit(lock::unlock);
    release.awaitHeld();
    assertTrue(lock.forceUnlock());
    assertReportedForced("inner");
    release.answer(OOM);
    assertThrows(Exception.class, () -> get(unlock));
    boolean believed = believes("inner", threadIdOf(owner));
    assertOneHolder("inner", believed, "the re-entered owner");
  }

  /**
   * A local handoff (TRANSFER) to a parked thread of the same client, held, refused after the
   * skipped check: the releaser is lost; the waiter, told nothing certain, may take the free
   * lock, but never together with a rival, and never while the releaser believes it.
   */
  @Test
  void handOff_refusedAfterTheCheckSkippedIt_releaserLost_oneHolderAtMost() throws Exception {
    DistributedLock lock = c.getLock("handoff");
    ExecutorService owner = thread("owner");
    ExecutorService waiting = thread("waiter");
    get(owner.submit(() -> lock.lock()));
    Future<Boolean> waiter = waiting.submit(() -> lock.tryLock(40, TimeUnit.SECONDS));
    LockEngine engine = Clients.engine(c);
    LockNames names = LockNames.of("", "handoff");
    Await.until(Duration.ofSeconds(20), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == 1;
    }, "a handoff candidate parked");
    CommandProxy.Rule transfer = commands.arm(script());
    Future<?> unlock = owner.submit(lock::unlock);
    List<String> sent = transfer.awaitHeld();
    // TRANSFER declares three keys; a release through Redis (two) is the case above.
    assertTrue(sent.size() > 2 && sent.get(2).equals("3"), "the handoff's script: " + sent);
    assertTrue(lock.forceUnlock());
    transfer.answer(BUSY);
    assertThrows(Exception.class, () -> get(unlock));
    boolean believed = believes("handoff", threadIdOf(owner));
    assertFalse(believed && !redisState.exists("handoff"), "the releaser believes a hold Redis "
        + "does not have; losses " + losses);
    boolean waiterHolds = get(waiter);
    assertFalse(believed && waiterHolds, "releaser and waiter both hold");
    if (waiterHolds) {
      assertTrue(redisState.exists("handoff"), "the waiter believes a hold Redis does not have");
      DistributedLock rivals = rival.getLock("handoff");
      assertFalse(rivals.tryLock(), "the waiter and a rival both hold");
      get(waiting.submit(lock::unlock));
    } else {
      assertOneHolder("handoff", believed, "the releaser");
    }
    assertReportedForced("handoff");
  }

  /** unlockAfter's keep, held, refused after the skipped check. */
  @Test
  void keep_refusedAfterTheCheckSkippedIt_isLostNotBelieved() throws Exception {
    DistributedLock lock = c.getLock("keep");
    ExecutorService owner = thread("owner");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule keep = commands.arm(script());
    LockEngine engine = Clients.engine(c);
    Future<?> unlock = owner.submit(() -> engine.unlockAfter(lock, Duration.ofSeconds(30)));
    keep.awaitHeld();
    assertTrue(lock.forceUnlock());
    keep.answer(OOM);
    assertThrows(Exception.class, () -> get(unlock));
    boolean believed = believes("keep", threadIdOf(owner));
    assertOneHolder("keep", believed, "the owner whose refused keep met a skipped check");
    assertReportedForced("keep");
  }

  /** A LockHold taken on one thread, released from another, refused after the skipped check. */
  @Test
  void lockHoldReleasedElsewhere_refusedAfterTheCheckSkippedIt_isLostNotBelieved()
      throws Exception {
    DistributedLock lock = c.getLock("owned");
    LockHold hold = get(thread("taker").submit(
        () -> lock.acquire(Duration.ofSeconds(10), Duration.ofSeconds(120))));
    CommandProxy.Rule release = commands.arm(script());
    Future<?> released = thread("releaser").submit(hold::release);
    release.awaitHeld();
    assertTrue(lock.forceUnlock());
    release.answer(BUSY);
    assertThrows(Exception.class, () -> get(released));
    assertOneHolder("owned", hold.isHeld(), "the LockHold");
    assertReportedForced("owned");
    assertFalse(hold.isHeld());
  }

  /** The same with the LockHold's keep (releaseAfter) refused. */
  @Test
  void lockHoldKeep_refusedAfterTheCheckSkippedIt_isLostNotBelieved() throws Exception {
    DistributedLock lock = c.getLock("ownedkeep");
    LockHold hold = get(thread("taker").submit(
        () -> lock.acquire(Duration.ofSeconds(10), Duration.ofSeconds(120))));
    CommandProxy.Rule keep = commands.arm(script());
    Future<?> released = thread("releaser").submit(
        () -> get(EngineAccess.releaseAfter(hold, 30_000).toCompletableFuture()));
    keep.awaitHeld();
    assertTrue(lock.forceUnlock());
    keep.answer(OOM);
    assertThrows(Exception.class, () -> get(released));
    assertOneHolder("ownedkeep", hold.isHeld(), "the LockHold");
    assertReportedForced("ownedkeep");
  }
}
