package dev.holdfast.benchmarks;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisServer;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What observing locks costs on the uncontended path: one thread, {@code lock()} + {@code unlock()}
 * on a free lock, against a local redis-server, measured in alternating rounds of the modes given
 * (so that machine noise hits each alike). Two figures per mode: median throughput, and the bytes
 * the calling thread allocates per {@code lock()} + {@code unlock()}
 * ({@code ThreadMXBean.getThreadAllocatedBytes}, exact and independent of the machine's load).
 *
 * <p>Modes: {@code plain} (nothing observes: no registry, no recording), {@code jfr} (a JFR
 * recording with Holdfast's events enabled at their default 10 ms threshold, so uncontended calls
 * are measured but not written), {@code jfr-all} (the same without threshold: every call
 * written), {@code micrometer} (meters in a {@code SimpleMeterRegistry}).
 *
 * <p>Run: {@code ./mvnw -B -q -pl benchmarks -am package -Pbench -DskipTests
 * -Dbench.main=dev.holdfast.benchmarks.ObservationBenchmark
 * -Dbench.args="20000 5 plain jfr micrometer"}.
 */
public final class ObservationBenchmark {

  private ObservationBenchmark() {
  }

  public static void main(String[] args) throws Exception {
    int ops = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    List<String> modes = args.length > 2 ? List.of(args).subList(2, args.length)
        : List.of("plain", "jfr", "micrometer");
    Map<String, List<Double>> throughput = new LinkedHashMap<>();
    Map<String, List<Double>> allocated = new LinkedHashMap<>();
    try (RedisServer redis = RedisServer.start()) {
      for (int round = 0; round < rounds; round++) {
        List<String> order = new ArrayList<>(modes);
        if (round % 2 == 1) {
          java.util.Collections.reverse(order);
        }
        for (String mode : order) {
          double[] r = measure(redis, mode, ops);
          throughput.computeIfAbsent(mode, m -> new ArrayList<>()).add(r[0]);
          allocated.computeIfAbsent(mode, m -> new ArrayList<>()).add(r[1]);
        }
      }
    }
    System.out.printf("%nUncontended lock()+unlock(), one thread: %d per round, %d rounds%n", ops,
        rounds);
    System.out.printf("  %-11s %14s %28s%n", "mode", "median ops/s",
        "bytes allocated per op");
    for (String mode : throughput.keySet()) {
      System.out.printf("  %-11s %14.0f %28.0f%n", mode, median(throughput.get(mode)),
          median(allocated.get(mode)));
    }
  }

  private static double[] measure(RedisServer redis, String mode, int ops) throws Exception {
    LockClientConfig.Builder config = LockClientConfig.builder().address(redis.uri());
    AutoCloseable observation = Observation.start(mode, config);
    try (LockClient client = LockClient.create(config.build())) {
      DistributedLock lock = client.getLock("bench:" + mode);
      for (int i = 0; i < Math.min(ops, 2_000); i++) { // warm up the JIT and the pool
        lock.lock();
        lock.unlock();
      }
      com.sun.management.ThreadMXBean threads =
          (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
      long bytesBefore = threads.getCurrentThreadAllocatedBytes();
      long start = System.nanoTime();
      for (int i = 0; i < ops; i++) {
        lock.lock();
        lock.unlock();
      }
      long nanos = System.nanoTime() - start;
      long bytes = threads.getCurrentThreadAllocatedBytes() - bytesBefore;
      return new double[] {ops / (nanos / 1e9), bytes / (double) ops};
    } finally {
      observation.close();
    }
  }

  private static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }
}
