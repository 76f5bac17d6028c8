package dev.holdfast.cdi;

import jakarta.enterprise.inject.Instance;

/**
 * Spans of {@code @Locked} waits: {@code lock.wait <template>} in the current trace when the
 * application has OpenTelemetry ({@link OpenTelemetryTracing}), nothing otherwise.
 */
interface LockTracing {
  LockTracing NONE = new LockTracing() {
  };

  /**
   * The tracing for the application: its {@code OpenTelemetry} bean (Quarkus, WildFly), else
   * {@code GlobalOpenTelemetry} when the OpenTelemetry API is on the class path; else none.
   */
  static LockTracing of(Instance<Object> beans) {
    return OptionalApis.present(OptionalApis.OPEN_TELEMETRY)
        ? OpenTelemetryTracing.of(beans) : NONE;
  }

  /**
   * A wait for lock {@code name} begins: the span to end, or {@code null}.
   *
   * @param spanName {@code lock.wait <template>}, made once per operation
   */
  default Object waitBegins(String spanName, String template, String name) {
    return null;
  }

  /**
   * The wait ended.
   *
   * @param outcome {@code acquired}, {@code timed_out}, {@code interrupted} or {@code failed}
   * @param failure what was thrown, or {@code null}
   */
  default void waitEnds(Object span, String outcome, Throwable failure) {
  }
}
