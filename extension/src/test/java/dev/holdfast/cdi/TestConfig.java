package dev.holdfast.cdi;

import io.smallrye.config.PropertiesConfigSource;
import io.smallrye.config.SmallRyeConfig;
import io.smallrye.config.SmallRyeConfigBuilder;
import java.util.HashMap;
import java.util.Map;
import org.eclipse.microprofile.config.spi.ConfigProviderResolver;

/**
 * Gives the test thread's class loader a MicroProfile Config with exactly these properties (plus
 * system properties and environment, as in production), and takes it away again.
 */
final class TestConfig implements AutoCloseable {
  private final SmallRyeConfig config;

  private TestConfig(Map<String, String> properties) {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    ConfigProviderResolver resolver = ConfigProviderResolver.instance();
    try {
      resolver.releaseConfig(resolver.getConfig(loader));
    } catch (RuntimeException e) {
      // nothing registered yet
    }
    this.config = new SmallRyeConfigBuilder()
        .addDefaultSources()
        .withSources(new PropertiesConfigSource(new HashMap<>(properties), "holdfast-test", 500))
        .build();
    resolver.registerConfig(config, loader);
  }

  /** Installs a config of {@code key, value, key, value...}. */
  static TestConfig of(Map<String, String> base, String... more) {
    Map<String, String> all = new HashMap<>(base);
    for (int i = 0; i < more.length; i += 2) {
      all.put(more[i], more[i + 1]);
    }
    return new TestConfig(all);
  }

  @Override
  public void close() {
    ConfigProviderResolver.instance().releaseConfig(config);
  }
}
