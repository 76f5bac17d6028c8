package dev.holdfast.engine;

import dev.holdfast.LockAtRisk;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One client position of a {@link LockModelTest} process: the {@link LockClient} its actors
 * share, which an actor may close and replace by a new one (a new generation, with a new
 * client id). Every {@code LockLost} a generation reports is recorded.
 *
 * <p>Probe windows run under the read side of a lock and closing takes the write side, so a
 * client is never closed while one of its threads is inside a window: the holds a close
 * abandons expire with their lease, and nobody is in their critical section by then.
 *
 * <p>Thread-safe.
 */
final class ModelSlot implements AutoCloseable {

  /** One client of this slot. */
  static final class Generation {
    final LockClient client;
    final String clientId;
    /** (threadId|lock) to the latest detectedAt (µs) of a LockLost received. */
    private final ConcurrentMap<String, Long> lost = new ConcurrentHashMap<>();
    /** Reports delivered so far; written by the client's event thread only. */
    private final java.util.concurrent.atomic.AtomicLong reports =
        new java.util.concurrent.atomic.AtomicLong();
    private volatile long closedAt;

    private Generation(LockClient client) {
      this.client = client;
      this.clientId = client.getClientId();
    }

    boolean closed() {
      return closedAt != 0;
    }

    /** When close() returned (µs), 0 while open. */
    long closedAt() {
      return closedAt;
    }

    /** The detectedAt of the latest LockLost for this thread and lock, or 0. */
    long lostAt(long threadId, String lock) {
      return lost.getOrDefault(threadId + "|" + lock, 0L);
    }
  }

  private final String label;
  private final Map<String, String> properties;
  private final ModelHistory history;
  private final ReentrantReadWriteLock gate = new ReentrantReadWriteLock(true);
  private volatile Generation current;
  private volatile long lastRecreatedNanos = System.nanoTime();
  private boolean closed;

  ModelSlot(String label, Map<String, String> properties, ModelHistory history) {
    this.label = label;
    this.properties = Map.copyOf(properties);
    this.history = history;
    this.current = open();
  }

  String label() {
    return label;
  }

  Generation current() {
    return current;
  }

  /**
   * Enters a probe window of a hold of {@code generation}: false (and nothing held) if that
   * client is closed or replaced. Pair a true result with {@link #exitWindow()}.
   */
  boolean enterWindow(Generation generation) {
    gate.readLock().lock();
    if (generation.closed() || generation != current) {
      gate.readLock().unlock();
      return false;
    }
    return true;
  }

  void exitWindow() {
    gate.readLock().unlock();
  }

  /** Whether a replacement is allowed now (at most one per {@code minMillis}). */
  boolean mayRecreate(long minMillis) {
    return System.nanoTime() - lastRecreatedNanos > minMillis * 1_000_000;
  }

  /**
   * Closes the current client (waiting for windows to end) and opens a new one. Threads in a
   * call of the old client get {@link IllegalStateException} or finish their call.
   */
  void recreate(String actor) {
    gate.writeLock().lock();
    try {
      if (closed) {
        return;
      }
      lastRecreatedNanos = System.nanoTime();
      closeGeneration(current, actor);
      current = open();
    } finally {
      gate.writeLock().unlock();
    }
  }

  /** Closes the current client for good. */
  @Override
  public void close() {
    gate.writeLock().lock();
    try {
      if (!closed) {
        closed = true;
        closeGeneration(current, label);
      }
    } finally {
      gate.writeLock().unlock();
    }
  }

  private void closeGeneration(Generation generation, String actor) {
    long start = ModelEvent.now();
    generation.client.close();
    generation.closedAt = ModelEvent.now();
    // a: the local handoffs this client ran, which the run counts
    history.add(ModelEvent.Kind.CLIENT, generation.clientId, actor, 0, "", label, "closed", "",
        start, generation.closedAt, Clients.engine(generation.client).localHandoffs(), 0, 0, "",
        "");
  }

  private Generation open() {
    long start = ModelEvent.now();
    LockClient client;
    while (true) {
      try {
        client = LockClient.create(properties);
        break;
      } catch (LockException e) {
        // Creation checks that Redis answers (connect-at-startup): ride out a fault.
        sleep(100);
      }
    }
    Generation generation = new Generation(client);
    client.onLockLost(event -> received(generation, event));
    client.onLockAtRisk(event -> received(generation, event));
    client.onLockRecovered(event -> received(generation, event));
    history.add(ModelEvent.Kind.CLIENT, generation.clientId, label, 0, "", label, "created", "",
        start, ModelEvent.now(), 0, 0, 0, "", "");
    return generation;
  }

  private void received(Generation generation, LockLost event) {
    long received = ModelEvent.now();
    long detected = micros(event.detectedAt());
    generation.lost.merge(event.threadId() + "|" + event.lockName(), detected, Math::max);
    history.add(ModelEvent.Kind.LOST, generation.clientId, "", event.threadId(),
        event.lockName(), "", "LockLost", "", detected, received,
        generation.reports.incrementAndGet(), 0, 0, "", event.reason());
  }

  private void received(Generation generation, LockAtRisk event) {
    long received = ModelEvent.now();
    history.add(ModelEvent.Kind.AT_RISK, generation.clientId, "", event.threadId(),
        event.lockName(), "", "LockAtRisk", "", micros(event.detectedAt()), received,
        generation.reports.incrementAndGet(), 0, event.timeLeft().toNanos() / 1_000,
        event.template(), event.lastError());
  }

  private void received(Generation generation, LockRecovered event) {
    long received = ModelEvent.now();
    history.add(ModelEvent.Kind.RECOVERED, generation.clientId, "", event.threadId(),
        event.lockName(), "", "LockRecovered", "", micros(event.detectedAt()), received,
        generation.reports.incrementAndGet(), 0, event.atRiskFor().toNanos() / 1_000,
        event.template(), "");
  }

  private static long micros(java.time.Instant at) {
    return at.getEpochSecond() * 1_000_000 + at.getNano() / 1_000;
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
