package dev.holdfast.cdi;

import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Initialized;
import jakarta.enterprise.event.Observes;
import java.util.List;
import jakarta.enterprise.inject.Instance;
import org.eclipse.microprofile.config.Config;

/**
 * Checks the run-time configuration when the application starts, for containers whose extension
 * runs at build time (Quarkus): a bad {@code holdfast.*} value stops the start instead of
 * surfacing at the first locked call. The portable extension makes the same check during
 * deployment validation and does not register this bean.
 */
@ApplicationScoped
public class HoldfastStartup {

  /** For the container. */
  public HoldfastStartup() {
  }

  /** Public: container-generated observer classes may live in another class loader. */
  public void check(@Observes @Initialized(ApplicationScoped.class) Object started,
      Instance<Config> config) {
    List<String> problems = HoldfastConfig.problems(HoldfastConfig.current(config));
    if (!problems.isEmpty()) {
      throw new IllegalStateException(String.join("\n", problems));
    }
  }
}
