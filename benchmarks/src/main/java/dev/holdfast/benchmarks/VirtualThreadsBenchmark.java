package dev.holdfast.benchmarks;

import dev.holdfast.benchmarks.Measurements.RedisUsage;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;

/**
 * Issue 16's table: a burst of {@code --threads} virtual threads, each making {@code --calls}
 * calls {@code lock(); sleep 1 ms; unlock()} on one of {@code --names} lock names, for Holdfast
 * and Redisson 4.7 in the same run against one local {@code redis-server}, each with a fresh
 * client of default settings (watchdog timeout 30 s for both).
 *
 * <p>Thread {@code t}'s call {@code c} uses the name {@code vt:((t + c) mod names)}. All threads
 * are started first and wait at a gate; the clock starts when the gate opens and stops when the
 * last call has ended. Per implementation the run reports
 * <ul>
 *   <li><em>done</em>: calls whose {@code lock()} and {@code unlock()} both returned normally;</li>
 *   <li><em>failed</em>: calls in which either threw (the most frequent messages are listed);</li>
 *   <li><em>not finished</em>: calls still running when {@code --timeout} ran out;</li>
 *   <li><em>overlaps</em>: entries into a name's section while another thread was inside it
 *       (a per-name counter incremented on entry, decremented on exit: an entry that finds it
 *       above 0 is an overlap) — must be 0;</li>
 *   <li><em>ops/s</em>: done calls per second of the run;</li>
 *   <li><em>script calls</em>: {@code EVAL}/{@code EVALSHA}/{@code FCALL} calls Redis counted
 *       ({@code INFO commandstats}) from the gate opening to the end, and per done call (an
 *       uncontended call needs 2);</li>
 *   <li><em>Holdfast warnings</em>: records of level WARNING or above Holdfast logged (false
 *       losses — "its thread ended without unlock()" — show up here);</li>
 *   <li>the 1-minute load average at the end (the busy runs say how busy).</li>
 * </ul>
 *
 * <p>Flags: {@code --threads N} (10000), {@code --calls C} (2), {@code --names K} (10),
 * {@code --sleep-ms S} inside the section (1), {@code --rounds R} (1; the order of the
 * implementations is reversed every round), {@code --impl holdfast,redisson} (both),
 * {@code --burn B} platform threads spinning on the CPU during the whole run (0; issue 16's
 * "machine busy with a build, load ~12 on 2 cores" is taken with {@code --burn 10}),
 * {@code --timeout D} per implementation and round (5m), {@code --platform} platform threads
 * instead of virtual ones (a comparison), {@code --out FILE} also writes the table there.
 *
 * <p>Needs Java 21 or later for virtual threads (the jar is compiled for 17 and reaches them
 * through a method handle): {@code /usr/lib/jvm/temurin-25-jdk-amd64/bin/java -jar
 * benchmarks/target/benchmarks.jar virtual-threads --threads 10000 --calls 2 --names 10}.
 * Exits with 1 if any implementation had a failure, an overlap or an unfinished call.
 */
final class VirtualThreadsBenchmark {

  private VirtualThreadsBenchmark() {
  }

  /** One implementation's figures in one round. */
  record Result(Impl impl, int round, long calls, long done, long failed, long notFinished,
      long overlaps, double seconds, long scriptCalls, long warnings, double load,
      String failures, String warningMessages) {

    double opsPerSecond() {
      return seconds > 0 ? done / seconds : 0;
    }

    boolean clean() {
      return failed == 0 && overlaps == 0 && notFinished == 0;
    }
  }

  static int run(String[] args) throws Exception {
    int threads = 10_000;
    int calls = 2;
    int names = 10;
    long sleepMillis = 1;
    int rounds = 1;
    int burn = 0;
    boolean platform = false;
    Duration timeout = Duration.ofMinutes(5);
    Path out = null;
    List<Impl> impls = new ArrayList<>(List.of(Impl.HOLDFAST, Impl.REDISSON));
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      switch (arg) {
        case "--threads" -> threads = Integer.parseInt(value(args, ++i, arg));
        case "--calls" -> calls = Integer.parseInt(value(args, ++i, arg));
        case "--names" -> names = Integer.parseInt(value(args, ++i, arg));
        case "--sleep-ms" -> sleepMillis = Long.parseLong(value(args, ++i, arg));
        case "--rounds" -> rounds = Integer.parseInt(value(args, ++i, arg));
        case "--burn" -> burn = Integer.parseInt(value(args, ++i, arg));
        case "--timeout" -> timeout = SideBySideBenchmark.duration(value(args, ++i, arg));
        case "--impl" -> impls = impls(value(args, ++i, arg));
        case "--platform" -> platform = true;
        case "--out" -> out = Path.of(value(args, ++i, arg));
        default -> throw new IllegalArgumentException("unknown flag " + arg + "; see the Javadoc"
            + " of " + VirtualThreadsBenchmark.class.getName());
      }
    }
    if (threads < 1 || calls < 1 || names < 1 || rounds < 1 || burn < 0 || sleepMillis < 0) {
      throw new IllegalArgumentException("need --threads, --calls, --names, --rounds >= 1,"
          + " --burn, --sleep-ms >= 0");
    }
    if (!platform) {
      ManyThreads.requireVirtualThreads();
    }
    SideBySideBenchmark.preferLocalRedis();

    List<Result> results = new ArrayList<>();
    String redisVersion;
    try (Deployment redis = Deployment.standalone();
        ManyThreads.CpuBurner burner = new ManyThreads.CpuBurner(burn)) {
      redisVersion = SideBySideBenchmark.redisVersion(redis.masters().get(0));
      if (burn > 0) {
        System.err.printf(Locale.ROOT, "%d CPU burner threads spinning; load average now %.1f%n",
            burner.size(), ManyThreads.loadAverage());
      }
      for (int round = 0; round < rounds; round++) {
        List<Impl> order = new ArrayList<>(impls);
        if (round % 2 == 1) {
          Collections.reverse(order);
        }
        for (Impl impl : order) {
          redis.flush();
          Result result = measure(redis, impl, round + 1, threads, calls, names, sleepMillis,
              platform, timeout);
          results.add(result);
          System.err.println(describe(result));
        }
      }
    }

    String table = table(results, String.format(Locale.ROOT,
        "%s: %,d %s threads x %d calls over %d names, lock(); sleep %d ms; unlock(); Redis %s,"
            + " Java %s, %d CPUs, %d CPU burner threads",
        "virtual-threads", threads, platform ? "platform" : "virtual", calls, names, sleepMillis,
        redisVersion, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors(), burn));
    System.out.println(table);
    if (out != null) {
      Files.writeString(out, table, StandardCharsets.UTF_8);
    }
    return results.stream().allMatch(Result::clean) ? 0 : 1;
  }

  private static Result measure(Deployment redis, Impl impl, int round, int threads, int calls,
      int names, long sleepMillis, boolean platform, Duration timeout) throws Exception {
    long total = (long) threads * calls;
    AtomicLong done = new AtomicLong();
    AtomicLong overlaps = new AtomicLong();
    AtomicInteger[] inside = new AtomicInteger[names];
    for (int n = 0; n < names; n++) {
      inside[n] = new AtomicInteger();
    }
    ManyThreads.Failures failures = new ManyThreads.Failures();
    CountDownLatch started = new CountDownLatch(threads);
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch finished = new CountDownLatch(threads);
    try (ManyThreads.HoldfastWarnings warnings = new ManyThreads.HoldfastWarnings();
        Deployment.Contender client = redis.connect(impl, Duration.ofSeconds(30))) {
      ConcurrentHashMap<Integer, Lock> handles = new ConcurrentHashMap<>();
      for (int n = 0; n < names; n++) {
        handles.put(n, client.lock("vt:" + n));
      }
      for (int t = 0; t < threads; t++) {
        int thread = t;
        ManyThreads.start(() -> {
          try {
            started.countDown();
            gate.await();
            for (int c = 0; c < calls; c++) {
              int name = (thread + c) % names;
              call(handles.get(name), inside[name], sleepMillis, done, overlaps, failures);
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } finally {
            finished.countDown();
          }
        }, platform);
      }
      started.await();
      RedisUsage before = RedisUsage.of(redis.masters());
      long start = System.nanoTime();
      gate.countDown();
      boolean all = finished.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
      double seconds = (System.nanoTime() - start) / 1e9;
      RedisUsage after = RedisUsage.of(redis.masters());
      long d = done.get();
      long f = failures.total();
      long open = all ? 0 : Math.max(0, total - d - f);
      return new Result(impl, round, total, d, f, open, overlaps.get(), seconds,
          after.scriptCalls() - before.scriptCalls(), warnings.count(), ManyThreads.loadAverage(),
          failures.top(3), warnings.top(3));
    }
  }

  /** One call: {@code lock(); sleep; unlock()}, counted. */
  private static void call(Lock lock, AtomicInteger inside, long sleepMillis, AtomicLong done,
      AtomicLong overlaps, ManyThreads.Failures failures) {
    try {
      lock.lock();
    } catch (RuntimeException | Error e) {
      failures.add(e);
      return;
    }
    try {
      if (inside.incrementAndGet() > 1) {
        overlaps.incrementAndGet();
      }
      try {
        Thread.sleep(sleepMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        inside.decrementAndGet();
      }
    } finally {
      try {
        lock.unlock();
        done.incrementAndGet();
      } catch (RuntimeException | Error e) {
        failures.add(e);
      }
    }
  }

  private static String describe(Result r) {
    StringBuilder s = new StringBuilder(String.format(Locale.ROOT,
        "round %d, %s: %,d done / %,d failed / %,d not finished of %,d calls, %,d overlaps,"
            + " %.1f s, %,.0f ops/s, %,d script calls (%.2f per done call), %,d Holdfast"
            + " warnings, load %.1f",
        r.round(), r.impl().label(), r.done(), r.failed(), r.notFinished(), r.calls(),
        r.overlaps(), r.seconds(), r.opsPerSecond(), r.scriptCalls(),
        r.done() == 0 ? 0.0 : (double) r.scriptCalls() / r.done(), r.warnings(), r.load()));
    if (!r.failures().isEmpty()) {
      s.append("\n  failures:\n    ").append(r.failures());
    }
    if (!r.warningMessages().isEmpty()) {
      s.append("\n  warnings:\n    ").append(r.warningMessages());
    }
    return s.toString();
  }

  private static String table(List<Result> results, String caption) {
    StringBuilder out = new StringBuilder();
    out.append('\n').append(caption).append("\n\n");
    out.append("| round | implementation | done | failed | not finished | overlaps | ops/s"
        + " | script calls | per done call | Holdfast warnings | load |\n");
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (Result r : results) {
      out.append(String.format(Locale.ROOT,
          "| %d | %s | %,d | %,d | %,d | %,d | %,.0f | %,d | %.2f | %,d | %.1f |%n",
          r.round(), r.impl().label(), r.done(), r.failed(), r.notFinished(), r.overlaps(),
          r.opsPerSecond(), r.scriptCalls(),
          r.done() == 0 ? 0.0 : (double) r.scriptCalls() / r.done(), r.warnings(), r.load()));
    }
    List<Result> hf = results.stream().filter(r -> r.impl() == Impl.HOLDFAST).toList();
    List<Result> rd = results.stream().filter(r -> r.impl() == Impl.REDISSON).toList();
    if (!hf.isEmpty() && hf.size() == rd.size()) {
      List<Double> ratios = new ArrayList<>();
      for (int i = 0; i < hf.size(); i++) {
        if (rd.get(i).opsPerSecond() > 0) {
          ratios.add(hf.get(i).opsPerSecond() / rd.get(i).opsPerSecond());
        }
      }
      if (!ratios.isEmpty()) {
        out.append(String.format(Locale.ROOT, "%nHoldfast ÷ Redisson ops/s, median over rounds:"
            + " %.2fx%n", Measurements.median(ratios)));
      }
    }
    return out.toString();
  }

  static List<Impl> impls(String list) {
    List<Impl> impls = new ArrayList<>();
    for (String name : list.split(",")) {
      switch (name.trim().toLowerCase(Locale.ROOT)) {
        case "holdfast" -> impls.add(Impl.HOLDFAST);
        case "redisson" -> impls.add(Impl.REDISSON);
        default -> throw new IllegalArgumentException("--impl: holdfast and/or redisson, not "
            + name);
      }
    }
    return impls;
  }

  static String value(String[] args, int i, String flag) {
    if (i >= args.length) {
      throw new IllegalArgumentException(flag + " needs a value");
    }
    return args[i];
  }
}
