package dev.holdfast.benchmarks;

import dev.holdfast.benchmarks.Measurements.RedisUsage;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Issue 16's memory target: {@code --threads} virtual threads (100,000) over {@code --names} lock
 * names (100), all waiting at once on locks a holder thread keeps, then all served once it
 * releases. For each implementation in turn, against one local {@code redis-server}:
 * <ol>
 *   <li>a platform holder thread takes every name (with the implementation's client);</li>
 *   <li>baseline: used heap after full GCs ({@code System.gc()}, {@code MemoryMXBean});</li>
 *   <li>the waiters start, thread {@code t} calling {@code lock()} on name {@code t mod names};
 *       once every one has called it, {@code --settle} (5 s) passes for their first attempts to
 *       end, then Redis's script calls are counted for {@code --window} (5 s): what the waiting
 *       costs Redis, per second;</li>
 *   <li>used heap after full GCs again: (that − baseline) ÷ waiters is the <em>heap per
 *       waiter</em>, the parked virtual thread's own stack included;</li>
 *   <li>the holder releases; each waiter, once it holds its lock, unlocks it; the time until all
 *       have ended, and how many failed, is reported. "completed" means every waiter ended within
 *       {@code --timeout} (10m) without failure.</li>
 * </ol>
 * The {@code jdk} row does the same with {@code java.util.concurrent.locks.ReentrantLock}s: what
 * a parked virtual thread costs by itself, to read the libraries' rows against.
 *
 * <p>Flags: {@code --threads N}, {@code --names K}, {@code --impl holdfast,redisson,jdk} (all
 * three by default), {@code --settle D}, {@code --window D}, {@code --timeout D}, {@code --burn B} CPU burner threads
 * (as in {@link VirtualThreadsBenchmark}), {@code --out FILE}. Give the JVM room:
 * {@code /usr/lib/jvm/temurin-25-jdk-amd64/bin/java -Xmx4g -jar benchmarks/target/benchmarks.jar
 * virtual-threads-memory}. Exits with 1 if a library row did not complete.
 */
final class WaiterMemoryBenchmark {

  private WaiterMemoryBenchmark() {
  }

  /** The implementations: a library's client, or the JDK's in-process lock. */
  enum Subject {
    HOLDFAST("Holdfast", Impl.HOLDFAST),
    REDISSON("Redisson", Impl.REDISSON),
    JDK("JDK ReentrantLock (no Redis)", null);

    final String label;
    final Impl impl;

    Subject(String label, Impl impl) {
      this.label = label;
      this.impl = impl;
    }
  }

  record Result(Subject subject, int waiters, long waitingAtMeasure, long failedBeforeRelease,
      double heapPerWaiterBytes, double scriptCallsPerSecondWaiting, long done, long failed,
      double drainSeconds, boolean allEnded, String failures, long warnings,
      String warningMessages, long holderFailures, String holderFailureMessages) {

    boolean completed() {
      return allEnded && failed == 0 && done == waiters && holderFailures == 0;
    }
  }

  static int run(String[] args) throws Exception {
    int threads = 100_000;
    int names = 100;
    Duration settle = Duration.ofSeconds(5);
    Duration window = Duration.ofSeconds(5);
    Duration timeout = Duration.ofMinutes(10);
    int burn = 0;
    Path out = null;
    List<Subject> subjects = new ArrayList<>(List.of(Subject.JDK, Subject.HOLDFAST,
        Subject.REDISSON));
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      switch (arg) {
        case "--threads" -> threads = Integer.parseInt(VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--names" -> names = Integer.parseInt(VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--settle" -> settle = SideBySideBenchmark.duration(
            VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--window" -> window = SideBySideBenchmark.duration(
            VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--timeout" -> timeout = SideBySideBenchmark.duration(
            VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--burn" -> burn = Integer.parseInt(VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--out" -> out = Path.of(VirtualThreadsBenchmark.value(args, ++i, arg));
        case "--impl" -> {
          subjects = new ArrayList<>();
          for (String name : VirtualThreadsBenchmark.value(args, ++i, arg).split(",")) {
            subjects.add(Subject.valueOf(name.trim().toUpperCase(Locale.ROOT)));
          }
        }
        default -> throw new IllegalArgumentException("unknown flag " + arg + "; see the Javadoc"
            + " of " + WaiterMemoryBenchmark.class.getName());
      }
    }
    if (threads < 1 || names < 1) {
      throw new IllegalArgumentException("need --threads and --names >= 1");
    }
    ManyThreads.requireVirtualThreads();
    SideBySideBenchmark.preferLocalRedis();

    List<Result> results = new ArrayList<>();
    String redisVersion;
    try (Deployment redis = Deployment.standalone();
        ManyThreads.CpuBurner burner = new ManyThreads.CpuBurner(burn)) {
      redisVersion = SideBySideBenchmark.redisVersion(redis.masters().get(0));
      for (Subject subject : subjects) {
        redis.flush();
        Result result = measure(redis, subject, threads, names, settle, window, timeout);
        results.add(result);
        System.err.println(describe(result));
      }
    }
    String table = table(results, String.format(Locale.ROOT,
        "virtual-threads-memory: %,d virtual threads waiting at once on %d held names; Redis %s,"
            + " Java %s, %d CPUs, max heap %,d MB, %d CPU burner threads", threads, names,
        redisVersion, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors(), Runtime.getRuntime().maxMemory() >> 20, burn));
    System.out.println(table);
    if (out != null) {
      Files.writeString(out, table, StandardCharsets.UTF_8);
    }
    return results.stream().allMatch(r -> r.subject() == Subject.JDK || r.completed()) ? 0 : 1;
  }

  private static Result measure(Deployment redis, Subject subject, int threads, int names,
      Duration settle, Duration window, Duration timeout) throws Exception {
    ManyThreads.Failures failures = new ManyThreads.Failures();
    ManyThreads.Failures holderFailures = new ManyThreads.Failures();
    AtomicLong calling = new AtomicLong();
    AtomicLong acquired = new AtomicLong();
    AtomicLong done = new AtomicLong();
    CountDownLatch ended = new CountDownLatch(threads);
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch released = new CountDownLatch(1);
    try (ManyThreads.HoldfastWarnings warnings = new ManyThreads.HoldfastWarnings();
        Deployment.Contender client = subject.impl == null ? null
            : redis.connect(subject.impl, Duration.ofSeconds(30))) {
      List<Lock> locks = new ArrayList<>();
      for (int n = 0; n < names; n++) {
        locks.add(client == null ? new ReentrantLock() : client.lock("vt-wait:" + n));
      }
      Thread holder = new Thread(() -> {
        locks.forEach(Lock::lock);
        held.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        for (Lock lock : locks) {
          try {
            lock.unlock();
          } catch (RuntimeException e) { // e.g. the hold was lost meanwhile: counted, go on
            holderFailures.add(e);
          }
        }
        released.countDown();
      }, "holder");
      holder.setDaemon(true);
      holder.start();
      held.await();
      long baseline = usedHeapAfterGc();

      for (int t = 0; t < threads; t++) {
        Lock lock = locks.get(t % names);
        ManyThreads.start(() -> {
          try {
            calling.incrementAndGet();
            lock.lock();
            acquired.incrementAndGet();
            try {
              lock.unlock();
              done.incrementAndGet();
            } catch (RuntimeException | Error e) {
              failures.add(e);
            }
          } catch (RuntimeException | Error e) {
            failures.add(e);
          } finally {
            ended.countDown();
          }
        }, false);
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      while (calling.get() < threads && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      Thread.sleep(settle.toMillis()); // the waiters' first attempts end
      RedisUsage before = RedisUsage.of(redis.masters());
      long windowStart = System.nanoTime();
      Thread.sleep(window.toMillis());
      RedisUsage after = RedisUsage.of(redis.masters());
      double settleSeconds = (System.nanoTime() - windowStart) / 1e9;
      long failedBefore = failures.total();
      long waiting = calling.get() - acquired.get() - failedBefore;
      long heap = usedHeapAfterGc();
      double perWaiter = (double) (heap - baseline) / threads;

      long drainStart = System.nanoTime();
      release.countDown();
      boolean allEnded = ended.await(Math.max(1, deadline - System.nanoTime()),
          TimeUnit.NANOSECONDS);
      double drain = (System.nanoTime() - drainStart) / 1e9;
      released.await(10, TimeUnit.SECONDS);
      return new Result(subject, threads, waiting, failedBefore, perWaiter,
          subject.impl == null ? 0
              : (after.scriptCalls() - before.scriptCalls()) / settleSeconds,
          done.get(), failures.total(), drain, allEnded, failures.top(3), warnings.count(),
          warnings.top(3), holderFailures.total(), holderFailures.top(2));
    }
  }

  /** Used heap after full collections, once it stops shrinking (at most five). */
  static long usedHeapAfterGc() throws InterruptedException {
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(100);
      long now = memory.getHeapMemoryUsage().getUsed();
      if (now >= used - (1 << 20)) {
        return Math.min(now, used);
      }
      used = now;
    }
    return used;
  }

  private static String describe(Result r) {
    StringBuilder s = new StringBuilder(String.format(Locale.ROOT,
        "%s: %,d waiters, %,d waiting at the measurement (%,d failed before), heap per waiter"
            + " %,.0f bytes, %,.1f script calls/s while waiting; after release %,d done /"
            + " %,d failed in %.1f s, %s; %,d Holdfast warnings",
        r.subject().label, r.waiters(), r.waitingAtMeasure(), r.failedBeforeRelease(),
        r.heapPerWaiterBytes(), r.scriptCallsPerSecondWaiting(), r.done(), r.failed(),
        r.drainSeconds(), r.allEnded() ? "all ended" : "NOT ALL ENDED", r.warnings()));
    if (!r.failures().isEmpty()) {
      s.append("\n  failures:\n    ").append(r.failures());
    }
    if (!r.warningMessages().isEmpty()) {
      s.append("\n  warnings:\n    ").append(r.warningMessages());
    }
    if (r.holderFailures() > 0) {
      s.append("\n  the holder's unlock() failed ").append(r.holderFailures())
          .append(" times:\n    ").append(r.holderFailureMessages());
    }
    return s.toString();
  }

  private static String table(List<Result> results, String caption) {
    StringBuilder out = new StringBuilder();
    out.append('\n').append(caption).append("\n\n");
    out.append("| implementation | waiting at once | failed while waiting | heap per waiter"
        + " | script calls/s while waiting | done | failed | time to serve all | completed |\n");
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (Result r : results) {
      out.append(String.format(Locale.ROOT,
          "| %s | %,d | %,d | %,.0f bytes | %s | %,d | %,d | %.1f s | %s |%n",
          r.subject().label, r.waitingAtMeasure(), r.failedBeforeRelease(),
          r.heapPerWaiterBytes(),
          r.subject().impl == null ? "—"
              : String.format(Locale.ROOT, "%,.1f", r.scriptCallsPerSecondWaiting()),
          r.done(), r.failed(), r.drainSeconds(),
          r.completed() ? "yes" : (r.allEnded() ? "no (failures)" : "no (timed out)")));
    }
    return out.toString();
  }
}
