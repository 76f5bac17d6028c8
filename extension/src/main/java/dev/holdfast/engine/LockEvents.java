package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.EventType;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Threshold;
import jdk.jfr.Timespan;

/**
 * JDK Flight Recorder events, so that a recording shows who waited for which lock, who held it,
 * for how long, and which holds were at risk or lost: {@code dev.holdfast.LockWait},
 * {@code LockHeld}, {@code LockLost}, {@code LockRenewalFailed}, {@code LockAtRisk} and
 * {@code LockRecovered} (category Holdfast).
 *
 * <p><b>Cost.</b> An event whose duration matters begins where the work begins, so it must exist
 * before it is known whether it will be committed; it is created only when its type is enabled
 * in a running recording ({@link EventType#isEnabled()}, a field read), so a JVM that is not
 * recording allocates nothing. {@code LockWait} and {@code LockHeld} have a default threshold of
 * {@value #THRESHOLD}: a production recording keeps the waits and holds that matter, not every
 * uncontended call ({@code jfr configure}, or a {@code .jfc} file, sets it to {@code 0 ms}).
 *
 * <p>Where JFR is missing (a runtime linked without {@code jdk.jfr}, a WildFly deployment that
 * does not import the {@code jdk.jfr} module), every method is a no-op.
 */
final class LockEvents {
  private static final System.Logger LOG = System.getLogger(LockEvents.class.getName());
  static final String THRESHOLD = "10 ms";

  private static final EventType WAIT;
  private static final EventType HELD;
  private static final EventType LOST;
  private static final EventType RENEWAL_FAILED;
  private static final EventType AT_RISK;
  private static final EventType RECOVERED;

  static {
    EventType wait = null;
    EventType held = null;
    EventType lost = null;
    EventType renewalFailed = null;
    EventType atRisk = null;
    EventType recovered = null;
    try {
      // Asked first, by name: defining an event class without jdk.jfr visible fails noisily
      // (WildFly deployments see only java.se unless they import the jdk.jfr module).
      Class.forName("jdk.jfr.Event", false, LockEvents.class.getClassLoader());
      wait = EventType.getEventType(Wait.class);
      held = EventType.getEventType(Held.class);
      lost = EventType.getEventType(Lost.class);
      renewalFailed = EventType.getEventType(RenewalFailed.class);
      atRisk = EventType.getEventType(AtRisk.class);
      recovered = EventType.getEventType(Recovered.class);
    } catch (Throwable t) { // LinkageError without jdk.jfr, SecurityException, ...
      LOG.log(Level.DEBUG, "JFR events are off: " + t);
    }
    WAIT = wait;
    HELD = held;
    LOST = lost;
    RENEWAL_FAILED = renewalFailed;
    AT_RISK = atRisk;
    RECOVERED = recovered;
  }

  private LockEvents() {
  }

  private static boolean enabled(EventType type) {
    return type != null && type.isEnabled();
  }

  /** A thread starts acquiring: the event to end, or {@code null} when nobody records waits. */
  static Object waitBegins() {
    if (!enabled(WAIT)) {
      return null;
    }
    Wait event = new Wait();
    event.begin();
    return event;
  }

  static void waitEnds(Object begun, String name, String template, LockObserver.Outcome outcome) {
    // Tested for null before the cast: without JFR, the event class must never be resolved.
    if (begun != null) {
      Wait event = (Wait) begun;
      event.end();
      if (event.shouldCommit()) {
        event.name = name;
        event.template = template;
        event.outcome = outcome.tag;
        event.commit();
      }
    }
  }

  /** A hold begins (first acquisition): the event to end, or {@code null}. */
  static Object holdBegins() {
    if (!enabled(HELD)) {
      return null;
    }
    Held event = new Held();
    event.begin();
    return event;
  }

  /** The hold's final {@code unlock()} released the lock; called by the holder. */
  static void holdEnds(Object begun, String name, String template) {
    if (begun != null) {
      Held event = (Held) begun;
      event.end();
      if (event.shouldCommit()) {
        event.name = name;
        event.template = template;
        event.commit();
      }
    }
  }

  static void lost(String name, String template, Thread holder, long holderId,
      LockObserver.LossCause cause, String reason, long heldNanos) {
    if (!enabled(LOST)) {
      return;
    }
    Lost event = new Lost();
    event.cause = cause.tag;
    event.reason = reason;
    event.heldFor = heldNanos;
    event.commit(name, template, holder, holderId);
  }

  static void renewalFailed(String name, String template, Thread holder, long holderId,
      String node, String error) {
    if (!enabled(RENEWAL_FAILED)) {
      return;
    }
    RenewalFailed event = new RenewalFailed();
    event.node = node;
    event.error = error;
    event.commit(name, template, holder, holderId);
  }

  /** A hold's at-risk episode began ({@link dev.holdfast.LockAtRisk}). */
  static void atRisk(String name, String template, Thread holder, long holderId,
      long timeLeftNanos, String error) {
    if (!enabled(AT_RISK)) {
      return;
    }
    AtRisk event = new AtRisk();
    event.timeLeft = timeLeftNanos;
    event.error = error;
    event.commit(name, template, holder, holderId);
  }

  /** A hold's at-risk episode ended with a renewal ({@link dev.holdfast.LockRecovered}). */
  static void recovered(String name, String template, Thread holder, long holderId,
      long atRiskNanos) {
    if (!enabled(RECOVERED)) {
      return;
    }
    Recovered event = new Recovered();
    event.atRiskFor = atRiskNanos;
    event.commit(name, template, holder, holderId);
  }

  /**
   * What every event about one hold says of it. Each is raised by a Holdfast thread, whose stack
   * says nothing of the holder: each is marked {@code @StackTrace(false)}.
   */
  abstract static class HoldEvent extends Event {
    @Label("Lock")
    String name;
    @Label("Template")
    String template;
    @Label("Holder")
    Thread holder;
    @Label("Holder Thread Id")
    long holderId;

    /** Fills in the hold and commits; the event's own fields are set first. */
    final void commit(String name, String template, Thread holder, long holderId) {
      this.name = name;
      this.template = template;
      this.holder = holder;
      this.holderId = holderId;
      commit();
    }
  }

  @Name("dev.holdfast.LockWait")
  @Label("Lock Wait")
  @Category("Holdfast")
  @Description("A thread acquiring a distributed lock: from the call to its outcome")
  @Threshold(THRESHOLD)
  static final class Wait extends Event {
    @Label("Lock")
    String name;
    @Label("Template")
    @Description("The lock's @Locked template, or its name")
    String template;
    @Label("Outcome")
    @Description("acquired, timed_out, interrupted, skipped or failed")
    String outcome;
  }

  @Name("dev.holdfast.LockHeld")
  @Label("Lock Held")
  @Category("Holdfast")
  @Description("A distributed lock held by a thread: from its acquisition to its final unlock()")
  @Threshold(THRESHOLD)
  static final class Held extends Event {
    @Label("Lock")
    String name;
    @Label("Template")
    String template;
  }

  @Name("dev.holdfast.LockLost")
  @Label("Lock Lost")
  @Category("Holdfast")
  @Description("A hold that ended without its final unlock()")
  @StackTrace(false)
  static final class Lost extends HoldEvent {
    @Label("Cause")
    @Description("lease_unconfirmed, lease_expired, gone, force_unlocked, thread_ended, "
        + "uncertain or count_mismatch")
    String cause;
    @Label("Reason")
    String reason;
    @Label("Held For")
    @Timespan(Timespan.NANOSECONDS)
    long heldFor;
  }

  @Name("dev.holdfast.LockRenewalFailed")
  @Label("Lock Renewal Failed")
  @Category("Holdfast")
  @Description("A watchdog renewal of a hold that Redis did not confirm")
  @StackTrace(false)
  static final class RenewalFailed extends HoldEvent {
    @Label("Redis Node")
    String node;
    @Label("Error")
    String error;
  }

  @Name("dev.holdfast.LockAtRisk")
  @Label("Lock At Risk")
  @Category("Holdfast")
  @Description("A watchdog hold whose renewal Redis did not confirm: believed for Time Left more, "
      + "then lost unless a renewal gets through")
  @StackTrace(false)
  static final class AtRisk extends HoldEvent {
    @Label("Time Left")
    @Timespan(Timespan.NANOSECONDS)
    long timeLeft;
    @Label("Error")
    String error;
  }

  @Name("dev.holdfast.LockRecovered")
  @Label("Lock Recovered")
  @Category("Holdfast")
  @Description("A hold at risk whose renewal Redis confirmed again before its deadline")
  @StackTrace(false)
  static final class Recovered extends HoldEvent {
    @Label("At Risk For")
    @Timespan(Timespan.NANOSECONDS)
    long atRiskFor;
  }
}
