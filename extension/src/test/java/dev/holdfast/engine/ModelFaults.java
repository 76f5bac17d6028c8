package dev.holdfast.engine;

import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * The fault schedule of a {@link LockModelTest} run, fixed by the seed, and the thread that
 * plays it against the proxies and the lock server.
 *
 * <p>The run alternates <em>storms</em> of 3-8 s, in which faults follow each other with gaps of
 * 0.1-1 s (and one in four comes with a second fault on another target), and <em>calms</em> of
 * the watchdog timeout + 1 s (what the judge needs before it calls a moment quiet) + 1.5-3.5 s,
 * in which hold counts can be compared with the engine's. Each fault:
 * <ul>
 *   <li>DROP: the next 1-3 script replies through one proxy are lost (disarmed after 2 s);</li>
 *   <li>DELAY: 30-300 ms each way through one proxy for 0.5-2.5 s (above half the timeout,
 *       every command times out);</li>
 *   <li>BLACK_HOLE: one proxy forwards nothing for 0.3-3 s, or (one in three) for the watchdog
 *       timeout + 0.2-1.5 s, long enough for its clients' leases to run out; then it delivers
 *       what it held;</li>
 *   <li>RESET: every connection through one proxy is reset;</li>
 *   <li>KILL: the lock server is killed with SIGKILL and restarted after 0-1.5 s (it runs with
 *       {@code appendfsync always}, so nothing acknowledged is lost).</li>
 *   <li>REFUSE: the lock server answers every write with an error (out of memory:
 *       {@code maxmemory 1}) for 0.3-2.5 s — acquisitions, renewals, releases and the settling
 *       of debts are refused, not lost.</li>
 * </ul>
 * Held requests are delivered at the end of their black hole, together with the retries they
 * duplicate, so a release marker (which lives at least 5 s) always outlives them. Every fault is
 * recorded as a FAULT event with when it was active.
 */
final class ModelFaults implements ModelFaultDriver {

  enum Kind { DROP, DELAY, BLACK_HOLE, RESET, KILL, REFUSE }

  /** A fault: at {@code atMillis} after the start, on proxy {@code target} (-1: the server). */
  record Fault(long atMillis, Kind kind, int target, long durationMillis, long amount) {
    String targetName() {
      return target < 0 ? "redis" : "proxy" + target;
    }
  }

  private final List<Fault> schedule;
  private final List<FaultProxy> proxies;
  private final RedisServer redis;
  private final ModelHistory history;
  private final Map<Kind, Integer> injected = new EnumMap<>(Kind.class);
  private final Thread driver;
  private volatile boolean stopped;

  ModelFaults(List<Fault> schedule, List<FaultProxy> proxies, RedisServer redis,
      ModelHistory history) {
    this.schedule = List.copyOf(schedule);
    this.proxies = List.copyOf(proxies);
    this.redis = redis;
    this.history = history;
    this.driver = new Thread(this::play, "model-faults");
    this.driver.setDaemon(true);
  }

  /**
   * The schedule for {@code seed} over {@code runMillis}, for {@code proxies} proxies and
   * clients with a watchdog timeout of {@code watchdogMillis}.
   */
  static List<Fault> schedule(long seed, long runMillis, int proxies, int watchdogMillis) {
    Random random = new Random(seed ^ 0x5DEECE66DL);
    List<Fault> faults = new ArrayList<>();
    long at = 1_000 + random.nextInt(1_000);
    while (at < runMillis - 1_000) {
      long stormEnd = Math.min(runMillis - 500, at + 3_000 + random.nextInt(5_001));
      while (at < stormEnd) {
        Fault first = fault(random, at, proxies, -2, watchdogMillis);
        faults.add(first);
        long end = first.atMillis() + first.durationMillis();
        if (random.nextInt(4) == 0) {
          Fault second = fault(random, at, proxies, first.target(), watchdogMillis);
          faults.add(second);
          end = Math.max(end, second.atMillis() + second.durationMillis());
        }
        at = end + 100 + random.nextInt(901);
      }
      at += watchdogMillis + 1_000 + 1_500 + random.nextInt(2_001);
    }
    return faults;
  }

  private static Fault fault(Random random, long at, int proxies, int notTarget,
      int watchdogMillis) {
    int roll = random.nextInt(100);
    Kind kind = roll < 14 ? Kind.DROP : roll < 32 ? Kind.DELAY : roll < 60 ? Kind.BLACK_HOLE
        : roll < 76 ? Kind.RESET : roll < 90 ? Kind.KILL : Kind.REFUSE;
    boolean onServer = kind == Kind.KILL || kind == Kind.REFUSE;
    if (onServer && notTarget == -1) {
      kind = Kind.BLACK_HOLE; // one fault on the server at a time
      onServer = false;
    }
    int target = -1;
    if (!onServer) {
      do {
        target = random.nextInt(proxies);
      } while (target == notTarget && proxies > 1);
    }
    return switch (kind) {
      case DROP -> new Fault(at, kind, target, 2_000, 1 + random.nextInt(3));
      case DELAY -> new Fault(at, kind, target, 500 + random.nextInt(2_001),
          30 + random.nextInt(271));
      case BLACK_HOLE -> new Fault(at, kind, target, random.nextInt(3) == 0
          ? watchdogMillis + 200 + random.nextInt(1_301) : 300 + random.nextInt(2_701), 0);
      case RESET -> new Fault(at, kind, target, 0, 0);
      case KILL -> new Fault(at, kind, target, random.nextInt(1_501), 0);
      case REFUSE -> new Fault(at, kind, target, 300 + random.nextInt(2_201), 0);
    };
  }

  @Override
  public void start() {
    driver.start();
  }

  /**
   * Stops the schedule, heals every proxy and brings the server back, then returns; faults in
   * progress are recorded as ending now.
   */
  @Override
  public void stopAndHeal() throws InterruptedException {
    stopped = true;
    driver.join(30_000);
    for (FaultProxy proxy : proxies) {
      proxy.blackHole(false);
      proxy.delay(Duration.ZERO);
      proxy.dropReplies(0);
    }
    if (!redis.isRunning()) {
      redis.restart();
    }
    acceptWrites();
  }

  @Override
  public synchronized Map<String, Integer> injectedCounts() {
    Map<String, Integer> counts = new java.util.LinkedHashMap<>();
    injected.forEach((k, v) -> counts.put(k.name(), v));
    return counts;
  }

  /** Plays the schedule: each fault is applied, then undone after its duration. */
  private void play() {
    record Step(long atMillis, Fault fault, boolean apply) {
    }
    List<Step> steps = new ArrayList<>();
    for (Fault f : schedule) {
      steps.add(new Step(f.atMillis(), f, true));
      steps.add(new Step(f.atMillis() + f.durationMillis(), f, false));
    }
    // At one instant, apply before undo: a fault of no duration (RESET) is applied, then ends.
    steps.sort(Comparator.comparingLong(Step::atMillis).thenComparing(s -> s.apply() ? 0 : 1));
    Map<Fault, Long> started = new HashMap<>();
    long origin = System.nanoTime();
    try {
      for (Step step : steps) {
        // Short sleeps, never an interrupt: a restart in progress must not be cut short.
        long wait;
        while (!stopped
            && (wait = step.atMillis() - (System.nanoTime() - origin) / 1_000_000) > 0) {
          Thread.sleep(Math.min(wait, 50));
        }
        if (stopped) {
          break;
        }
        if (step.apply()) {
          started.put(step.fault(), ModelEvent.now());
          apply(step.fault());
          synchronized (this) {
            injected.merge(step.fault().kind(), 1, Integer::sum);
          }
        } else {
          undo(step.fault());
          record(step.fault(), started.remove(step.fault()));
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // nobody interrupts the driver; end as if stopped
    } finally {
      // Faults still in progress end with the healing that follows.
      for (Map.Entry<Fault, Long> e : started.entrySet()) {
        undo(e.getKey());
        record(e.getKey(), e.getValue());
      }
    }
  }

  private void apply(Fault f) {
    switch (f.kind()) {
      case DROP -> proxies.get(f.target()).dropReplies((int) f.amount());
      case DELAY -> proxies.get(f.target()).delay(Duration.ofMillis(f.amount()));
      case BLACK_HOLE -> proxies.get(f.target()).blackHole(true);
      case RESET -> proxies.get(f.target()).resetAll();
      case KILL -> redis.kill();
      case REFUSE -> redis.withAdmin(j -> j.configSet("maxmemory", "1"));
    }
  }

  private void undo(Fault f) {
    switch (f.kind()) {
      case DROP -> proxies.get(f.target()).dropReplies(0);
      case DELAY -> proxies.get(f.target()).delay(Duration.ZERO);
      case BLACK_HOLE -> proxies.get(f.target()).blackHole(false);
      case RESET -> {
      }
      case KILL -> redis.restart();
      case REFUSE -> acceptWrites();
    }
  }

  private void acceptWrites() {
    redis.withAdmin(j -> j.configSet("maxmemory", "0"));
  }

  private void record(Fault f, Long start) {
    long begin = start == null ? ModelEvent.now() : start;
    String params = switch (f.kind()) {
      case DROP -> f.amount() + " replies";
      case DELAY -> f.amount() + "ms each way";
      case BLACK_HOLE, KILL, REFUSE -> "planned " + f.durationMillis() + "ms";
      case RESET -> "";
    };
    history.add(ModelEvent.Kind.FAULT, "", "faults", 0, f.targetName(), "", f.kind().name(), "",
        begin, ModelEvent.now(), 0, 0, 0, "", params);
  }
}
