package dev.holdfast.testing;

import java.lang.System.Logger.Level;
import java.util.Locale;

/**
 * Where the harness runs {@code redis-server}: every topology and fault works the same on each.
 *
 * <p>{@link #selected()} is what {@link RedisServer#start(String...)}, {@link RedisExtension} and
 * the setups use unless given a backend. It is read once per JVM from the system property
 * {@value #PROPERTY}, else the environment variable {@value #ENV}: {@code testcontainers},
 * {@code local}, {@code embedded}, or {@code auto} (the default) — Testcontainers if a Docker
 * engine is available, else {@code redis-server} on the {@code PATH}, else the embedded binary.
 */
public enum RedisBackend {

  /**
   * A container per server (Testcontainers) from {@link #image()}, with host networking on
   * 127.0.0.1 so that addresses, ports and cluster/sentinel announcements are the same as for
   * processes; kill is {@code docker rm -f}, stop is {@code docker stop}, pause is
   * {@code docker pause}. The server's temp dir is bind-mounted at the same path (AOF,
   * {@code nodes.conf} and the log survive restarts), and the container runs as the dir's owner.
   */
  TESTCONTAINERS,

  /**
   * A {@code redis-server} process: the one named by {@code -Dholdfast.redis-server=<path>},
   * else the one on the {@code PATH}, else (with a log message) the embedded binary.
   */
  LOCAL,

  /** A process of the {@code redis-server} binary bundled in {@code org.signal:embedded-redis}. */
  EMBEDDED;

  /** System property selecting the backend. */
  public static final String PROPERTY = "holdfast.testing.backend";
  /** Environment variable selecting the backend when {@value #PROPERTY} is not set. */
  public static final String ENV = "HOLDFAST_TESTING_BACKEND";
  /** System property naming the image of {@link #TESTCONTAINERS}. */
  public static final String IMAGE_PROPERTY = "holdfast.testing.image";
  /** Environment variable naming the image when {@value #IMAGE_PROPERTY} is not set. */
  public static final String IMAGE_ENV = "HOLDFAST_TESTING_IMAGE";
  /**
   * The default image. Any image with {@code /usr/local/bin/redis-server} works (the official
   * {@code redis} images do; their entrypoint script is bypassed).
   */
  public static final String DEFAULT_IMAGE = "redis:7.0.15";

  private static final System.Logger LOG = System.getLogger(RedisBackend.class.getName());

  /**
   * The backend chosen for this JVM (see the class comment); resolved on first call.
   *
   * @throws IllegalArgumentException if the property or variable has an unknown value
   */
  public static RedisBackend selected() {
    return Selected.BACKEND;
  }

  /**
   * Whether Testcontainers finds a Docker engine (cached by Testcontainers).
   */
  public static boolean isDockerAvailable() {
    return ContainerRedisLauncher.isDockerAvailable();
  }

  /** The image of {@link #TESTCONTAINERS}: {@value #IMAGE_PROPERTY}, {@value #IMAGE_ENV}, else {@value #DEFAULT_IMAGE}. */
  public static String image() {
    return setting(IMAGE_PROPERTY, IMAGE_ENV, DEFAULT_IMAGE);
  }

  /**
   * Parses a backend name as accepted by {@value #PROPERTY}, resolving {@code auto}.
   *
   * @throws IllegalArgumentException for an unknown name
   */
  public static RedisBackend parse(String name) {
    String value = name.trim().toLowerCase(Locale.ROOT);
    return switch (value) {
      case "auto", "" -> auto();
      case "testcontainers", "docker" -> TESTCONTAINERS;
      case "local" -> LOCAL;
      case "embedded" -> EMBEDDED;
      default -> throw new IllegalArgumentException("Invalid " + PROPERTY + ": '" + name
          + "' (expected auto, testcontainers, local or embedded)");
    };
  }

  /** How servers of this backend are started. */
  RedisLauncher launcher() {
    return switch (this) {
      case TESTCONTAINERS -> new ContainerRedisLauncher(image());
      case LOCAL -> new RedisLauncher.Local(RedisBinary.path(), LOCAL);
      case EMBEDDED -> new RedisLauncher.Local(RedisBinary.embedded(), EMBEDDED);
    };
  }

  private static RedisBackend auto() {
    if (isDockerAvailable()) {
      return TESTCONTAINERS;
    }
    return RedisBinary.onPath().isPresent() ? LOCAL : EMBEDDED;
  }

  private static String setting(String property, String env, String fallback) {
    String value = System.getProperty(property);
    if (value == null || value.isBlank()) {
      value = System.getenv(env);
    }
    return value == null || value.isBlank() ? fallback : value.trim();
  }

  /** Lazy holder: the Docker probe runs once, on first use. */
  private static final class Selected {
    static final RedisBackend BACKEND = resolve();

    private static RedisBackend resolve() {
      String configured = setting(PROPERTY, ENV, "auto");
      RedisBackend backend = parse(configured);
      LOG.log(Level.INFO, "Redis backend: {0} ({1}={2}{3})", backend, PROPERTY, configured,
          backend == TESTCONTAINERS ? ", image " + image() : "");
      return backend;
    }
  }
}
