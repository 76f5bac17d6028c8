package dev.holdfast.engine;

import dev.holdfast.LockClientConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * The parameters of a {@link LockModelTest} run that every process must agree on, all derived
 * from the seed, and the time bounds the model holds calls to.
 *
 * @param seed           the run's seed; every random choice of every process derives from it
 * @param timeoutMillis  {@code holdfast.redis.timeout} of every client
 * @param watchdogMillis {@code holdfast.watchdog-timeout} of every client
 * @param locks          the lock names the actors share
 * @param threads        actor threads per client
 * @param probePort      the never-faulted probe server (127.0.0.1)
 * @param syncTimeoutMillis {@code holdfast.redis.sync-timeout} where replicas acknowledge
 *                       (each script call may wait that long for them); 0 without replicas
 */
record ModelSettings(long seed, int timeoutMillis, int watchdogMillis, List<String> locks,
    int threads, int probePort, int syncTimeoutMillis) {

  ModelSettings(long seed, int timeoutMillis, int watchdogMillis, List<String> locks,
      int threads, int probePort) {
    this(seed, timeoutMillis, watchdogMillis, locks, threads, probePort, 0);
  }

  /** These settings for clients whose calls wait up to {@code millis} for replicas. */
  ModelSettings withSyncTimeout(int millis) {
    return new ModelSettings(seed, timeoutMillis, watchdogMillis, locks, threads, probePort,
        millis);
  }

  /** Shortest and longest explicit lease: long next to the work done in a section. */
  static final int MIN_LEASE_MS = 1_000;
  static final int MAX_LEASE_MS = 3_000;
  /** Longest work inside a probe window. */
  static final int MAX_WORK_MS = 30;
  /** Longest wait given to tryLock(wait, ...). */
  static final int MAX_WAIT_MS = 1_500;
  /**
   * How long lock() and lockInterruptibly() may take. Holds are short (most last well under a
   * second; one in seven works 1-4 s; an actor releases after 5 s unless a call blocks), a lost
   * or abandoned hold expires within its lease (3 s at most), an outage lasts at most 4.5 s and
   * lock() gives up after one watchdog timeout of it (a failover takes 2-4 s; a replica's full
   * resync blocks nothing under sync-replicas=auto, which waits only for online replicas), and
   * nine threads compete for six lock keys, about half of the new holds for the hot one; 30 s is
   * several times the worst plausible queue, so exceeding it means a waiter that was not woken
   * or a lock that was never released.
   */
  static final int LOCK_BOUND_MS = 30_000;
  /**
   * Slack on top of a wait for calls that may retry three times: CPU starvation, GC, and a
   * settling call before it (a tryLock first settles an earlier release left in doubt). A
   * 10-minute soak on a loaded 2-core machine saw a tryLock(0) 0.5 s over 2 s of slack.
   */
  static final int SLACK_MS = 3_000;

  /** The settings for {@code seed}: timeout 300-500 ms, watchdog 1.5-3 s. */
  static ModelSettings forSeed(long seed, int probePort) {
    Random random = new Random(seed);
    int timeout = 300 + 100 * random.nextInt(3);
    int watchdog = 1_500 + 500 * random.nextInt(4);
    return new ModelSettings(seed, timeout, watchdog, ModelLocks.KEYS, 3, probePort);
  }

  /** Client properties for a client behind {@code proxyPort}. */
  Map<String, String> clientProperties(int proxyPort) {
    Map<String, String> p = new LinkedHashMap<>();
    p.put(LockClientConfig.ADDRESS, "redis://127.0.0.1:" + proxyPort);
    p.put(LockClientConfig.TIMEOUT, timeoutMillis + "ms");
    p.put(LockClientConfig.WATCHDOG_TIMEOUT, watchdogMillis + "ms");
    return p;
  }

  /**
   * Bound for a call that may retry a script three times but never waits for a holder; each
   * try may also wait for the replicas' acknowledgement.
   */
  long quickBoundMicros() {
    return (3L * (timeoutMillis + syncTimeoutMillis) + SLACK_MS) * 1_000;
  }

  /**
   * Whether a re-entry may be refused ({@code false}) while the hold lasts: with replica
   * acknowledgement, a re-entry that no replica acknowledged in time is rolled back and not
   * granted (LockClientConfig.Builder#syncReplicas), so {@code false} does not mean lost.
   */
  boolean reentryMayBeRefused() {
    return syncTimeoutMillis > 0;
  }

  /** Bound for tryLock with {@code waitMillis}. */
  long waitBoundMicros(long waitMillis) {
    return waitMillis * 1_000 + quickBoundMicros();
  }

  long lockBoundMicros() {
    return LOCK_BOUND_MS * 1_000L;
  }

  /** A random source for one actor, fixed by the seed and the actor's place. */
  Random randomFor(String actor) {
    return new Random(seed * 1_000_003L + actor.hashCode());
  }

  /** For the worker's command line. */
  List<String> toArgs() {
    List<String> args = new ArrayList<>();
    args.add("seed=" + seed);
    args.add("timeout=" + timeoutMillis);
    args.add("watchdog=" + watchdogMillis);
    args.add("locks=" + String.join(",", locks));
    args.add("threads=" + threads);
    args.add("probe=" + probePort);
    args.add("sync=" + syncTimeoutMillis);
    return args;
  }

  /** The inverse of {@link #toArgs()}, ignoring arguments it does not know. */
  static ModelSettings fromArgs(Map<String, String> args) {
    return new ModelSettings(Long.parseLong(args.get("seed")),
        Integer.parseInt(args.get("timeout")), Integer.parseInt(args.get("watchdog")),
        List.of(args.get("locks").split(",")), Integer.parseInt(args.get("threads")),
        Integer.parseInt(args.get("probe")), Integer.parseInt(args.get("sync")));
  }

  @Override
  public String toString() {
    return "timeout " + timeoutMillis + "ms, watchdog " + watchdogMillis + "ms, leases "
        + MIN_LEASE_MS + "-" + MAX_LEASE_MS + "ms, work <= " + MAX_WORK_MS + "ms, locks " + locks
        + ", " + threads + " threads per client"
        + (syncTimeoutMillis > 0 ? ", sync-timeout " + syncTimeoutMillis + "ms" : "");
  }
}
