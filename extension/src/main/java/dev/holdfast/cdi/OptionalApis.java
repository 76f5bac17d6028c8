package dev.holdfast.cdi;

import jakarta.enterprise.inject.spi.CDI;
import javax.naming.InitialContext;
import javax.naming.NamingException;

/**
 * Which optional APIs the application has: MicroProfile Health, Micrometer, OpenTelemetry, JTA,
 * Mutiny, Jakarta Concurrency.
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
  /**
   * Jakarta Concurrency: the container's {@code ContextService} carries the caller's context to
   * an asynchronous {@code @Locked} method ({@link ContainerContext}).
   */
  static final String CONTEXT_SERVICE = "jakarta.enterprise.concurrent.ContextService";
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

  /**
   * The container's {@code type}: its CDI bean if exactly one resolves, else what JNDI has at
   * {@code jndiName}. A server binds {@code java:comp} names for the calling thread's component:
   * call this on an application thread.
   *
   * @throws NamingException if JNDI has nothing there (a CDI failure, outside a container, is
   *     suppressed on it)
   * @throws ClassCastException if what JNDI has there is not a {@code type}
   */
  static <T> T containerResource(Class<T> type, String jndiName) throws NamingException {
    RuntimeException cdiFailure = null;
    try {
      var beans = CDI.current().select(type);
      if (beans.isResolvable()) {
        return beans.get();
      }
    } catch (RuntimeException e) {
      cdiFailure = e; // no CDI container here: try JNDI
    }
    try {
      return type.cast(new InitialContext().lookup(jndiName));
    } catch (NamingException | RuntimeException e) {
      if (cdiFailure != null) {
        e.addSuppressed(cdiFailure);
      }
      throw e;
    }
  }
}
