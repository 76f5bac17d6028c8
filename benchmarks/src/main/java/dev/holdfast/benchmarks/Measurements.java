package dev.holdfast.benchmarks;

import dev.holdfast.testing.RedisServer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.function.IntFunction;
import redis.clients.jedis.Jedis;

/** The measuring loops of {@link SideBySideBenchmark} and the statistics over their samples. */
final class Measurements {

  private static final int WARMUP = 0;
  private static final int MEASURE = 1;
  private static final int STOP = 2;

  private Measurements() {
  }

  /**
   * Throughput of {@code threads} threads, each calling {@code lock()} + {@code unlock()} in a
   * loop on the handle {@code handles} gives it (called in that thread, before the loop): first
   * for {@code warmupSeconds}, uncounted, then for {@code seconds}, counted.
   *
   * @return completed {@code lock()} + {@code unlock()} pairs per second, all threads together
   */
  static double throughput(int threads, IntFunction<Lock> handles, double warmupSeconds,
      double seconds) throws InterruptedException {
    long[] counts = new long[threads * 16]; // one slot per thread, 128 bytes apart
    AtomicInteger phase = new AtomicInteger(WARMUP); // a volatile read per iteration
    var failure = new AtomicReference<Throwable>();
    CountDownLatch ready = new CountDownLatch(threads);
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int slot = t * 16;
      int index = t;
      Thread worker = new Thread(() -> {
        try {
          Lock lock = handles.apply(index);
          ready.countDown();
          long counted = 0;
          int seen;
          while ((seen = phase.get()) != STOP) {
            lock.lock();
            lock.unlock();
            if (seen == MEASURE) {
              counted++;
            }
          }
          counts[slot] = counted;
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
          ready.countDown();
        }
      }, "bench-" + t);
      worker.setDaemon(true);
      workers.add(worker);
      worker.start();
    }
    ready.await();
    sleepSeconds(warmupSeconds);
    phase.set(MEASURE);
    long start = System.nanoTime();
    sleepSeconds(seconds);
    phase.set(STOP);
    long nanos = System.nanoTime() - start;
    for (Thread worker : workers) {
      worker.join(60_000);
      if (worker.isAlive()) {
        throw new IllegalStateException(worker.getName() + " did not stop within 60 s");
      }
    }
    rethrow(failure.get());
    long total = 0;
    for (int t = 0; t < threads; t++) {
      total += counts[t * 16];
    }
    return total / (nanos / 1e9);
  }

  /**
   * Handoff latency: the calling thread holds {@code holder}; a thread of its own waits in
   * {@code waiter.lock()} (another client); once the waiter is parked and {@code settleMillis}
   * have passed, the holder calls {@code unlock()}; the sample is the time from just before that
   * call to the waiter's {@code lock()} returning. Repeated for {@code warmupSeconds} (dropped),
   * then for {@code seconds}.
   *
   * @return the samples in microseconds
   */
  static List<Double> handoffMicros(Lock holder, Lock waiter, long settleMillis,
      double warmupSeconds, double seconds) throws InterruptedException {
    Semaphore go = new Semaphore(0);
    Semaphore done = new Semaphore(0);
    long[] acquiredAt = new long[1];
    boolean[] entering = new boolean[1];
    Object sync = new Object();
    var failure = new AtomicReference<Throwable>();
    Thread waiting = new Thread(() -> {
      try {
        while (true) {
          go.acquire();
          synchronized (sync) {
            entering[0] = true;
          }
          waiter.lock();
          long now = System.nanoTime();
          waiter.unlock();
          synchronized (sync) {
            acquiredAt[0] = now;
            entering[0] = false;
          }
          done.release();
        }
      } catch (InterruptedException e) {
        // stopped
      } catch (Throwable e) {
        failure.set(e);
        done.release();
      }
    }, "bench-waiter");
    waiting.setDaemon(true);
    waiting.start();
    List<Double> samples = new ArrayList<>();
    try {
      long warmupEnd = System.nanoTime() + (long) (warmupSeconds * 1e9);
      long end = warmupEnd + (long) (seconds * 1e9);
      while (System.nanoTime() < end || samples.isEmpty()) {
        holder.lock();
        go.release();
        awaitParked(waiting, sync, entering);
        Thread.sleep(settleMillis); // lets the waiter finish subscribing: outside the sample
        long releasedAt = System.nanoTime();
        holder.unlock();
        if (!done.tryAcquire(60, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the waiter did not get the lock within 60 s");
        }
        rethrow(failure.get());
        long acquired;
        synchronized (sync) {
          acquired = acquiredAt[0];
        }
        if (releasedAt >= warmupEnd) {
          samples.add((acquired - releasedAt) / 1e3);
        }
      }
    } finally {
      waiting.interrupt();
      waiting.join(10_000);
    }
    return samples;
  }

  /** Waits until the waiter has entered {@code lock()} and parked in it. */
  private static void awaitParked(Thread waiting, Object sync, boolean[] entering)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      boolean entered;
      synchronized (sync) {
        entered = entering[0];
      }
      Thread.State state = waiting.getState();
      if (entered && (state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING)) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the waiter did not park in lock() within 60 s");
      }
      Thread.sleep(0, 100_000);
    }
  }

  /** Script calls and CPU time of a set of Redis servers, summed, at one moment. */
  record RedisUsage(long scriptCalls, double cpuSeconds) {

    static RedisUsage of(List<RedisServer> servers) {
      long calls = 0;
      double cpu = 0;
      for (RedisServer server : servers) {
        try (Jedis admin = server.admin()) {
          for (String line : admin.info("commandstats").split("\r?\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")
                || line.startsWith("cmdstat_evalsha_ro:") || line.startsWith("cmdstat_eval_ro:")
                || line.startsWith("cmdstat_fcall:")) {
              calls += Long.parseLong(line.replaceAll("^cmdstat_[^:]+:calls=(\\d+),.*", "$1"));
            }
          }
          for (String line : admin.info("cpu").split("\r?\n")) {
            if (line.startsWith("used_cpu_sys:") || line.startsWith("used_cpu_user:")) {
              cpu += Double.parseDouble(line.substring(line.indexOf(':') + 1).trim());
            }
          }
        }
      }
      return new RedisUsage(calls, cpu);
    }
  }

  static double median(List<Double> values) {
    return percentile(values, 50);
  }

  /** The nearest-rank percentile; NaN for no values. */
  static double percentile(List<Double> values, double percent) {
    if (values.isEmpty()) {
      return Double.NaN;
    }
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    if (percent == 50 && sorted.size() % 2 == 0) {
      int n = sorted.size();
      return (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }
    int rank = (int) Math.ceil(percent / 100 * sorted.size());
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, rank - 1)));
  }

  static void sleepSeconds(double seconds) throws InterruptedException {
    long millis = (long) (seconds * 1000);
    if (millis > 0) {
      Thread.sleep(millis);
    }
  }

  private static void rethrow(Throwable failure) {
    if (failure == null) {
      return;
    }
    if (failure instanceof RuntimeException e) {
      throw e;
    }
    if (failure instanceof Error e) {
      throw e;
    }
    throw new IllegalStateException(failure);
  }
}
