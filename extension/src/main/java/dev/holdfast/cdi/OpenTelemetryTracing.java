package dev.holdfast.cdi;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import jakarta.enterprise.inject.Instance;

/**
 * {@link LockTracing} with the OpenTelemetry API. Loaded only when that API is on the class path
 * ({@link LockTracing#of}).
 *
 * <p>A span per {@code @Locked} acquisition, a child of the current span: named
 * {@code lock.wait <template>} (bounded, like every span name should be), with attributes
 * {@code lock.name} (the rendered name), {@code lock.template} and {@code lock.outcome}; an
 * acquisition that did not succeed sets the status {@code ERROR}.
 */
final class OpenTelemetryTracing implements LockTracing {
  static final String SCOPE = "dev.holdfast";
  static final AttributeKey<String> NAME = AttributeKey.stringKey("lock.name");
  static final AttributeKey<String> TEMPLATE = AttributeKey.stringKey("lock.template");
  static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("lock.outcome");

  private final Tracer tracer;

  private OpenTelemetryTracing(OpenTelemetry openTelemetry) {
    this.tracer = openTelemetry.getTracer(SCOPE);
  }

  static LockTracing of(Instance<Object> beans) {
    Instance<OpenTelemetry> bean = beans.select(OpenTelemetry.class);
    return new OpenTelemetryTracing(bean.isResolvable() ? bean.get() : GlobalOpenTelemetry.get());
  }

  @Override
  public Object waitBegins(String spanName, String template, String name) {
    return tracer.spanBuilder(spanName)
        .setSpanKind(SpanKind.INTERNAL)
        .setAttribute(TEMPLATE, template)
        .setAttribute(NAME, name)
        .startSpan();
  }

  @Override
  public void waitEnds(Object begun, String outcome, Throwable failure) {
    if (!(begun instanceof Span span)) {
      return;
    }
    span.setAttribute(OUTCOME, outcome);
    if (failure != null) {
      span.recordException(failure);
    }
    // A skipped call (@Locked(skipIfBusy)) is what the method asked for, not an error.
    if (!"acquired".equals(outcome) && !"skipped".equals(outcome)) {
      span.setStatus(StatusCode.ERROR, "lock not acquired: " + outcome);
    }
    span.end();
  }
}
