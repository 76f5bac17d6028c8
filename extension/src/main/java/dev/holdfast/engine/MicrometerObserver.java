package dev.holdfast.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Function;
import java.util.function.IntSupplier;

/**
 * Lock meters in a Micrometer {@link MeterRegistry}. Loaded only when the application gave
 * Holdfast a registry, which it can only do with Micrometer on its class path: nothing else in
 * Holdfast refers to this class's Micrometer types.
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>tags</th></tr>
 *   <tr><td>{@value #WAIT}</td><td>timer: time to acquire; its count is the acquisitions</td>
 *       <td>template, outcome</td></tr>
 *   <tr><td>{@value #HELD}</td><td>timer: acquisition to final unlock</td><td>template</td></tr>
 *   <tr><td>{@value #ACTIVE}</td><td>gauge: holds now</td><td>—</td></tr>
 *   <tr><td>{@value #WAITING}</td><td>gauge: threads waiting now</td><td>—</td></tr>
 *   <tr><td>{@value #SKIPPED}</td><td>counter: {@code @Locked(skipIfBusy = true)} calls that
 *       did not run because the lock was busy</td><td>template</td></tr>
 *   <tr><td>{@value #RENEWALS}</td><td>counter: watchdog renewals of a hold</td>
 *       <td>template, result ({@code ok}, {@code failed})</td></tr>
 *   <tr><td>{@value #LOST}</td><td>counter: holds lost</td><td>template, reason</td></tr>
 *   <tr><td>{@value #AT_RISK}</td><td>counter: at-risk episodes of watchdog holds (a renewal
 *       not confirmed while the hold was believed)</td><td>template</td></tr>
 *   <tr><td>{@value #RECOVERED}</td><td>counter: at-risk episodes ended by a confirmed
 *       renewal</td><td>template</td></tr>
 *   <tr><td>{@value #REDIS_ERRORS}</td><td>counter: Redis calls that failed</td>
 *       <td>operation, kind ({@code error}, {@code unanswered})</td></tr>
 * </table>
 *
 * <p><b>Cardinality.</b> Tags are bounded: a template is the {@code @Locked} template or the name
 * given to {@code getLock}, and past {@value #MAX_TEMPLATES} distinct templates per registry the
 * rest are counted under {@value #OTHER}. The meters of a template are resolved once and cached,
 * so recording costs a map lookup and the meter's own update, and allocates nothing.
 *
 * <p>Clients sharing a registry share its meters; the gauges add up every open client's holds
 * and waiters.
 */
final class MicrometerObserver implements LockObserver {
  static final String WAIT = "holdfast.lock.wait";
  static final String HELD = "holdfast.lock.held";
  static final String ACTIVE = "holdfast.lock.active";
  static final String WAITING = "holdfast.lock.waiting";
  static final String RENEWALS = "holdfast.lock.renewals";
  static final String SKIPPED = "holdfast.lock.skipped";
  static final String LOST = "holdfast.lock.lost";
  static final String AT_RISK = "holdfast.lock.at.risk";
  static final String RECOVERED = "holdfast.lock.recovered";
  static final String REDIS_ERRORS = "holdfast.redis.errors";
  static final int MAX_TEMPLATES = 100;
  static final String OTHER = "_other_";

  /** What the open clients of each registry share; an entry leaves with its last client. */
  private static final Map<MeterRegistry, Shared> SHARED = new IdentityHashMap<>();

  private final Shared shared;
  private final Source source;

  MicrometerObserver(Object registry, IntSupplier active, IntSupplier waiting) {
    MeterRegistry meters = (MeterRegistry) registry;
    this.source = new Source(active, waiting);
    synchronized (SHARED) {
      this.shared = SHARED.computeIfAbsent(meters, Shared::new);
      shared.sources.add(source);
    }
  }

  @Override
  public void acquisition(String template, Outcome outcome, long nanos) {
    shared.template(template).wait(outcome).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void released(String template, long nanos) {
    shared.template(template).held.record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void skipped(String template) {
    shared.template(template).skipped().increment();
  }

  @Override
  public void lost(String template, LossCause cause) {
    shared.template(template).lost(cause).increment();
  }

  @Override
  public void atRisk(String template) {
    shared.template(template).atRisk().increment();
  }

  @Override
  public void recovered(String template) {
    shared.template(template).recovered().increment();
  }

  @Override
  public void renewal(String template, boolean ok) {
    TemplateMeters meters = shared.template(template);
    (ok ? meters.renewalsOk : meters.renewalsFailed).increment();
  }

  @Override
  public void redisError(String operation, boolean unanswered) {
    Counter.builder(REDIS_ERRORS)
        .description("Redis calls of Holdfast that failed")
        .tags("operation", operation, "kind", unanswered ? "unanswered" : "error")
        .register(shared.registry)
        .increment();
  }

  @Override
  public void close() {
    synchronized (SHARED) {
      if (shared.sources.remove(source) && shared.sources.isEmpty()) {
        SHARED.remove(shared.registry);
        // Gauges read the sources of their Shared: the next client registers them anew.
        shared.registry.remove(shared.active);
        shared.registry.remove(shared.waiting);
      }
    }
  }

  private record Source(IntSupplier active, IntSupplier waiting) {
  }

  /** The meters and gauge sources of one registry. */
  private static final class Shared {
    final MeterRegistry registry;
    final Set<Source> sources = new CopyOnWriteArraySet<>();
    final Map<String, TemplateMeters> templates = new ConcurrentHashMap<>();
    final Gauge active;
    final Gauge waiting;
    private volatile TemplateMeters other;

    Shared(MeterRegistry registry) {
      this.registry = registry;
      this.active = Gauge.builder(ACTIVE, sources, s -> sum(s, Source::active))
          .description("Distributed locks held by this application now")
          .register(registry);
      this.waiting = Gauge.builder(WAITING, sources, s -> sum(s, Source::waiting))
          .description("Threads waiting for a distributed lock now")
          .register(registry);
    }

    private static double sum(Set<Source> sources, Function<Source, IntSupplier> figure) {
      int sum = 0;
      for (Source s : sources) {
        sum += figure.apply(s).getAsInt();
      }
      return sum;
    }

    TemplateMeters template(String template) {
      TemplateMeters meters = templates.get(template);
      if (meters != null) {
        return meters;
      }
      if (templates.size() >= MAX_TEMPLATES) {
        TemplateMeters o = other;
        if (o == null) {
          o = new TemplateMeters(registry, OTHER);
          other = o;
        }
        return o;
      }
      return templates.computeIfAbsent(template, t -> new TemplateMeters(registry, t));
    }
  }

  /** The meters of one template, resolved once. */
  private static final class TemplateMeters {
    private static final Outcome[] OUTCOMES = Outcome.values();
    private static final LossCause[] CAUSES = LossCause.values();

    private final MeterRegistry registry;
    private final Tags tags;
    private final AtomicReferenceArray<Timer> waits = new AtomicReferenceArray<>(OUTCOMES.length);
    private final AtomicReferenceArray<Counter> losses = new AtomicReferenceArray<>(CAUSES.length);
    private volatile Counter skipped;
    private volatile Counter atRisk;
    private volatile Counter recovered;
    final Timer held;
    final Counter renewalsOk;
    final Counter renewalsFailed;

    TemplateMeters(MeterRegistry registry, String template) {
      this.registry = registry;
      this.tags = Tags.of("template", template);
      this.held = timer(HELD, "How long distributed locks were held: acquisition to final unlock")
          .tags(tags).register(registry);
      this.renewalsOk = renewals("ok");
      this.renewalsFailed = renewals("failed");
    }

    private Counter renewals(String result) {
      return Counter.builder(RENEWALS)
          .description("Watchdog renewals of distributed lock holds")
          .tags(tags).tag("result", result)
          .register(registry);
    }

    /** Created on first use: outcomes that never happen publish no series. */
    Timer wait(Outcome outcome) {
      Timer t = waits.get(outcome.ordinal());
      if (t == null) {
        t = timer(WAIT, "Time to acquire distributed locks; the count is acquisitions by outcome")
            .tags(tags).tag("outcome", outcome.tag).register(registry);
        waits.set(outcome.ordinal(), t);
      }
      return t;
    }

    /** Created on first use: only templates of skipIfBusy methods that skipped publish it. */
    Counter skipped() {
      Counter c = skipped;
      if (c == null) {
        c = Counter.builder(SKIPPED)
            .description("@Locked(skipIfBusy) calls that did not run because the lock was busy")
            .tags(tags)
            .register(registry);
        skipped = c;
      }
      return c;
    }

    /** Created on first use, like the losses. */
    Counter atRisk() {
      Counter c = atRisk;
      if (c == null) {
        c = Counter.builder(AT_RISK)
            .description("Distributed lock holds at risk: a lease renewal was not confirmed")
            .tags(tags)
            .register(registry);
        atRisk = c;
      }
      return c;
    }

    Counter recovered() {
      Counter c = recovered;
      if (c == null) {
        c = Counter.builder(RECOVERED)
            .description("Distributed lock holds at risk whose lease renewal was confirmed again")
            .tags(tags)
            .register(registry);
        recovered = c;
      }
      return c;
    }

    Counter lost(LossCause cause) {
      Counter c = losses.get(cause.ordinal());
      if (c == null) {
        c = Counter.builder(LOST)
            .description("Distributed lock holds lost before their final unlock")
            .tags(tags).tag("reason", cause.tag)
            .register(registry);
        losses.set(cause.ordinal(), c);
      }
      return c;
    }

    private static Timer.Builder timer(String name, String description) {
      return Timer.builder(name)
          .description(description)
          .publishPercentiles(0.5, 0.95, 0.99)
          .publishPercentileHistogram()
          .minimumExpectedValue(Duration.ofMillis(1))
          .maximumExpectedValue(Duration.ofMinutes(5));
    }
  }
}
