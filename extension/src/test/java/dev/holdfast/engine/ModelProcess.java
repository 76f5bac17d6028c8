package dev.holdfast.engine;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The clients and actor threads of one process of a {@link LockModelTest} run (the test JVM, or
 * the {@link ModelWorker} JVM): one {@link ModelSlot} per proxy port, each with
 * {@link ModelSettings#threads()} actors.
 *
 * <p>Lifecycle: {@link #start()}, {@link #stop()} (actors release what they hold and end),
 * {@link #awaitActors(Duration)}, {@link #awaitNoWaitedChannels(Duration)}, {@link #close()}.
 * Findings go to the history as violations. Thread-safe.
 */
final class ModelProcess implements AutoCloseable {
  private final ModelHistory history;
  private final List<ModelSlot> slots = new ArrayList<>();
  private final List<ModelActor> actors = new ArrayList<>();
  private final List<Thread> threads = new ArrayList<>();
  private final ScheduledThreadPoolExecutor interrupter;
  private volatile boolean stopping;

  /**
   * @param clients the properties of each client position (one {@link ModelSlot} each)
   */
  ModelProcess(ModelSettings settings, List<Map<String, String>> clients,
      ModelHistory history) {
    this.history = history;
    this.interrupter = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, history.proc() + "-interrupter");
      t.setDaemon(true);
      return t;
    });
    interrupter.setRemoveOnCancelPolicy(true);
    for (int c = 0; c < clients.size(); c++) {
      String slotLabel = history.proc() + ".c" + c;
      ModelSlot slot = new ModelSlot(slotLabel, clients.get(c), history);
      slots.add(slot);
      for (int t = 0; t < settings.threads(); t++) {
        ModelActor actor = new ModelActor(slotLabel + ".t" + t, slot, settings, history,
            interrupter, () -> stopping);
        actors.add(actor);
        Thread thread = new Thread(actor, actor.label());
        thread.setDaemon(true);
        threads.add(thread);
      }
    }
  }

  void start() {
    threads.forEach(Thread::start);
  }

  /** Actors stop choosing new work: they release what they hold and end. */
  void stop() {
    stopping = true;
  }

  /**
   * Waits until every actor has ended; an actor still running after {@code timeout} is
   * recorded as a violation with its stack, and its client is closed to wake it.
   *
   * @return whether every actor ended in time
   */
  boolean awaitActors(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    for (Thread thread : threads) {
      thread.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
    }
    boolean allEnded = true;
    for (int i = 0; i < threads.size(); i++) {
      Thread thread = threads.get(i);
      if (thread.isAlive()) {
        allEnded = false;
        String stack = Arrays.stream(thread.getStackTrace()).limit(25)
            .map(frame -> "    at " + frame).collect(Collectors.joining("\n"));
        history.violation("liveness", actors.get(i).label(), "actor did not end within "
            + timeout.toSeconds() + " s of the stop: " + actors.get(i).describeCall() + "\n"
            + stack);
      }
    }
    if (!allEnded) {
      slots.forEach(ModelSlot::close); // wakes waiters with IllegalStateException
      for (Thread thread : threads) {
        thread.join(5_000);
      }
    }
    return allEnded;
  }

  /**
   * Waits until no live client of this process has a local waiter entry
   * ({@link LockEngine#waitedChannels()}); records what is left after {@code timeout}.
   */
  void awaitNoWaitedChannels(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      List<String> left = new ArrayList<>();
      for (ModelSlot slot : slots) {
        ModelSlot.Generation generation = slot.current();
        if (!generation.closed()) {
          Set<String> channels = Clients.engine(generation.client).waitedChannels();
          if (!channels.isEmpty()) {
            left.add(slot.label() + " (client " + ModelEvent.shortId(generation.clientId) + "): "
                + channels);
          }
        }
      }
      if (left.isEmpty()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        history.violation("cleanup", "", "waitedChannels() not empty " + timeout.toSeconds()
            + " s after every actor ended: " + left);
        return;
      }
      Thread.sleep(50);
    }
  }

  @Override
  public void close() {
    stopping = true;
    slots.forEach(ModelSlot::close);
    interrupter.shutdownNow();
    try {
      interrupter.awaitTermination(1, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
