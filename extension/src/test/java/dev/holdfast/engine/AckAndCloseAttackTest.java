package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
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
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.args.UnblockType;

/**
 * Attack round 33 on 20ec0db (an error answering the WAIT sent after a script whose reply was
 * read is "ran, unconfirmed") and 77f7ebb (close() sends the force-unlock seals still owed).
 * The WAIT's error is given by a per-command proxy ({@link CommandProxy}) in front of a master with
 * one replica: the script reached Redis and ran, the WAIT did not, and the client reads an
 * {@code -UNBLOCKED} (as {@code CLIENT UNBLOCK id ERROR} gives) or {@code -BUSY} in its place.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class AckAndCloseAttackTest extends ProxiedClientFixture {

  private static final String UNBLOCKED =
      "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n";
  private static final String BUSY =
      "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

  @RegisterExtension
  static final RedisExtension replicated = RedisExtension.replicated(1);

  private final List<ExecutorService> threads = new ArrayList<>();
  private final List<CommandProxy> proxies = new ArrayList<>();

  @AfterEach
  void stopThreadsAndProxies() {
    boolean unused = proxies.stream().anyMatch(p -> p.unusedAnswer(UNBLOCKED));
    proxies.forEach(CommandProxy::releaseAll);
    threads.forEach(ExecutorService::shutdownNow);
    proxies.forEach(CommandProxy::close);
    assertFalse(unused, "a WAIT error armed by the probe was never given: the probe staged "
        + "nothing");
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

  private CommandProxy toMaster() throws IOException {
    CommandProxy p = new CommandProxy(replicated.server().port());
    proxies.add(p);
    return p;
  }

  /** A client through {@code p} to the replicated master, its scripts loaded. */
  private LockClient replicatedClient(CommandProxy p, String syncReplicas) {
    LockClient r = clients.create(Map.of(LockClientConfig.ADDRESS, p.uri(),
        LockClientConfig.TIMEOUT, "5s", LockClientConfig.WATCHDOG_TIMEOUT, "30s",
        LockClientConfig.SYNC_REPLICAS, syncReplicas));
    DistributedLock warm = r.getLock("ack-warm-" + System.nanoTime());
    warm.lock();
    warm.lock();
    warm.unlock();
    warm.unlock();
    return r;
  }

  private static Predicate<List<String>> waitAfterScriptNaming(String field) {
    return args -> args.get(0).equalsIgnoreCase("WAIT")
        && args.indexOf(CommandProxy.AFTER) + 1 < args.size()
        && args.get(args.indexOf(CommandProxy.AFTER) + 1).toUpperCase(Locale.ROOT)
            .startsWith("EVAL")
        && args.subList(args.indexOf(CommandProxy.AFTER), args.size()).contains(field);
  }

  private static Predicate<List<String>> scriptNaming(String field) {
    return args -> args.get(0).toUpperCase(Locale.ROOT).startsWith("EVAL")
        && args.subList(0, args.indexOf(CommandProxy.AFTER)).contains(field);
  }

  private static boolean believes(LockClient client, String key, long threadId) {
    LockEngine engine = Clients.engine(client);
    return engine.holds().values().stream().anyMatch(h -> h.names.key().equals(key)
        && h.threadId == threadId && engine.live(h));
  }

  private long threadIdOf(ExecutorService owner) throws Exception {
    return get(owner.submit(() -> Thread.currentThread().getId()));
  }

  private LockClient directToMaster() {
    return clients.create(Map.of(LockClientConfig.ADDRESS, replicated.server().uri()));
  }

  // ---------------------------------------------------------------------------------------
  // (1) WAIT answered with an error after the script ran

  /**
   * A fresh acquisition (sync-replicas auto) ran; its WAIT is answered {@code -UNBLOCKED}: the
   * grant is unconfirmed and rolled back. Redis keeps no field of it, the client believes no
   * hold, and a rival takes the lock at once.
   */
  @Test
  void acquire_waitUnblocked_rolledBack_noFieldLeft() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    p.arm(waitAfterScriptNaming(field)).answer(UNBLOCKED);
    DistributedLock lock = r.getLock("ack-fresh");
    Future<Boolean> tried = owner.submit(() -> lock.tryLock());
    try {
      assertFalse(get(tried), "a grant whose WAIT failed is not returned as acquired");
    } catch (java.util.concurrent.ExecutionException e) {
      assertTrue(e.getCause() instanceof LockException, "reported not granted: " + e);
    }
    assertFalse(believes(r, "ack-fresh", ownerId), "hold believed after a rollback");
    assertEquals(null, master.hget("ack-fresh", field), "the rolled-back grant left its field");
    assertTrue(directToMaster().getLock("ack-fresh").tryLock(), "a rival takes the lock");
  }

  /**
   * The acquisition's WAIT is answered {@code -UNBLOCKED}, and its rollback (RESOLVE) is
   * answered {@code -BUSY} (another application's slow script started between the two): the
   * rollback did not run. The grant must not be left in Redis for its whole lease with nobody
   * believing it: settled (re-sent, or owed to the background) so the lock comes free soon.
   */
  // A DEFECT of round 33, fixed.
  @Test
  void acquire_waitUnblocked_rollbackBusy_noFieldLeftForTheLease() throws Exception {
    acquireWaitErrorRollbackBusy("ack-busyback", "auto");
  }

  private void acquireWaitErrorRollbackBusy(String name, String syncReplicas) throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, syncReplicas);
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    CommandProxy.Rule wait = p.arm(waitAfterScriptNaming(field));
    DistributedLock lock = r.getLock(name);
    Future<Boolean> tried = owner.submit(() -> lock.tryLock());
    wait.awaitHeld();
    // Every later script naming the field (the rollback, any re-send of it) is refused BUSY.
    List<CommandProxy.Rule> busy = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      CommandProxy.Rule b = p.arm(scriptNaming(field));
      b.answer(BUSY);
      busy.add(b);
    }
    wait.answer(UNBLOCKED);
    Throwable thrown = null;
    boolean acquired = false;
    try {
      acquired = get(tried);
    } catch (java.util.concurrent.ExecutionException e) {
      thrown = e.getCause();
    }
    boolean believed = believes(r, name, ownerId);
    for (CommandProxy.Rule b : busy) {
      b.disarm(); // Redis answers again
    }
    assertFalse(acquired && !believed, "acquired but not believed");
    if (!believed) {
      // Nobody believes the grant: it must not stay in Redis until its 30 s lease ends.
      Await.until(Duration.ofSeconds(10), () -> master.hget(name, field) == null,
          "the unconfirmed grant (" + thrown + ") gone from Redis within 10 s (lease 30 s), "
          + "field now " + master.hget(name, field));
      assertTrue(directToMaster().getLock(name).tryLock(), "a rival takes the lock");
    } else {
      assertTrue(master.hget(name, field) != null, "a hold believed while Redis has no field");
    }
  }

  /** The same with sync-replicas 1 (WAIT pipelined with the script). */
  // A DEFECT of round 33, fixed.
  @Test
  void acquire_syncReplicasFixed_waitUnblocked_rollbackBusy_noFieldLeftForTheLease()
      throws Exception {
    acquireWaitErrorRollbackBusy("ack-busyback1", "1");
  }

  /**
   * A re-entry (count 1 to 2) whose WAIT is answered {@code -UNBLOCKED}: rolled back to count
   * 1. The outer hold is still believed and Redis has count 1; the outer unlock frees the lock.
   */
  @Test
  void reentry_waitUnblocked_rolledBackToOne_outerUnlockFrees() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    DistributedLock lock = r.getLock("ack-reenter");
    get(owner.submit(() -> lock.lock()));
    p.arm(waitAfterScriptNaming(field)).answer(UNBLOCKED);
    Future<Boolean> inner = owner.submit(() -> lock.tryLock());
    try {
      assertFalse(get(inner), "a re-entry whose WAIT failed is not returned as acquired");
    } catch (java.util.concurrent.ExecutionException e) {
      assertTrue(e.getCause() instanceof LockException, "reported not granted: " + e);
    }
    assertEquals("1", master.hget("ack-reenter", field), "Redis count after the rollback");
    assertTrue(believes(r, "ack-reenter", ownerId), "the outer hold still believed");
    assertEquals(1, (int) get(owner.submit(lock::getHoldCount)), "hold count");
    get(owner.submit(lock::unlock));
    assertFalse(master.exists("ack-reenter"), "the outer unlock freed the lock");
    assertTrue(directToMaster().getLock("ack-reenter").tryLock(), "a rival takes the lock");
  }

  /**
   * A re-entry (count 1 to 2) whose WAIT is answered {@code -UNBLOCKED} and whose rollback is
   * answered {@code -BUSY}: Redis keeps count 2 while the thread believes 1 (or its hold is
   * given up). Whatever the client decides, once the thread has unlocked what it believes it
   * holds, the lock must not stay taken by nobody for the lease.
   */
  @Test
  void reentry_waitUnblocked_rollbackBusy_outerUnlockLeavesNothing() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    DistributedLock lock = r.getLock("ack-reenter-busy");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule wait = p.arm(waitAfterScriptNaming(field));
    Future<Boolean> inner = owner.submit(() -> lock.tryLock());
    wait.awaitHeld();
    List<CommandProxy.Rule> busy = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      CommandProxy.Rule b = p.arm(scriptNaming(field));
      b.answer(BUSY);
      busy.add(b);
    }
    wait.answer(UNBLOCKED);
    boolean acquired;
    try {
      acquired = get(inner);
    } catch (java.util.concurrent.ExecutionException e) {
      acquired = false;
    }
    busy.forEach(CommandProxy.Rule::disarm);
    int reported = get(owner.submit(lock::getHoldCount)); // Redis's count: 2 here
    Throwable unlockFailed = null;
    for (int i = 0; i < (acquired ? 2 : 1); i++) { // the sections the application took
      try {
        get(owner.submit(lock::unlock));
      } catch (java.util.concurrent.ExecutionException e) {
        unlockFailed = e.getCause(); // reported lost: fine
        break;
      }
    }
    String left = master.hget("ack-reenter-busy", field);
    String what = "re-entry " + (acquired ? "acquired" : "refused") + ", getHoldCount "
        + reported + ", unlock " + (unlockFailed == null ? "ok" : unlockFailed) + ", count left "
        + left;
    assertFalse(believes(r, "ack-reenter-busy", ownerId), "believed after its unlocks: " + what);
    Await.until(Duration.ofSeconds(10), () -> master.hget("ack-reenter-busy", field) == null,
        "no field left for the lease: " + what);
    assertTrue(directToMaster().getLock("ack-reenter-busy").tryLock(), "a rival takes it");
  }

  /**
   * sync-replicas 1, the script flushed (NOSCRIPT): the pipelined WAIT passes, the EVAL re-send
   * runs, and the WAIT sent after it is answered {@code -UNBLOCKED}: rolled back, no field left.
   */
  @Test
  void acquire_noScriptThenWaitUnblocked_rolledBack() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "1");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    replicated.server().withAdmin(j -> j.scriptFlush());
    // The WAIT after the EVAL (not the one pipelined after the refused EVALSHA).
    p.arm(args -> waitAfterScriptNaming(field).test(args)
        && args.get(args.indexOf(CommandProxy.AFTER) + 1).equalsIgnoreCase("EVAL"))
        .answer(UNBLOCKED);
    DistributedLock lock = r.getLock("ack-noscript");
    Future<Boolean> tried = owner.submit(() -> lock.tryLock());
    try {
      assertFalse(get(tried), "a grant whose WAIT failed is not returned as acquired");
    } catch (java.util.concurrent.ExecutionException e) {
      assertTrue(e.getCause() instanceof LockException, "reported not granted: " + e);
    }
    assertFalse(believes(r, "ack-noscript", ownerId), "hold believed after a rollback");
    assertEquals(null, master.hget("ack-noscript", field), "the rolled-back grant's field");
  }

  /**
   * sync-replicas 1, the script flushed: the pipelined WAIT (after the EVALSHA refused NOSCRIPT,
   * so before anything ran) is answered {@code -UNBLOCKED}; the EVAL re-send runs the grant and
   * its own WAIT passes. Acquired, or refused with no field left: never a grant left behind.
   */
  @Test
  void acquire_noScript_pipelinedWaitUnblocked_noGrantLeftBehind() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "1");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    replicated.server().withAdmin(j -> j.scriptFlush());
    p.arm(args -> waitAfterScriptNaming(field).test(args)
        && args.get(args.indexOf(CommandProxy.AFTER) + 1).equalsIgnoreCase("EVALSHA"))
        .answer(UNBLOCKED);
    DistributedLock lock = r.getLock("ack-noscript-pipe");
    Future<Boolean> tried = owner.submit(() -> lock.tryLock());
    boolean acquired;
    Throwable thrown = null;
    try {
      acquired = get(tried);
    } catch (java.util.concurrent.ExecutionException e) {
      thrown = e.getCause();
      acquired = false;
    }
    boolean believed = believes(r, "ack-noscript-pipe", ownerId);
    String count = master.hget("ack-noscript-pipe", field);
    assertEquals(acquired, believed, "acquired against believed (" + thrown + ")");
    assertEquals(acquired, count != null, "acquired " + acquired + " (" + thrown
        + "), Redis count " + count);
  }

  /**
   * A final unlock (sync-replicas auto) ran; its WAIT is answered {@code -UNBLOCKED}: the
   * release stands (warning), the hold is not believed, a rival takes the lock.
   */
  @Test
  void finalUnlock_waitUnblocked_released_notBelieved() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    LossRecorder losses = LossRecorder.on(r);
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    DistributedLock lock = r.getLock("ack-release");
    get(owner.submit(() -> lock.lock()));
    p.arm(waitAfterScriptNaming(field)).answer(UNBLOCKED);
    get(owner.submit(lock::unlock)); // ran: no exception
    assertFalse(believes(r, "ack-release", ownerId), "hold believed after its release ran");
    assertTrue(directToMaster().getLock("ack-release").tryLock(), "a rival takes the lock");
    assertTrue(losses.count() == 0, "no loss reported: " + losses);
  }

  /**
   * A LockHold's release and an unlockAfter keep (sync-replicas auto) ran; their WAITs are
   * answered {@code -UNBLOCKED}: neither is believed again, no loss is reported, and a rival
   * takes each lock (the keep's once its 300 ms are over).
   */
  @Test
  void lockHoldReleaseAndKeep_waitUnblocked_notBelievedAgain() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    LossRecorder losses = LossRecorder.on(r);
    LockClient other = directToMaster();
    String me = r.getClientId();
    Predicate<List<String>> mine = args -> args.get(0).equalsIgnoreCase("WAIT")
        && args.subList(args.indexOf(CommandProxy.AFTER), args.size()).stream()
            .anyMatch(a -> a.startsWith(me));
    dev.holdfast.LockHold hold = r.getLock("ack-hold").acquire(Duration.ofSeconds(5),
        Duration.ofSeconds(60));
    p.arm(mine).answer(UNBLOCKED);
    hold.release();
    assertFalse(hold.isHeld(), "a released LockHold held");
    assertTrue(other.getLock("ack-hold").tryLock(), "a rival takes the released lock");
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    DistributedLock kept = r.getLock("ack-keep");
    get(owner.submit(() -> kept.lock()));
    p.arm(mine).answer(UNBLOCKED);
    get(owner.submit(() -> Clients.engine(r).unlockAfter(kept, Duration.ofMillis(300))));
    assertFalse(believes(r, "ack-keep", ownerId), "a kept lock believed after its unlock");
    Await.until(Duration.ofSeconds(10), () -> other.getLock("ack-keep").tryLock(),
        "a rival takes the kept lock once its keep ran out");
    assertEquals(0, losses.count(), "no loss reported: " + losses);
  }

  /**
   * Real Redis, no proxy: the replica is stalled by a slow script, so the WAIT after a final
   * release (sync-replicas auto, sync-timeout 20 s) blocks; {@code CLIENT UNBLOCK id ERROR} on
   * the master ends it with {@code -UNBLOCKED}. The release ran: not believed again, no loss
   * reported, a rival takes the lock.
   */
  @Test
  void finalUnlock_realClientUnblockError_notBelievedAgain() throws Exception {
    dev.holdfast.testing.RedisServer replica = replicated.replicas().get(0);
    LockClient r = clients.create(Map.of(LockClientConfig.ADDRESS, replicated.server().uri(),
        LockClientConfig.TIMEOUT, "5s", LockClientConfig.WATCHDOG_TIMEOUT, "30s",
        LockClientConfig.SYNC_REPLICAS, "auto", LockClientConfig.SYNC_TIMEOUT, "20s"));
    LossRecorder losses = LossRecorder.on(r);
    ExecutorService owner = thread("owner");
    ExecutorService slow = thread("slow-script");
    long ownerId = threadIdOf(owner);
    DistributedLock lock = r.getLock("ack-real");
    get(owner.submit(() -> lock.lock()));
    replica.withAdmin(j -> j.configSet("busy-reply-threshold", "50"));
    Future<?> busy = slow.submit(() -> replica.withAdmin(j -> j.eval(
        "local t = redis.call('TIME')[1] while redis.call('TIME')[1] - t < 6 do end return 1")));
    try {
      Await.until(Duration.ofSeconds(10), () -> {
        try {
          replica.withAdmin(j -> j.ping());
          return false;
        } catch (RuntimeException e) {
          return String.valueOf(e.getMessage()).startsWith("BUSY");
        }
      }, "the replica busy with a slow script");
      Future<?> release = owner.submit(lock::unlock);
      long[] waiting = new long[1];
      Await.until(Duration.ofSeconds(10), () -> {
        for (String line : replicated.server().withAdmin(j -> j.clientList()).split("\n")) {
          if (line.contains("cmd=wait")) {
            waiting[0] = Long.parseLong(line.replaceAll("^id=(\\d+) .*$", "$1").trim());
            return true;
          }
        }
        return false;
      }, "the release's WAIT blocked");
      replicated.server().withAdmin(j -> j.clientUnblock(waiting[0],
          UnblockType.ERROR));
      get(release);
      assertFalse(believes(r, "ack-real", ownerId), "hold believed after its release ran");
      assertFalse(new RedisProbe(replicated.server()).exists("ack-real"), "the release ran");
      LockClient rival = clients.create(Map.of(LockClientConfig.ADDRESS,
          replicated.server().uri(), LockClientConfig.SYNC_REPLICAS, "none")); // replica busy
      assertTrue(rival.getLock("ack-real").tryLock(), "a rival takes the lock");
      assertEquals(0, losses.count(), "no loss reported: " + losses);
    } finally {
      Await.until(Duration.ofSeconds(15), () -> {
        try {
          replica.withAdmin(j -> j.scriptKill());
        } catch (RuntimeException e) {
          // not busy any more, or not yet killable
        }
        return busy.isDone();
      }, "the slow script ended");
    }
  }

  /**
   * forceUnlock() (sync-replicas auto) of a lock another client holds ran; its WAIT is answered
   * {@code -UNBLOCKED}: reported deleted (unconfirmed, warned), the key gone.
   */
  @Test
  void forceUnlock_waitUnblocked_reportsDeleted() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    LockClient x = directToMaster();
    assertTrue(x.getLock("ack-force").tryLock());
    p.arm(args -> args.get(0).equalsIgnoreCase("WAIT")
        && args.subList(args.indexOf(CommandProxy.AFTER), args.size()).contains("ack-force"))
        .answer(UNBLOCKED);
    assertTrue(r.getLock("ack-force").forceUnlock(), "the force-unlock ran");
    assertFalse(new RedisProbe(replicated.server()).exists("ack-force"), "key deleted");
  }

  /**
   * For a fair lock, a read-write lock's write and read sides and a LockHold: a fresh
   * acquisition whose WAIT is answered {@code -UNBLOCKED} is rolled back: not believed, and a
   * rival client (no queue entry, no field in its way) takes the lock at once.
   */
  @Test
  void otherKinds_waitUnblocked_rolledBack_rivalTakesAtOnce() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    LockClient other = directToMaster();
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    List<String> kinds = List.of("fair", "write", "read", "hold");
    for (String kind : kinds) {
      String name = "ack-kind-" + kind;
      DistributedLock mine = switch (kind) {
        case "fair" -> r.getFairLock(name);
        case "write" -> r.getReadWriteLock(name).writeLock();
        case "read" -> r.getReadWriteLock(name).readLock();
        default -> r.getLock(name);
      };
      CommandProxy.Rule wait = p.arm(args -> args.get(0).equalsIgnoreCase("WAIT")
          && args.subList(args.indexOf(CommandProxy.AFTER), args.size()).stream()
              .anyMatch(a -> a.contains(name)));
      wait.answer(UNBLOCKED);
      java.util.concurrent.atomic.AtomicReference<dev.holdfast.LockHold> hold =
          new java.util.concurrent.atomic.AtomicReference<>();
      Future<Boolean> tried = owner.submit(() -> {
        if (kind.equals("hold")) {
          hold.set(mine.acquire(Duration.ofMillis(200), Duration.ofSeconds(60)));
          return hold.get() != null;
        }
        return mine.tryLock(200, TimeUnit.MILLISECONDS);
      });
      boolean acquired;
      try {
        acquired = get(tried);
      } catch (java.util.concurrent.ExecutionException e) {
        assertTrue(e.getCause() instanceof LockException, kind + ": " + e);
        acquired = false;
      }
      assertTrue(wait.taken(), kind + ": the WAIT after its grant was answered with an error");
      if (acquired) {
        // A retry within the wait got a confirmed grant (the rule answers one WAIT): fine.
        if (hold.get() != null) {
          assertTrue(hold.get().isHeld(), kind + ": acquired, not held");
          hold.get().release();
        } else {
          assertTrue(believes(r, name, ownerId), kind + ": acquired, not believed");
          get(owner.submit(mine::unlock));
        }
        continue;
      }
      assertFalse(believes(r, name, ownerId), kind + ": believed after a rollback");
      DistributedLock rivals = switch (kind) {
        case "fair" -> other.getFairLock(name);
        case "write", "read" -> other.getReadWriteLock(name).writeLock();
        default -> other.getLock(name);
      };
      assertTrue(rivals.tryLock(), kind + ": a rival takes the lock at once after the rollback");
      rivals.unlock();
    }
  }

  /**
   * A local handoff: TRANSFER ran (the waiter's field is in Redis), its WAIT is answered
   * {@code -UNBLOCKED}. The releaser does not believe its hold; the waiter either holds it
   * (Redis has its field, a rival cannot take it) or not (no field of it left): one holder at
   * most, and no lock left held by nobody.
   */
  @Test
  void handOff_waitUnblocked_oneHolderAtMost_noneLeftBehind() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    ExecutorService waiting = thread("waiter");
    long ownerId = threadIdOf(owner);
    long waiterId = threadIdOf(waiting);
    String ownerField = r.getClientId() + ":" + ownerId;
    String waiterField = r.getClientId() + ":" + waiterId;
    DistributedLock lock = r.getLock("ack-hand");
    get(owner.submit(() -> lock.lock()));
    Future<Boolean> waiter = waiting.submit(() -> lock.tryLock(3, TimeUnit.SECONDS));
    LockEngine engine = Clients.engine(r);
    LockNames names = LockNames.of("", "ack-hand");
    Await.until(Duration.ofSeconds(20), () -> {
      WaitEntry entry = engine.subscriptions().peek(names);
      return entry != null && entry.subscribed() && entry.candidates() == 1;
    }, "a handoff candidate parked");
    p.arm(waitAfterScriptNaming(ownerField)).answer(UNBLOCKED);
    get(owner.submit(lock::unlock));
    boolean waiterHolds = get(waiter);
    assertFalse(believes(r, "ack-hand", ownerId), "the releaser believes its hold");
    assertEquals(null, master.hget("ack-hand", ownerField), "the releaser's field");
    LockClient other = directToMaster();
    if (waiterHolds) {
      assertTrue(believes(r, "ack-hand", waiterId), "waiter acquired, not believed");
      assertTrue(master.hget("ack-hand", waiterField) != null, "waiter believed, no field");
      assertFalse(other.getLock("ack-hand").tryLock(), "two holders: the waiter and a rival");
      get(waiting.submit(lock::unlock));
    } else {
      assertFalse(believes(r, "ack-hand", waiterId), "waiter not acquired, but believed");
      Await.until(Duration.ofSeconds(10), () -> master.hget("ack-hand", waiterField) == null,
          "the waiter's unconfirmed grant gone");
    }
    assertTrue(other.getLock("ack-hand").tryLock(), "a rival takes the lock");
  }

  /**
   * The watchdog's renewal (watchdog 3 s, renewed every second) ran; its WAIT is answered
   * {@code -UNBLOCKED}: the hold is at risk at most, never reported lost while Redis has it;
   * the next renewal confirms it, and the unlock frees the lock.
   */
  @Test
  void renewal_waitUnblocked_noFalseLoss() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = clients.create(Map.of(LockClientConfig.ADDRESS, p.uri(),
        LockClientConfig.TIMEOUT, "5s", LockClientConfig.WATCHDOG_TIMEOUT, "3s",
        LockClientConfig.SYNC_REPLICAS, "auto"));
    LossRecorder losses = LossRecorder.on(r);
    RedisProbe master = new RedisProbe(replicated.server());
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    DistributedLock lock = r.getLock("ack-renew");
    get(owner.submit(() -> lock.lock()));
    CommandProxy.Rule renewalWait = p.arm(waitAfterScriptNaming(field));
    renewalWait.awaitHeld();
    renewalWait.answer(UNBLOCKED);
    CommandProxy.Rule next = p.arm(waitAfterScriptNaming(field));
    next.awaitHeld(); // the next renewal's WAIT
    next.forward();
    assertTrue(master.hget("ack-renew", field) != null, "Redis has the hold");
    assertTrue(believes(r, "ack-renew", ownerId), "the hold is believed");
    assertEquals(0, losses.count(), "no loss reported: " + losses);
    get(owner.submit(lock::unlock));
    assertTrue(directToMaster().getLock("ack-renew").tryLock(), "a rival takes the lock");
  }

  /**
   * The master is demoted between a final release's script and its WAIT (a real demotion:
   * the release ran on the master and reached the replica, the replica is promoted and the old
   * master made its replica, as a coordinated failover does). The WAIT is answered "WAIT cannot
   * be used with replica instances", which is taken as the refusal of the whole call, as if
   * the script had run on a replica. The release did run: the owner must not believe its hold
   * again while a rival, on the new master, takes the lock.
   */
  // A DEFECT of round 33, fixed.
  @Test
  void finalUnlock_masterDemotedBeforeItsWait_holdNotBelievedAgain() throws Exception {
    CommandProxy p = toMaster();
    LockClient r = replicatedClient(p, "auto");
    ExecutorService owner = thread("owner");
    long ownerId = threadIdOf(owner);
    String field = r.getClientId() + ":" + ownerId;
    DistributedLock lock = r.getLock("ack-demoted");
    get(owner.submit(() -> lock.lock()));
    dev.holdfast.testing.RedisServer m = replicated.server();
    dev.holdfast.testing.RedisServer replica = replicated.replicas().get(0);
    RedisProbe onReplica = new RedisProbe(replica);
    Await.until(Duration.ofSeconds(10), () -> onReplica.hget("ack-demoted", field) != null,
        "the hold replicated");
    CommandProxy.Rule wait = p.arm(waitAfterScriptNaming(field));
    Future<?> release = owner.submit(lock::unlock);
    wait.awaitHeld(); // the release ran on the master
    try {
      Await.until(Duration.ofSeconds(10), () -> !onReplica.exists("ack-demoted"),
          "the release replicated");
      replica.withAdmin(Jedis::replicaofNoOne);
      m.withAdmin(j -> j.replicaof("127.0.0.1", replica.port()));
      wait.forward(); // now answered by a replica
      Throwable thrown = null;
      try {
        get(release);
      } catch (java.util.concurrent.ExecutionException e) {
        thrown = e.getCause();
      }
      boolean believed = believes(r, "ack-demoted", ownerId);
      LockClient other = clients.create(Map.of(LockClientConfig.ADDRESS, replica.uri()));
      boolean rivalTakes = other.getLock("ack-demoted").tryLock();
      assertFalse(believed && rivalTakes, "two holders: the owner, told " + (thrown == null
          ? "its release succeeded" : "its release failed (" + thrown + ")")
          + ", believes its hold while a rival took the lock on the new master");
    } finally {
      // Back as it was: the first server master, the other its replica.
      m.withAdmin(Jedis::replicaofNoOne);
      replica.withAdmin(j -> j.replicaof("127.0.0.1", m.port()));
      Await.until(Duration.ofSeconds(20), () -> replica.withAdmin(j -> j.info("replication"))
          .contains("master_link_status:up"), "the replica linked again");
    }
  }

  // ---------------------------------------------------------------------------------------
  // (2) close() with force-unlock seals owed

  /**
   * Six forceUnlock()s through a black-holed link (timeout 1 s) leave six seals owed; close()
   * is called with the link still black-holed. It must return within a generous bound (the
   * commit says about one command timeout in all), leave no seal owed, and end its threads.
   */
  @Test
  void closeUnderBlackHole_manySealsOwed_bounded() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    proxy.blackHole(true);
    List<Future<?>> calls = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      DistributedLock l = b.getLock("seal-many-" + i);
      calls.add(thread("force-" + i).submit(() ->
          assertThrows(LockException.class, l::forceUnlock)));
    }
    for (Future<?> f : calls) {
      get(f);
    }
    long start = System.nanoTime();
    b.close();
    long tookMillis = (System.nanoTime() - start) / 1_000_000L;
    proxy.blackHole(false);
    System.out.println("close() with six seals owed, black-holed, timeout 1 s: " + tookMillis
        + " ms");
    assertTrue(tookMillis < 8_000, "close() took " + tookMillis + " ms (timeout 1 s)");
    assertTrue(sealsOwed(b).isEmpty(), "no seal owed after close");
  }

  /**
   * A thread of B holds a lock; B's forceUnlock() of it goes into a black hole (throws, seal
   * owed, the hold left for the seal to decide). The link comes back: the held force-release
   * copy runs (B's field deleted), and B closes at once, its close() racing the background
   * cleanup round for the same seal; whichever lands it finds the copy ran and loses the hold.
   * A LockLost listener calls close() itself. close() returns within a bound, the loss is
   * reported (not dropped by the closing executors), the listener's close() does not deadlock.
   */
  @Test
  void sealAtClose_copyRan_lossReported_listenerClosesToo() throws Exception {
    CommandProxy p = new CommandProxy(redis.server().port());
    proxies.add(p);
    try (Jedis j = redis.server().admin()) {
      j.scriptLoad(LockScripts.FORCE_RELEASE.source());
      j.scriptLoad(LockScripts.FORCE_SEAL.source());
    }
    LockClient b = clients.create(Map.of(LockClientConfig.ADDRESS, p.uri(),
        LockClientConfig.TIMEOUT, "1s", LockClientConfig.WATCHDOG_TIMEOUT, "30s"));
    LossRecorder losses = LossRecorder.on(b);
    CompletableFuture<String> listenerClosed = new CompletableFuture<>();
    b.onLockLost(event -> {
      b.close();
      listenerClosed.complete(Thread.currentThread().getName());
    });
    ExecutorService owner = thread("owner");
    DistributedLock lock = b.getLock("seal-lost");
    get(owner.submit(() -> lock.lock()));
    List<CommandProxy.Rule> releases = new ArrayList<>();
    for (int i = 0; i < RedisTopology.ATTEMPTS; i++) {
      releases.add(p.arm(sha(LockScripts.FORCE_RELEASE)));
    }
    List<CommandProxy.Rule> seals = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      seals.add(p.arm(sha(LockScripts.FORCE_SEAL)));
    }
    assertThrows(LockException.class, lock::forceUnlock, "every send held");
    seals.get(0).awaitHeld(); // the background's first seal send
    releases.get(0).forward(); // the first copy runs late: B's field deleted
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("seal-lost"),
        "the late force-release copy ran");
    seals.forEach(CommandProxy.Rule::disarm); // seals land now, after the copy
    releases.forEach(CommandProxy.Rule::disarm);
    long start = System.nanoTime();
    b.close();
    long tookMillis = (System.nanoTime() - start) / 1_000_000L;
    assertTrue(tookMillis < 8_000, "close() took " + tookMillis + " ms");
    losses.awaitFirst(Duration.ofSeconds(10), "the hold the late copy deleted");
    listenerClosed.get(10, TimeUnit.SECONDS);
    assertTrue(sealsOwed(b).isEmpty(), "no seal owed after close");
  }

  private static Predicate<List<String>> sha(LockScript script) {
    return args -> args.get(0).equalsIgnoreCase("EVALSHA") && args.get(1).equals(script.sha1());
  }

  @SuppressWarnings("unchecked")
  private static java.util.Set<Object> sealsOwed(LockClient client) {
    try {
      var f = LockEngine.class.getDeclaredField("sealsOwed");
      f.setAccessible(true);
      return (java.util.Set<Object>) f.get(Clients.engine(client));
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }
}
