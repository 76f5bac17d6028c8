package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.spi.DeploymentException;
import org.eclipse.microprofile.config.Config;
import org.eclipse.microprofile.config.ConfigProvider;

/**
 * Reads Holdfast's keys from MicroProfile Config: the client keys of {@link LockClientConfig}
 * and the {@code @Locked} overrides. Keys are looked up one by one, so environment variables
 * ({@code HOLDFAST_REDIS_ADDRESS}) work as MicroProfile Config maps them.
 */
final class HoldfastConfig {

  /** {@code holdfast.locked.<member>} or {@code holdfast."<fqcn>[/<method>]".locked.<member>}. */
  private static final Pattern OVERRIDE =
      Pattern.compile("holdfast\\.(?:\"([^\"]+)\"\\.)?locked\\.(.+)");

  /** Whether the {@code holdfast} readiness check is registered (with MicroProfile Health). */
  static final String HEALTH_ENABLED = "holdfast.health.enabled";
  /** Whether lock meters go to the container's Micrometer registry (when it has one). */
  static final String METRICS_ENABLED = "holdfast.metrics.enabled";
  private static final List<String> SWITCHES = List.of(HEALTH_ENABLED, METRICS_ENABLED);

  private HoldfastConfig() {
  }

  /**
   * The container's {@code Config} bean when it has one (Quarkus, WildFly), else the
   * {@link ConfigProvider}'s: asking the container avoids resolving a config factory through a
   * class loader that is not the application's.
   */
  static Config current(Instance<Config> configBean) {
    return configBean.isResolvable() ? configBean.get() : ConfigProvider.getConfig();
  }

  /**
   * The client keys that are set, for the {@code LockClient} producer. Only known keys: the
   * others were reported (as errors or warnings) when the deployment was validated.
   */
  static Map<String, String> clientProperties(Config config) {
    Map<String, String> properties = new HashMap<>();
    for (String key : LockClientConfig.KEYS) {
      config.getOptionalValue(key, String.class).ifPresent(v -> properties.put(key, v));
    }
    return properties;
  }

  /**
   * Every {@code holdfast.*} key except the {@code @Locked} overrides, for
   * {@link LockClientConfig#fromProperties}, which decides about unknown ones: an error in the
   * namespaces Holdfast owns or close to one of its keys, else a logged warning.
   */
  private static Map<String, String> validatedProperties(Config config) {
    Map<String, String> properties = clientProperties(config);
    for (String key : config.getPropertyNames()) {
      if (key.startsWith("holdfast.") && !properties.containsKey(key)
          && !OVERRIDE.matcher(key).matches()) {
        config.getOptionalValue(key, String.class).ifPresent(v -> properties.put(key, v));
      }
    }
    return properties;
  }

  /**
   * A switch's value: {@code true} unless it is set to {@code false} (any case). Lenient, for
   * decisions taken before validation; {@link #problems} reports a value that is neither.
   */
  static boolean enabled(Config config, String key) {
    return lookup(config).apply(key).map(v -> !v.trim().equalsIgnoreCase("false")).orElse(true);
  }

  static Function<String, Optional<String>> lookup(Config config) {
    return key -> config.getOptionalValue(key, String.class).filter(v -> !v.isBlank());
  }

  /**
   * Every configuration mistake we can find without connecting: invalid or unknown client keys,
   * overrides whose member is unknown, and override values that are invalid — except those of
   * the keys in {@code checkedOverrides}, which preparing the methods has checked (and reported
   * naming the method).
   */
  static List<String> problems(Config config, Set<String> checkedOverrides) {
    List<String> problems = new ArrayList<>();
    try {
      LockClientConfig.fromProperties(validatedProperties(config));
    } catch (IllegalArgumentException e) {
      problems.add("Invalid Holdfast configuration: " + e.getMessage());
    }
    for (String key : SWITCHES) {
      lookup(config).apply(key).map(String::trim)
          .filter(v -> !v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false"))
          .ifPresent(v -> problems.add("Invalid Holdfast configuration: " + key
              + " must be true or false, but was '" + v + "'"));
    }
    for (String key : config.getPropertyNames()) {
      Matcher m = OVERRIDE.matcher(key);
      if (!m.matches()) {
        continue;
      }
      String member = m.group(2);
      String members = "." + String.join(", .", LockedDefinitions.CONFIGURABLE);
      if (member.equals("fenced")) {
        problems.add("Configuration key '" + key + "' cannot override @Locked.fenced: whether a "
            + "method receives a fencing token is part of its code; overrides end in " + members);
        continue;
      }
      if (!LockedDefinitions.CONFIGURABLE.contains(member)) {
        problems.add("Unknown configuration key '" + key + "': @Locked overrides end in "
            + members);
        continue;
      }
      Optional<String> value = lookup(config).apply(key);
      if (value.isPresent() && !checkedOverrides.contains(key)) {
        try {
          LockedDefinitions.checkOverride(key, member, value.get());
        } catch (IllegalArgumentException e) {
          problems.add("Invalid Holdfast configuration: " + e.getMessage());
        }
      }
    }
    return problems;
  }

  /**
   * Creates the application's {@link LockClient} bean now, when
   * {@value LockClientConfig#CONNECT_AT_STARTUP} is true (the default), so that an unreachable
   * Redis or a wrong password stops the start instead of surfacing at the first locked call. Call
   * it only once the configuration is known to be valid.
   *
   * @throws DeploymentException with the client's message: the mode, the address (never a
   *     password), the cause and the keys to check
   */
  static void connectAtStartup(Config config, Instance<LockClient> client) {
    if (!LockClientConfig.fromProperties(clientProperties(config)).connectAtStartup()) {
      return;
    }
    try {
      client.get().getClientId(); // a @Singleton: this creates it
    } catch (RuntimeException e) {
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof LockException lockException) {
          throw new DeploymentException(lockException.getMessage(), lockException);
        }
      }
      throw e;
    }
  }

  /** One message for a start that fails with {@code problems} (each names Holdfast already). */
  static String report(List<String> problems) {
    return problems.size() == 1 ? problems.get(0)
        : "Holdfast found " + problems.size() + " problems:\n  - "
            + String.join("\n  - ", problems);
  }
}
