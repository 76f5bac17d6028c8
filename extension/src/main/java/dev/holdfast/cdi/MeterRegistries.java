package dev.holdfast.cdi;

import jakarta.enterprise.inject.Instance;
import java.util.Optional;

/**
 * Finds the container's Micrometer registry for the lock meters: the {@code MeterRegistry} bean
 * (Quarkus with {@code quarkus-micrometer}, WildFly with its {@code micrometer} subsystem); when
 * several are resolvable and none is the default, Micrometer's global composite registry, which
 * containers feed. None without Micrometer on the class path (checked before any Micrometer class
 * is touched) or without a registry bean.
 */
final class MeterRegistries {

  private MeterRegistries() {
  }

  static Optional<Object> find(Instance<Object> beans) {
    if (!OptionalApis.present(OptionalApis.METER_REGISTRY)) {
      return Optional.empty();
    }
    Instance<?> registry = beans.select(OptionalApis.load(OptionalApis.METER_REGISTRY));
    if (registry.isResolvable()) {
      return Optional.of(registry.get());
    }
    return registry.isAmbiguous() ? Optional.of(GlobalRegistry.get()) : Optional.empty();
  }

  /** Touches Micrometer; loaded only when it is present. */
  private static final class GlobalRegistry {
    static Object get() {
      return io.micrometer.core.instrument.Metrics.globalRegistry;
    }
  }
}
