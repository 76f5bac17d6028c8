package dev.holdfast.engine;

import dev.holdfast.LockClientConfig;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses and checks configuration values. Every message names the key and the offending value —
 * except passwords, which are never repeated. Internal: use {@link LockClientConfig}.
 */
public final class ConfigValues {

  private static final Pattern SIMPLE_DURATION =
      Pattern.compile("(\\d+)\\s*(ms|s|m|h|d)", Pattern.CASE_INSENSITIVE);

  private ConfigValues() {
  }

  /** Copies the {@code holdfast.*} client keys of {@code properties} onto {@code builder}. */
  public static LockClientConfig.Builder read(Map<String, String> properties,
      LockClientConfig.Builder builder) {
    String mode = value(properties, LockClientConfig.MODE);
    if (mode != null) {
      builder.mode(mode(mode));
    }
    String address = value(properties, LockClientConfig.ADDRESS);
    if (address != null) {
      builder.address(address);
    }
    String nodes = value(properties, LockClientConfig.NODES);
    if (nodes != null) {
      builder.nodes(Arrays.stream(nodes.split(",")).map(String::trim)
          .filter(s -> !s.isEmpty()).toList());
    }
    String master = value(properties, LockClientConfig.SENTINEL_MASTER);
    if (master != null) {
      builder.sentinelMaster(master);
    }
    String username = value(properties, LockClientConfig.USERNAME);
    if (username != null) {
      builder.username(username);
    }
    // A password may legitimately contain surrounding spaces: take it verbatim.
    String password = properties.get(LockClientConfig.PASSWORD);
    if (password != null && !password.isEmpty()) {
      builder.password(password);
    }
    String database = value(properties, LockClientConfig.DATABASE);
    if (database != null) {
      builder.database(integer(LockClientConfig.DATABASE, database));
    }
    String timeout = value(properties, LockClientConfig.TIMEOUT);
    if (timeout != null) {
      builder.timeout(duration(LockClientConfig.TIMEOUT, timeout));
    }
    String pool = value(properties, LockClientConfig.POOL_MAX_SIZE);
    if (pool != null) {
      builder.poolMaxSize(integer(LockClientConfig.POOL_MAX_SIZE, pool));
    }
    String watchdog = value(properties, LockClientConfig.WATCHDOG_TIMEOUT);
    if (watchdog != null) {
      builder.watchdogTimeout(duration(LockClientConfig.WATCHDOG_TIMEOUT, watchdog));
    }
    String sync = value(properties, LockClientConfig.SYNC_REPLICAS);
    if (sync != null) {
      builder.syncReplicas(syncReplicas(sync));
    }
    String fairWaiter = value(properties, LockClientConfig.FAIR_WAITER_TIMEOUT);
    if (fairWaiter != null) {
      builder.fairWaiterTimeout(duration(LockClientConfig.FAIR_WAITER_TIMEOUT, fairWaiter));
    }
    String syncTimeout = value(properties, LockClientConfig.SYNC_TIMEOUT);
    if (syncTimeout != null) {
      builder.syncTimeout(duration(LockClientConfig.SYNC_TIMEOUT, syncTimeout));
    }
    String connect = value(properties, LockClientConfig.CONNECT_AT_STARTUP);
    if (connect != null) {
      builder.connectAtStartup(bool(LockClientConfig.CONNECT_AT_STARTUP, connect));
    }
    // A prefix is taken verbatim: "app: " is a legal, if odd, prefix.
    String prefix = properties.get(LockClientConfig.KEY_PREFIX);
    if (prefix != null) {
      builder.keyPrefix(prefix);
    }
    return builder;
  }

  /**
   * Parses {@code 500ms}, {@code 30s}, {@code 5m}, {@code 1h}, {@code 2d} or ISO-8601
   * ({@code PT30S}). A bare number is rejected: its unit would be a guess.
   *
   * @throws IllegalArgumentException naming {@code key} and {@code value}
   */
  public static Duration duration(String key, String value) {
    String text = value.trim();
    Matcher m = SIMPLE_DURATION.matcher(text);
    try {
      if (m.matches()) {
        long amount = Long.parseLong(m.group(1));
        return switch (m.group(2).toLowerCase(Locale.ROOT)) {
          case "ms" -> Duration.ofMillis(amount);
          case "s" -> Duration.ofSeconds(amount);
          case "m" -> Duration.ofMinutes(amount);
          case "h" -> Duration.ofHours(amount);
          default -> Duration.ofDays(amount);
        };
      }
      if (text.regionMatches(true, 0, "P", 0, 1)) {
        return Duration.parse(text);
      }
    } catch (NumberFormatException | DateTimeParseException | ArithmeticException e) {
      // fall through to the common message
    }
    throw new IllegalArgumentException(key + "='" + value + "' is not a duration: write e.g. "
        + "500ms, 30s, 5m, 1h or ISO-8601 PT30S (a bare number has no unit)");
  }

  public static Duration positive(String key, Duration d) {
    if (d == null || d.isZero() || d.isNegative()) {
      throw new IllegalArgumentException(key + " must be a positive duration, but was " + d);
    }
    return d;
  }

  public static String nonBlank(String key, String value) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(key + " must not be blank");
    }
    return value;
  }

  /**
   * Accepts {@code redis://host:port}, {@code rediss://host:port} (optionally with user info and
   * a database path) or a bare {@code host:port}, which means {@code redis://}.
   */
  public static URI redisUri(String key, String value) {
    nonBlank(key, value);
    String text = value.trim();
    String shown = redact(text);
    if (!text.contains("://")) {
      text = "redis://" + text;
    }
    URI uri;
    try {
      uri = new URI(text);
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException(key + "='" + shown + "' is not a valid Redis URI", e);
    }
    String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
    if (!scheme.equals("redis") && !scheme.equals("rediss")) {
      throw new IllegalArgumentException(
          key + "='" + shown + "' must start with redis:// or rediss://");
    }
    if (uri.getHost() == null || uri.getPort() < 0) {
      throw new IllegalArgumentException(
          key + "='" + shown + "' must name a host and a port, e.g. redis://localhost:6379");
    }
    databaseFromPath(key, uri);
    return uri;
  }

  /** A URI safe to print: the password in its user info is replaced by {@code ***}. */
  public static String redact(URI uri) {
    return redact(uri.toString());
  }

  static String redact(String uri) {
    return uri.replaceFirst("//([^:/@]*):[^@/]*@", "//$1:***@");
  }

  /** User and password from a URI's user info; either may be null. */
  public record UserInfo(String username, String password) {
    @Override
    public String toString() {
      return "UserInfo[username=" + username + ", password=" + (password == null ? null : "***") + "]";
    }
  }

  public static UserInfo userInfo(URI uri) {
    String info = uri.getRawUserInfo();
    if (info == null || info.isEmpty()) {
      return new UserInfo(null, null);
    }
    int colon = info.indexOf(':');
    if (colon < 0) {
      // redis://secret@host is the password-only form (Redis 'requirepass'), as in Jedis and Redisson
      return new UserInfo(null, decode(info));
    }
    String user = decode(info.substring(0, colon));
    return new UserInfo(user.isEmpty() ? null : user, decode(info.substring(colon + 1)));
  }

  public static Integer databaseFromPath(URI uri) {
    return databaseFromPath(LockClientConfig.ADDRESS, uri);
  }

  private static Integer databaseFromPath(String key, URI uri) {
    String path = uri.getPath();
    if (path == null || path.isEmpty() || path.equals("/")) {
      return null;
    }
    try {
      int db = Integer.parseInt(path.substring(1));
      if (db >= 0) {
        return db;
      }
    } catch (NumberFormatException e) {
      // fall through
    }
    throw new IllegalArgumentException(key + "='" + redact(uri.toString())
        + "' has path '" + path + "': the only path allowed is a database index, e.g. /2");
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }

  private static LockClientConfig.Mode mode(String value) {
    try {
      return LockClientConfig.Mode.valueOf(value.toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(LockClientConfig.MODE + "='" + value
          + "' is not a mode: use standalone, sentinel or cluster");
    }
  }

  private static int integer(String key, String value) {
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(key + "='" + value + "' is not a whole number");
    }
  }

  private static boolean bool(String key, String value) {
    if (value.equalsIgnoreCase("true")) {
      return true;
    }
    if (value.equalsIgnoreCase("false")) {
      return false;
    }
    throw new IllegalArgumentException(key + "='" + value + "' must be true or false");
  }

  private static int syncReplicas(String text) {
    String v = text.toLowerCase(Locale.ROOT);
    if (v.equals("auto")) {
      return LockClientConfig.SYNC_REPLICAS_AUTO;
    }
    if (v.equals("none")) {
      return LockClientConfig.SYNC_REPLICAS_NONE;
    }
    try {
      int n = Integer.parseInt(v);
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(LockClientConfig.SYNC_REPLICAS
        + " must be 'auto', 'none' or a positive number of replicas, but was '" + text + "'");
  }

  private static String value(Map<String, String> properties, String key) {
    String v = properties.get(key);
    if (v == null || v.isBlank()) {
      return null;
    }
    return v.trim();
  }
}
