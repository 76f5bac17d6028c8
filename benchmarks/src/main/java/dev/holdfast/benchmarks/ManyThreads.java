package dev.holdfast.benchmarks;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.stream.Collectors;

/**
 * What {@link VirtualThreadsBenchmark} and {@link WaiterMemoryBenchmark} share: starting virtual
 * threads from code compiled for Java 17 (through a method handle on
 * {@code Thread.startVirtualThread}, present from Java 21), a CPU burner that makes the machine
 * busy reproducibly, a tally of failures by message, and a count of the warnings Holdfast logs.
 */
final class ManyThreads {

  private static final MethodHandle START_VIRTUAL = findStartVirtual();

  private ManyThreads() {
  }

  private static MethodHandle findStartVirtual() {
    try {
      return MethodHandles.publicLookup().findStatic(Thread.class, "startVirtualThread",
          MethodType.methodType(Thread.class, Runnable.class));
    } catch (NoSuchMethodException | IllegalAccessException e) {
      return null; // Java 17-20: no virtual threads
    }
  }

  /** Whether this JVM has virtual threads (Java 21 or later). */
  static boolean virtualThreadsAvailable() {
    return START_VIRTUAL != null;
  }

  /** Fails with a message naming the JVM when it has no virtual threads. */
  static void requireVirtualThreads() {
    if (!virtualThreadsAvailable()) {
      throw new IllegalStateException("virtual threads need Java 21 or later; this is Java "
          + System.getProperty("java.version") + " (" + System.getProperty("java.home")
          + "). Run the jar with e.g. /usr/lib/jvm/temurin-25-jdk-amd64/bin/java, or pass"
          + " --platform");
    }
  }

  /** Starts {@code task} on a new virtual thread, or on a daemon platform thread if asked. */
  static Thread start(Runnable task, boolean platform) {
    if (platform) {
      Thread thread = new Thread(task);
      thread.setDaemon(true);
      thread.start();
      return thread;
    }
    try {
      return (Thread) START_VIRTUAL.invokeExact(task);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable e) {
      throw new IllegalStateException(e);
    }
  }

  /** The 1-minute load average, or -1 where the platform has none. */
  static double loadAverage() {
    return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }

  /**
   * {@code threads} platform threads that spin on arithmetic until {@link #close()}: the "machine
   * busy with a build" of issue 16, made reproducible. Each is a daemon at normal priority, so it
   * competes for the cores with the benchmark's carrier threads, Redis and the clients' I/O.
   */
  static final class CpuBurner implements AutoCloseable {
    private final List<Thread> threads = new ArrayList<>();
    private volatile boolean stop;
    /** Written so that the JIT cannot drop the loop. */
    static volatile long sink;

    CpuBurner(int threads) {
      for (int i = 0; i < threads; i++) {
        Thread thread = new Thread(this::spin, "cpu-burner-" + i);
        thread.setDaemon(true);
        thread.start();
        this.threads.add(thread);
      }
    }

    private void spin() {
      long x = System.nanoTime();
      while (!stop) {
        for (int i = 0; i < 100_000; i++) {
          x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
      }
    }

    int size() {
      return threads.size();
    }

    @Override
    public void close() {
      stop = true;
      for (Thread thread : threads) {
        try {
          thread.join(5_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /** Counts failures by exception class and message (the first line, numbers kept). */
  static final class Failures {
    private final Map<String, AtomicLong> byMessage = new ConcurrentHashMap<>();
    private final AtomicLong total = new AtomicLong();

    void add(Throwable failure) {
      total.incrementAndGet();
      String message = String.valueOf(failure.getMessage());
      int newline = message.indexOf('\n');
      if (newline >= 0) {
        message = message.substring(0, newline);
      }
      // One lock name or thread id must not make every failure its own line.
      message = message.replaceAll("\\d+", "N");
      if (message.length() > 200) {
        message = message.substring(0, 200) + " ...";
      }
      byMessage.computeIfAbsent(failure.getClass().getSimpleName() + ": " + message,
          k -> new AtomicLong()).incrementAndGet();
    }

    long total() {
      return total.get();
    }

    /** The most frequent messages, most frequent first, at most {@code limit}. */
    String top(int limit) {
      return byMessage.entrySet().stream()
          .sorted((a, b) -> Long.compare(b.getValue().get(), a.getValue().get()))
          .limit(limit)
          .map(e -> String.format(Locale.ROOT, "%,d x %s", e.getValue().get(), e.getKey()))
          .collect(Collectors.joining("\n    "));
    }
  }

  /**
   * Counts the records of level WARNING or above that Holdfast's loggers ({@code dev.holdfast},
   * through {@code System.Logger} and so java.util.logging) publish while installed, by message
   * shape — the false "thread ended without unlock()" losses of issue 16 show up here.
   */
  static final class HoldfastWarnings implements AutoCloseable {
    private final Logger logger = Logger.getLogger("dev.holdfast");
    private final Failures seen = new Failures();
    private final Handler handler = new Handler() {
      @Override
      public void publish(LogRecord record) {
        if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
          String message = record.getMessage();
          seen.add(new Warning(message));
        }
      }

      @Override
      public void flush() {
      }

      @Override
      public void close() {
      }
    };

    private final boolean parentHandlers = logger.getUseParentHandlers();

    /** Installs the counter; the records no longer reach the console (thousands would). */
    HoldfastWarnings() {
      logger.addHandler(handler);
      logger.setUseParentHandlers(false);
    }

    long count() {
      return seen.total();
    }

    String top(int limit) {
      return seen.top(limit);
    }

    @Override
    public void close() {
      logger.removeHandler(handler);
      logger.setUseParentHandlers(parentHandlers);
    }

    /** A log record's message as a {@link Failures} entry. */
    private static final class Warning extends Exception {
      private static final long serialVersionUID = 1L;

      Warning(String message) {
        super(message, null, false, false);
      }
    }
  }
}
