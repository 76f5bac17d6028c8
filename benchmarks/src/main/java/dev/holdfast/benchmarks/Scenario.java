package dev.holdfast.benchmarks;

import dev.holdfast.benchmarks.Deployment.Contender;
import dev.holdfast.benchmarks.Measurements.RedisUsage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * One scenario of {@link SideBySideBenchmark}: which servers it needs, which implementations take
 * part, which figures it yields, and how one implementation is measured in one round (with a
 * fresh client, so no round inherits another's connections or state).
 */
abstract class Scenario {

  /** The servers a scenario runs against. */
  enum Topology { STANDALONE, REPLICATED, CLUSTER }

  /** How a figure is written, and whether a ratio to the protocol floor means anything. */
  enum Unit {
    OPS_PER_SECOND("%,.0f ops/s", true),
    MICROS("%,.0f µs", true),
    PER_SECOND("%,.1f /s", false),
    MILLIS_PER_SECOND("%,.1f ms/s", false),
    RATIO("%.2fx", false);

    final String format;
    final boolean ratioToFloor;

    Unit(String format, boolean ratioToFloor) {
      this.format = format;
      this.ratioToFloor = ratioToFloor;
    }
  }

  /** One row of the table. */
  record Figure(String label, Unit unit) {
  }

  final String name;
  final Topology topology;
  final List<Impl> impls;
  final List<Figure> figures;

  Scenario(String name, Topology topology, List<Impl> impls, Figure... figures) {
    this.name = name;
    this.topology = topology;
    this.impls = impls;
    this.figures = List.of(figures);
  }

  /** Measures {@code impl} once; answers a value for each of {@link #figures}. */
  abstract Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
      throws Exception;

  /** The settings of a run; see {@link SideBySideBenchmark} for their flags. */
  record Options(double seconds, double warmupSeconds, Duration watchdogTimeout,
      long settleMillis) {
  }

  private static final List<Impl> ALL = List.of(Impl.FLOOR, Impl.HOLDFAST, Impl.REDISSON);
  private static final List<Impl> CLIENTS = List.of(Impl.HOLDFAST, Impl.REDISSON);

  /** Every scenario, in the table's order. */
  static List<Scenario> all(int threads, int holds) {
    List<Scenario> all = new ArrayList<>();
    all.add(uncontended("uncontended-1", Topology.STANDALONE, 1, ""));
    all.add(uncontended("uncontended-" + threads, Topology.STANDALONE, threads, ""));
    all.add(hotKey("hot-key-" + threads, 1, threads));
    all.add(hotKey("hot-key-2x" + threads / 2, 2, threads / 2));
    all.add(handoff());
    all.add(watchdog(holds));
    all.add(uncontended("sync-replicas-1", Topology.REPLICATED, 1, ", sync-replicas=auto + 1 replica"));
    all.add(uncontended("sync-replicas-" + threads, Topology.REPLICATED, threads,
        ", sync-replicas=auto + 1 replica"));
    all.add(cluster(threads));
    return all;
  }

  /** {@code threads} threads, each on a key of its own: lock() + unlock() per second. */
  private static Scenario uncontended(String name, Topology topology, int threads, String note) {
    Figure figure = new Figure("uncontended lock+unlock, " + threads
        + (threads == 1 ? " thread" : " threads, own keys") + note, Unit.OPS_PER_SECOND);
    return new Scenario(name, topology, ALL, figure) {
      @Override
      Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
          throws Exception {
        try (Contender client = deployment.connect(impl, options.watchdogTimeout())) {
          double opsPerSecond = Measurements.throughput(threads,
              t -> client.lock("bench:own:" + t), options.warmupSeconds(), options.seconds());
          return Map.of(figure, opsPerSecond);
        }
      }
    };
  }

  /** One key; {@code clients} clients of {@code threadsEach} threads. */
  private static Scenario hotKey(String name, int clients, int threadsEach) {
    Figure figure = new Figure(clients == 1
        ? "hot key, " + threadsEach + " threads of one client"
        : "hot key, " + clients + " clients x " + threadsEach + " threads", Unit.OPS_PER_SECOND);
    return new Scenario(name, Topology.STANDALONE, CLIENTS, figure) {
      @Override
      Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
          throws Exception {
        List<Contender> connected = new ArrayList<>();
        try {
          for (int c = 0; c < clients; c++) {
            connected.add(deployment.connect(impl, options.watchdogTimeout()));
          }
          double opsPerSecond = Measurements.throughput(clients * threadsEach,
              t -> connected.get(t / threadsEach).lock("bench:hot"), options.warmupSeconds(),
              options.seconds());
          return Map.of(figure, opsPerSecond);
        } finally {
          connected.forEach(Contender::close);
        }
      }
    };
  }

  /** A holder in one client releases; how soon does the waiter in another client get it. */
  private static Scenario handoff() {
    Figure p50 = new Figure("handoff to a waiter in another client, p50", Unit.MICROS);
    Figure p99 = new Figure("handoff to a waiter in another client, p99", Unit.MICROS);
    return new Scenario("handoff", Topology.STANDALONE, CLIENTS, p50, p99) {
      @Override
      Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
          throws Exception {
        try (Contender holder = deployment.connect(impl, options.watchdogTimeout());
            Contender waiter = deployment.connect(impl, options.watchdogTimeout())) {
          List<Double> micros = Measurements.handoffMicros(holder.lock("bench:handoff"),
              waiter.lock("bench:handoff"), options.settleMillis(), options.warmupSeconds(),
              options.seconds());
          return Map.of(p50, Measurements.percentile(micros, 50),
              p99, Measurements.percentile(micros, 99));
        }
      }
    };
  }

  /**
   * {@code holds} locks held by one thread under the watchdog; over whole renewal periods (a third
   * of the watchdog timeout, at least {@code seconds}): the script calls Redis receives per second
   * and the CPU it spends per second. The floor column is an idle Redis over the same window.
   */
  private static Scenario watchdog(int holds) {
    Figure calls = new Figure(String.format("%,d watchdog holds: script calls", holds),
        Unit.PER_SECOND);
    Figure cpu = new Figure(String.format("%,d watchdog holds: Redis CPU", holds),
        Unit.MILLIS_PER_SECOND);
    return new Scenario("watchdog", Topology.STANDALONE, ALL, calls, cpu) {
      @Override
      Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
          throws Exception {
        long period = options.watchdogTimeout().toMillis() / 3;
        long window = period * Math.max(1, (long) Math.ceil(options.seconds() * 1000 / period));
        if (impl == Impl.FLOOR) { // an idle server: what the two figures are when nothing is held
          return usageOver(deployment, window);
        }
        try (Contender client = deployment.connect(impl, options.watchdogTimeout())) {
          List<Lock> held = new ArrayList<>(holds);
          try {
            for (int i = 0; i < holds; i++) {
              Lock lock = client.lock("bench:hold:" + i);
              lock.lock();
              held.add(lock);
            }
            return usageOver(deployment, window);
          } finally {
            for (Lock lock : held) {
              lock.unlock();
            }
          }
        }
      }

      private Map<Figure, Double> usageOver(Deployment deployment, long windowMillis)
          throws InterruptedException {
        RedisUsage before = RedisUsage.of(deployment.masters());
        long start = System.nanoTime();
        Thread.sleep(windowMillis);
        RedisUsage after = RedisUsage.of(deployment.masters());
        double seconds = (System.nanoTime() - start) / 1e9;
        return Map.of(calls, (after.scriptCalls() - before.scriptCalls()) / seconds,
            cpu, (after.cpuSeconds() - before.cpuSeconds()) * 1000 / seconds);
      }
    };
  }

  /**
   * A 3-primary Cluster: {@code threads} threads, each cycling over 8 names of its own, spread
   * over all slots, against the same with every name on the node serving slots 0–4999.
   */
  private static Scenario cluster(int threads) {
    Figure spread = new Figure("cluster, " + threads + " threads, names on all slots",
        Unit.OPS_PER_SECOND);
    Figure oneNode = new Figure("cluster, " + threads + " threads, names on one node",
        Unit.OPS_PER_SECOND);
    Figure gain = new Figure("cluster, all slots ÷ one node", Unit.RATIO);
    int namesPerThread = 8;
    return new Scenario("cluster", Topology.CLUSTER, CLIENTS, spread, oneNode, gain) {
      @Override
      Map<Figure, Double> measure(Impl impl, Deployment deployment, Options options)
          throws Exception {
        if (deployment.clusterMasterForSlot(0).port()
            != deployment.clusterMasterForSlot(4999).port()) {
          throw new IllegalStateException("slots 0-4999 are not on one node of " + deployment);
        }
        try (Contender client = deployment.connect(impl, options.watchdogTimeout())) {
          double all = Measurements.throughput(threads,
              t -> cycling(client, names(t, namesPerThread, false)), options.warmupSeconds(),
              options.seconds());
          double one = Measurements.throughput(threads,
              t -> cycling(client, names(t, namesPerThread, true)), options.warmupSeconds(),
              options.seconds());
          Map<Figure, Double> values = new LinkedHashMap<>();
          values.put(spread, all);
          values.put(oneNode, one);
          values.put(gain, all / one);
          return values;
        }
      }
    };
  }

  /** {@code count} names of thread {@code thread}; with {@code firstNode}, all in slots < 5000. */
  private static List<String> names(int thread, int count, boolean firstNode) {
    List<String> names = new ArrayList<>();
    for (int n = 0; names.size() < count; n++) {
      String name = "bench:cluster:" + thread + ":" + n;
      if (!firstNode || JedisClusterCRC16.getSlot(name) < 5000) {
        names.add(name);
      }
    }
    return names;
  }

  /** A lock that takes the next of {@code names} on each lock() and releases it on unlock(). */
  private static Lock cycling(Contender client, List<String> names) {
    List<Lock> locks = names.stream().map(client::lock).toList();
    return new Lock() {
      private int next;
      private Lock current;

      @Override
      public void lock() {
        current = locks.get(next);
        next = (next + 1) % locks.size();
        current.lock();
      }

      @Override
      public void unlock() {
        current.unlock();
      }

      @Override
      public void lockInterruptibly() {
        lock();
      }

      @Override
      public boolean tryLock() {
        throw new UnsupportedOperationException();
      }

      @Override
      public boolean tryLock(long time, TimeUnit unit) {
        throw new UnsupportedOperationException();
      }

      @Override
      public Condition newCondition() {
        throw new UnsupportedOperationException();
      }
    };
  }
}
