package dev.holdfast.cdi;

/**
 * Which optional APIs the application has: MicroProfile Health, Micrometer, OpenTelemetry, JTA,
 * Mutiny.
 * Holdfast declares them {@code provided} and optional; a class that uses one is loaded only
 * after the check here says the API is visible to Holdfast's class loader, so an application
 * without it never meets a {@code NoClassDefFoundError}.
 */
final class OptionalApis {
  static final String HEALTH_CHECK = "org.eclipse.microprofile.health.HealthCheck";
  static final String METER_REGISTRY = "io.micrometer.core.instrument.MeterRegistry";
  static final String OPEN_TELEMETRY = "io.opentelemetry.api.OpenTelemetry";
  /** JTA: the commit guard ({@link TransactionGuard}). */
  static final String TRANSACTION_REGISTRY =
      "jakarta.transaction.TransactionSynchronizationRegistry";
  /** Mutiny: its callback decorators carry the caller's context ({@link UniLocked#contextual}). */
  static final String MUTINY = "io.smallrye.mutiny.infrastructure.Infrastructure";
  /** The bean that needs JTA, by name: naming its class would load it. */
  static final String TRANSACTION_BEGUN = "dev.holdfast.cdi.TransactionBegun";

  private OptionalApis() {
  }

  /** Whether {@code className} is visible to Holdfast's class loader (nothing is initialised). */
  static boolean present(String className) {
    try {
      Class.forName(className, false, OptionalApis.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  /** The class of {@code className} as Holdfast sees it; call only after {@link #present}. */
  static Class<?> load(String className) {
    try {
      return Class.forName(className, false, OptionalApis.class.getClassLoader());
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException(className + " vanished", e);
    }
  }
}
