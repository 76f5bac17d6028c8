package dev.holdfast.cdi;

import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Initialized;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Instance;

/**
 * Prepares every {@code @Locked} operation, and checks the whole run-time configuration, when
 * the application starts, for containers whose extension runs at build time (Quarkus), where
 * run-time configuration is not readable before: a bad {@code holdfast.*} value or {@code @Locked}
 * override stops the start instead of surfacing at the first locked call. The portable extension
 * does the same during deployment validation and does not register this bean.
 */
@ApplicationScoped
public class HoldfastStartup {

  /** For the container. */
  public HoldfastStartup() {
  }

  /**
   * Creates the {@link LockedOperations} bean, which prepares every operation and throws a
   * {@code DeploymentException} naming each method, member, config key and value that is wrong.
   * Public: container-generated observer classes may live in another class loader.
   */
  public void check(@Observes @Initialized(ApplicationScoped.class) Object started,
      Instance<LockedOperations> operations) {
    operations.get();
  }
}
