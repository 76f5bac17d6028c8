package dev.holdfast.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The events of one process of a {@link LockModelTest} run, in the order they were recorded.
 * The worker JVM streams each event to the test JVM as it is recorded (so a worker that hangs or
 * dies still leaves its history behind); the test JVM merges them into its own.
 *
 * <p>Thread-safe.
 */
final class ModelHistory {
  private final String proc;
  private final Consumer<String> sink;
  private final List<ModelEvent> events = new ArrayList<>();

  /**
   * @param proc the process label recorded in each event ({@code p0}, {@code p1}...)
   * @param sink receives each event's {@link ModelEvent#toLine() line}, or null
   */
  ModelHistory(String proc, Consumer<String> sink) {
    this.proc = proc;
    this.sink = sink;
  }

  String proc() {
    return proc;
  }

  void add(ModelEvent event) {
    synchronized (this) {
      events.add(event);
    }
    if (sink != null) {
      sink.accept(event.toLine());
    }
  }

  /** Records an event of this process. */
  void add(ModelEvent.Kind kind, String client, String actor, long threadId, String lock,
      String id, String op, String outcome, long start, long end, long a, long b, long c,
      String tag, String text) {
    add(new ModelEvent(kind, proc, client, actor, threadId, lock, id, op, outcome, start, end, a,
        b, c, tag, text));
  }

  /** A finding of the process itself (a stuck actor, a subscription left behind...). */
  void violation(String check, String actor, String text) {
    long now = ModelEvent.now();
    add(ModelEvent.Kind.NOTE, "", actor, 0, "", "", check, "VIOLATION", now, now, 0, 0, 0, "",
        text);
  }

  void info(String check, String text) {
    long now = ModelEvent.now();
    add(ModelEvent.Kind.NOTE, "", "", 0, "", "", check, "INFO", now, now, 0, 0, 0, "", text);
  }

  synchronized List<ModelEvent> snapshot() {
    return new ArrayList<>(events);
  }
}
