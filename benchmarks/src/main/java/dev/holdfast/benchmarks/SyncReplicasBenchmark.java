package dev.holdfast.benchmarks;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisServer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.Jedis;

/**
 * What {@code holdfast.redis.sync-replicas=auto} costs on a Redis without replicas, against
 * {@code none}: the commands Redis receives per {@code lock()} + {@code unlock()} (counted by Redis
 * itself, {@code INFO commandstats}, so the figure does not depend on the machine) and the
 * throughput of one thread, measured in alternating rounds so that machine noise hits both alike.
 *
 * <p>Run: {@code ./mvnw -B -q -pl benchmarks -am package -Pbench -DskipTests}
 * (arguments: {@code -Dbench.args="<ops per round> <rounds>"}, default 20000 and 5).
 */
public final class SyncReplicasBenchmark {

  private SyncReplicasBenchmark() {
  }

  public static void main(String[] args) {
    int ops = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    Map<String, List<Double>> throughput = new LinkedHashMap<>();
    Map<String, double[]> commands = new LinkedHashMap<>();
    try (RedisServer redis = RedisServer.start()) {
      for (int round = 0; round < rounds; round++) {
        List<String> order = round % 2 == 0 ? List.of("none", "auto") : List.of("auto", "none");
        for (String mode : order) {
          Result r = measure(redis, mode, ops);
          throughput.computeIfAbsent(mode, m -> new ArrayList<>()).add(r.opsPerSecond());
          commands.put(mode, new double[] {r.commandsPerOp(), r.waitsPerOp(),
              r.redisMicrosPerOp()});
        }
      }
    }
    System.out.printf("%nsync-replicas on a Redis without replicas: %d x lock()+unlock() per round,"
        + " %d rounds, one thread%n", ops, rounds);
    System.out.printf("  %-6s %26s %12s %20s %14s%n", "mode", "round trips per lock+unlock",
        "WAIT per op", "Redis µs per op", "median ops/s");
    for (String mode : throughput.keySet()) {
      double[] c = commands.get(mode);
      System.out.printf("  %-6s %26.2f %12.2f %20.1f %14.0f%n", mode, c[0], c[1], c[2],
          median(throughput.get(mode)));
    }
  }

  private static Result measure(RedisServer redis, String mode, int ops) {
    try (LockClient client = LockClient.create(Map.of(LockClientConfig.ADDRESS, redis.uri(),
        LockClientConfig.SYNC_REPLICAS, mode))) {
      DistributedLock lock = client.getLock("bench:" + mode);
      for (int i = 0; i < Math.min(ops, 2_000); i++) { // warm up the JIT and the pool
        lock.lock();
        lock.unlock();
      }
      try (Jedis admin = redis.admin()) {
        admin.configResetStat();
      }
      long start = System.nanoTime();
      for (int i = 0; i < ops; i++) {
        lock.lock();
        lock.unlock();
      }
      long nanos = System.nanoTime() - start;
      try (Jedis admin = redis.admin()) {
        long[] calls = commandCalls(admin.info("commandstats"));
        return new Result(ops / (nanos / 1e9), calls[0] / (double) ops, calls[1] / (double) ops,
            calls[2] / (double) ops);
      }
    }
  }

  /**
   * What the client sent (EVALSHA, EVAL and WAIT calls: a script's inner commands are counted by
   * Redis too, but are no round trips), how many of those were WAIT, and the microseconds Redis
   * spent on them, inner commands included.
   */
  private static long[] commandCalls(String stats) {
    long sent = 0;
    long waits = 0;
    long micros = 0;
    for (String line : stats.split("\r?\n")) {
      if (!line.startsWith("cmdstat_evalsha:") && !line.startsWith("cmdstat_eval:")
          && !line.startsWith("cmdstat_wait:")) {
        continue;
      }
      long calls = Long.parseLong(line.replaceAll("^cmdstat_[^:]+:calls=(\\d+),.*", "$1"));
      sent += calls;
      micros += Long.parseLong(line.replaceAll("^.*,usec=(\\d+),.*", "$1"));
      if (line.startsWith("cmdstat_wait:")) {
        waits += calls;
      }
    }
    return new long[] {sent, waits, micros};
  }

  private static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  private record Result(double opsPerSecond, double commandsPerOp, double waitsPerOp,
      double redisMicrosPerOp) {
  }
}
