package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisExtension;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 16 §1, the first test of the Java 25 concurrency suite ({@code -Pjava25}, tag
 * {@code concurrency}; run with a JFR recording that must show no virtual thread pinned by
 * Holdfast): a thousand virtual threads of one client lock and unlock a few names, each call
 * completes, and no two threads are ever inside one name's section at once.
 *
 * <p>Virtual threads are reached through a method handle ({@code Thread.startVirtualThread}, Java
 * 21+), since the tests compile for Java 17; on an older JVM the test is skipped.
 */
@Tag("concurrency")
@Timeout(value = 180, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class VirtualThreadSmokeTest {
  private static final int THREADS = 1_000;
  private static final int CALLS = 3;
  private static final int NAMES = 5;

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void thousandVirtualThreads_lockAndUnlockFewNames_allCompleteWithoutOverlap()
      throws InterruptedException {
    MethodHandle startVirtual = startVirtualThread();
    assumeTrue(startVirtual != null, "virtual threads need Java 21+; this is "
        + System.getProperty("java.version"));
    redis.flushAll();
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    List<DistributedLock> locks = new ArrayList<>();
    AtomicInteger[] inside = new AtomicInteger[NAMES];
    for (int n = 0; n < NAMES; n++) {
      locks.add(client.getLock("vt-smoke:" + n));
      inside[n] = new AtomicInteger();
    }
    AtomicInteger done = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    AtomicInteger virtualThreads = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch ended = new CountDownLatch(THREADS);
    for (int t = 0; t < THREADS; t++) {
      int thread = t;
      Runnable task = () -> {
        try {
          if (isVirtual(Thread.currentThread())) {
            virtualThreads.incrementAndGet();
          }
          gate.await();
          for (int c = 0; c < CALLS; c++) {
            int name = (thread + c) % NAMES;
            DistributedLock lock = locks.get(name);
            lock.lock();
            try {
              if (inside[name].incrementAndGet() > 1) {
                overlaps.incrementAndGet();
              }
              Thread.yield(); // widens the section a little, so that an overlap would show
              inside[name].decrementAndGet();
            } finally {
              lock.unlock();
            }
            done.incrementAndGet();
          }
        } catch (Throwable e) {
          failures.add(e);
        } finally {
          ended.countDown();
        }
      };
      try {
        Thread unused = (Thread) startVirtual.invokeExact(task);
      } catch (Throwable e) {
        throw new AssertionError("could not start a virtual thread", e);
      }
    }
    gate.countDown();
    assertTrue(ended.await(150, TimeUnit.SECONDS), "not all virtual threads ended: "
        + done.get() + " calls done, " + failures.size() + " failed");
    assertEquals(List.of(), failures.stream().limit(5).map(Throwable::toString).toList(),
        failures.size() + " calls failed, e.g.");
    assertEquals(0, overlaps.get(), "overlapping sections");
    assertEquals(THREADS * CALLS, done.get());
    assertEquals(THREADS, virtualThreads.get(), "threads that were virtual");
    for (DistributedLock lock : locks) {
      assertTrue(!lock.isLocked(), lock.getName() + " still locked after every call ended");
    }
  }

  /** {@code Thread.startVirtualThread(Runnable)}, or null before Java 21. */
  static MethodHandle startVirtualThread() {
    try {
      return MethodHandles.publicLookup().findStatic(Thread.class, "startVirtualThread",
          MethodType.methodType(Thread.class, Runnable.class));
    } catch (NoSuchMethodException | IllegalAccessException e) {
      return null;
    }
  }

  private static boolean isVirtual(Thread thread) {
    try {
      return (boolean) Thread.class.getMethod("isVirtual").invoke(thread);
    } catch (ReflectiveOperationException e) {
      return false;
    }
  }
}
