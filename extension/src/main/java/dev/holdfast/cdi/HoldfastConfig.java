package dev.holdfast.cdi;

import dev.holdfast.LockClientConfig;
import dev.holdfast.engine.ConfigValues;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jakarta.enterprise.inject.Instance;
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

  /** The {@code holdfast.*} client keys, for {@code LockClient.create(Map)}. */
  static Map<String, String> clientProperties(Config config) {
    Map<String, String> properties = new HashMap<>();
    for (String key : LockClientConfig.KEYS) {
      config.getOptionalValue(key, String.class).ifPresent(v -> properties.put(key, v));
    }
    // Unknown keys in our namespace are passed on so that the client reports them as typos.
    for (String key : config.getPropertyNames()) {
      if (key.startsWith("holdfast.") && !properties.containsKey(key)
          && !OVERRIDE.matcher(key).matches()) {
        config.getOptionalValue(key, String.class).ifPresent(v -> properties.put(key, v));
      }
    }
    return properties;
  }

  static Function<String, Optional<String>> lookup(Config config) {
    return key -> config.getOptionalValue(key, String.class).filter(v -> !v.isBlank());
  }

  /**
   * Every configuration mistake we can find without connecting: invalid client keys and
   * overrides whose member is unknown or whose duration does not parse.
   */
  static List<String> problems(Config config) {
    List<String> problems = new ArrayList<>();
    try {
      LockClientConfig.fromProperties(clientProperties(config));
    } catch (IllegalArgumentException e) {
      problems.add("Invalid Holdfast configuration: " + e.getMessage());
    }
    for (String key : config.getPropertyNames()) {
      Matcher m = OVERRIDE.matcher(key);
      if (!m.matches()) {
        continue;
      }
      String member = m.group(2);
      if (!member.equals(LockedDefinitions.WAIT_TIME)
          && !member.equals(LockedDefinitions.LEASE_TIME)) {
        problems.add("Unknown configuration key '" + key + "': @Locked overrides end in ."
            + LockedDefinitions.WAIT_TIME + " or ." + LockedDefinitions.LEASE_TIME);
        continue;
      }
      Optional<String> value = config.getOptionalValue(key, String.class);
      if (value.isPresent() && !value.get().isBlank()) {
        try {
          ConfigValues.duration(key, value.get());
        } catch (IllegalArgumentException e) {
          problems.add("Invalid Holdfast configuration: " + e.getMessage());
        }
      }
    }
    return problems;
  }
}
