package dev.holdfast.benchmarks;

import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.locks.Lock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.clients.jedis.Jedis;

/**
 * Where an uncontended {@code lock()}+{@code unlock()} spends Redis's time: for Holdfast, Redisson
 * and the protocol floor in turn, one thread runs {@code pairs} pairs on one local
 * {@code redis-server} and the server's own counters ({@code INFO commandstats}, reset before each)
 * say how many script calls that took and how many microseconds each spent inside Redis. This is
 * the profile behind docs/performance.md's "what limits it" for the uncontended targets: a script that does
 * more work costs Redis's single core per call, whatever the client does.
 *
 * <p>{@code java -jar benchmarks/target/benchmarks.jar script-cost [pairs]} (default 20,000, after
 * 5,000 for warm-up).
 */
final class ScriptCost {
  private static final Pattern SCRIPT_CALLS =
      Pattern.compile("cmdstat_(evalsha|eval|evalsha_ro|fcall):calls=(\\d+),usec=(\\d+)");

  private ScriptCost() {
  }

  static void main(String[] args) throws Exception {
    int pairs = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    SideBySideBenchmark.preferLocalRedis();
    Map<Impl, String> lines = new EnumMap<>(Impl.class);
    try (Deployment redis = Deployment.standalone()) {
      for (Impl impl : Impl.values()) {
        redis.flush();
        try (Deployment.Contender contender = redis.connect(impl, Duration.ofSeconds(30))) {
          Lock lock = contender.lock("script-cost");
          run(lock, 5_000);
          try (Jedis admin = redis.masters().get(0).admin()) {
            admin.configResetStat();
            long start = System.nanoTime();
            run(lock, pairs);
            double micros = (System.nanoTime() - start) / 1_000.0 / pairs;
            lines.put(impl, describe(admin.info("commandstats"), pairs, micros));
          }
        }
      }
    }
    System.out.println("| implementation | script calls per pair | µs in Redis per call | µs in Redis"
        + " per pair | µs per pair, wall clock |");
    System.out.println("|---|---:|---:|---:|---:|");
    lines.forEach((impl, line) -> System.out.println("| " + impl + " | " + line + " |"));
  }

  private static void run(Lock lock, int pairs) {
    for (int i = 0; i < pairs; i++) {
      lock.lock();
      lock.unlock();
    }
  }

  private static String describe(String commandstats, int pairs, double wallMicros) {
    long calls = 0;
    long usec = 0;
    Matcher m = SCRIPT_CALLS.matcher(commandstats);
    while (m.find()) {
      calls += Long.parseLong(m.group(2));
      usec += Long.parseLong(m.group(3));
    }
    return String.format("%.2f | %.1f | %.1f | %.1f", (double) calls / pairs,
        calls == 0 ? 0.0 : (double) usec / calls, (double) usec / pairs, wallMicros);
  }
}
