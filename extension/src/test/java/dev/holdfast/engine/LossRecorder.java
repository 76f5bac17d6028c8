package dev.holdfast.engine;

import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * Records a client's {@link LockLost} reports with when and on which thread each listener call
 * ran. Thread-safe.
 */
final class LossRecorder implements Consumer<LockLost> {

  /** One listener call. */
  record Report(LockLost event, long heardAtNanos, String listenerThread) {
  }

  private final List<Report> reports = new CopyOnWriteArrayList<>();

  /** Registers a new recorder on {@code client}. */
  static LossRecorder on(LockClient client) {
    LossRecorder recorder = new LossRecorder();
    client.onLockLost(recorder);
    return recorder;
  }

  @Override
  public void accept(LockLost event) {
    reports.add(new Report(event, System.nanoTime(), Thread.currentThread().getName()));
  }

  List<Report> reports() {
    return List.copyOf(reports);
  }

  int count() {
    return reports.size();
  }

  /** Waits for the first report; fails after {@code timeout}. */
  Report awaitFirst(Duration timeout, String what) {
    Await.until(timeout, () -> !reports.isEmpty(), "LockLost reported: " + what);
    return reports.get(0);
  }

  /** What was reported so far, for failure messages. */
  @Override
  public String toString() {
    return reports.stream().map(r -> r.event().lockName() + " (thread " + r.event().threadId()
        + "): " + r.event().reason()).toList().toString();
  }
}
