package dev.holdfast.engine;

import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;

/**
 * One entry of a {@link LockModelTest} history, as recorded by an actor, a client's report
 * listeners ({@code LockLost}, {@code LockAtRisk}, {@code LockRecovered}), the fault driver or a process. Times are wall-clock microseconds since the epoch,
 * comparable across the test JVM and the worker JVM (same machine, same clock).
 *
 * <p>Field use by kind:
 * <ul>
 *   <li>{@code CALL}: one call of the API. {@code id} the hold episode it belongs to (empty for
 *       none), {@code op} the call with its arguments, {@code outcome}, {@code start}/{@code end},
 *       {@code a}/{@code b} the hold count before/after as the model sees it (for
 *       {@code getHoldCount}: expected/observed), {@code c} the time bound in µs (0: none),
 *       {@code tag} what the model expects or noted (e.g. {@code lost:lease},
 *       {@code interrupt@<µs>}), {@code text} the exception message.</li>
 *   <li>{@code EPISODE_BEGIN}: a hold episode (first acquisition of a lock by a thread until its
 *       count is back to 0) started: {@code start} the acquiring call's start, {@code end} its
 *       return (from then on the hold is believed held).</li>
 *   <li>{@code EPISODE_END}: {@code outcome} UNLOCKED, LOST, CLOSED (its client was closed) or
 *       ABANDONED; {@code end} when.</li>
 *   <li>{@code WINDOW}: a probe window inside a critical section: {@code id} the window,
 *       {@code tag} its episode, {@code a} the probe count on entry (&gt; 1: someone else was
 *       inside), {@code text} the windows inside at entry, comma-separated.</li>
 *   <li>{@code LOST}: a {@code LockLost} event: {@code start} its {@code detectedAt},
 *       {@code end} when the listener received it, {@code a} its place among the reports its
 *       client delivered (1, 2...: the order the listeners heard them), {@code text} the
 *       reason.</li>
 *   <li>{@code AT_RISK}: a {@code LockAtRisk} event: like {@code LOST}, with {@code c} its
 *       {@code timeLeft} in µs, {@code tag} its template, {@code text} its last error.</li>
 *   <li>{@code RECOVERED}: a {@code LockRecovered} event: like {@code LOST}, with {@code c} its
 *       {@code atRiskFor} in µs, {@code tag} its template.</li>
 *   <li>{@code FAULT}: {@code op} the fault, {@code lock} its target, {@code start}/{@code end}
 *       when it was active, {@code text} its parameters.</li>
 *   <li>{@code CLIENT}: {@code op} created or closed, {@code actor} the client slot.</li>
 *   <li>{@code NOTE}: {@code outcome} VIOLATION or INFO, {@code op} the check, {@code text}.</li>
 * </ul>
 */
record ModelEvent(Kind kind, String proc, String client, String actor, long threadId,
    String lock, String id, String op, String outcome, long start, long end, long a, long b,
    long c, String tag, String text) {

  enum Kind { CALL, EPISODE_BEGIN, EPISODE_END, WINDOW, LOST, AT_RISK, RECOVERED, FAULT, CLIENT,
    NOTE }

  private static final DateTimeFormatter TIME =
      DateTimeFormatter.ofPattern("HH:mm:ss.SSSSSS").withZone(ZoneId.systemDefault());
  private static final int FIELDS = 16;

  ModelEvent {
    client = nonNull(client);
    actor = nonNull(actor);
    lock = nonNull(lock);
    id = nonNull(id);
    op = nonNull(op);
    outcome = nonNull(outcome);
    tag = nonNull(tag);
    text = nonNull(text);
  }

  /** Tab-separated, one line; tabs and line breaks in text fields become spaces. */
  String toLine() {
    return String.join("\t", kind.name(), clean(proc), clean(client), clean(actor),
        Long.toString(threadId), clean(lock), clean(id), clean(op), clean(outcome),
        Long.toString(start), Long.toString(end), Long.toString(a), Long.toString(b),
        Long.toString(c), clean(tag), clean(text));
  }

  /** The inverse of {@link #toLine()}. */
  static ModelEvent parse(String line) {
    String[] f = line.split("\t", -1);
    if (f.length != FIELDS) {
      throw new IllegalArgumentException("Not a model event (" + f.length + " fields): " + line);
    }
    return new ModelEvent(Kind.valueOf(f[0]), f[1], f[2], f[3], Long.parseLong(f[4]), f[5], f[6],
        f[7], f[8], Long.parseLong(f[9]), Long.parseLong(f[10]), Long.parseLong(f[11]),
        Long.parseLong(f[12]), Long.parseLong(f[13]), f[14], f[15]);
  }

  /** For reports: time, who, what. */
  String describe() {
    List<String> parts = new ArrayList<>();
    parts.add(time(start) + (end != start ? ".." + time(end) : ""));
    parts.add(kind.name());
    if (!actor.isEmpty()) {
      parts.add(actor + (threadId != 0 ? " (thread " + threadId + ")" : ""));
    }
    if (!client.isEmpty()) {
      parts.add("client " + shortId(client));
    }
    if (!lock.isEmpty()) {
      parts.add("lock '" + lock + "'");
    }
    if (!op.isEmpty()) {
      parts.add(op);
    }
    if (!outcome.isEmpty()) {
      parts.add("-> " + outcome);
    }
    if (kind == Kind.CALL) {
      parts.add("count " + a + "->" + b);
    }
    if (!id.isEmpty()) {
      parts.add("[" + id + "]");
    }
    if (!tag.isEmpty()) {
      parts.add("{" + tag + "}");
    }
    if (!text.isEmpty()) {
      parts.add("\"" + text + "\"");
    }
    return String.join(" ", parts);
  }

  long durationMicros() {
    return end - start;
  }

  static String time(long micros) {
    return TIME.format(Instant.ofEpochSecond(micros / 1_000_000, (micros % 1_000_000) * 1_000));
  }

  /** Now, in wall-clock microseconds since the epoch. */
  static long now() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
  }

  static String shortId(String clientId) {
    return clientId.length() > 8 ? clientId.substring(0, 8) : clientId;
  }

  private static String nonNull(String s) {
    return s == null ? "" : s;
  }

  private static String clean(String s) {
    return s.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
  }
}
