package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Initialized;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Instance;
import org.eclipse.microprofile.config.Config;

/**
 * Prepares every {@code @Locked} operation, and checks the whole run-time configuration, when
 * the application starts, for containers whose extension runs at build time (Quarkus), where
 * run-time configuration is not readable before: a bad {@code holdfast.*} value or {@code @Locked}
 * override, or a Redis that does not answer, stops the start instead of surfacing at the first
 * locked call. The portable extension
 * does the same during deployment validation and does not register this bean.
 */
@ApplicationScoped
public class HoldfastStartup {

  /** For the container. */
  public HoldfastStartup() {
  }

  /**
   * Creates the {@link LockedOperations} bean, which prepares every operation and throws a
   * {@code DeploymentException} naming each method, member, config key and value that is wrong;
   * then creates the {@link LockClient}, which checks that Redis answers, unless
   * {@code holdfast.redis.connect-at-startup=false}. Public: container-generated observer classes
   * may live in another class loader.
   */
  public void check(@Observes @Initialized(ApplicationScoped.class) Object started,
      Instance<LockedOperations> operations, Instance<LockClient> client,
      Instance<Config> config) {
    operations.get();
    HoldfastConfig.connectAtStartup(HoldfastConfig.current(config), client);
  }
}
