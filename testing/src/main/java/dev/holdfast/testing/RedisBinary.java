package dev.holdfast.testing;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.System.Logger.Level;
import java.net.JarURLConnection;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.Locale;
import java.util.Optional;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Locates the {@code redis-server} executable used for every test server (sentinels included:
 * they run the same binary with {@code --sentinel}).
 *
 * <p>Resolution, once per JVM:
 * <ol>
 *   <li>system property {@value #OVERRIDE_PROPERTY}: a path to an executable, or {@code embedded}
 *       to force step 3 (useful to test the fallback on a machine that has Redis installed);</li>
 *   <li>{@code redis-server} on {@code PATH};</li>
 *   <li>the binary bundled in {@code org.signal:embedded-redis} (resources named
 *       {@code redis-server-<version>-<os>-<arch>} at the jar root, for linux amd64/arm64/386 and
 *       darwin amd64/arm64), copied to an executable temp file deleted on exit.</li>
 * </ol>
 */
public final class RedisBinary {

  static final String OVERRIDE_PROPERTY = "holdfast.redis-server";

  private static final System.Logger LOG = System.getLogger(RedisBinary.class.getName());

  /** A class that lives in the embedded-redis jar; used to find that jar on the class path. */
  private static final String EMBEDDED_MARKER_CLASS = "redis/embedded/RedisServer.class";

  /** The resource name in embedded-redis 0.9.1, used when the jar cannot be listed. */
  private static final String EMBEDDED_KNOWN_VERSION = "7.0.15";

  private RedisBinary() {
  }

  /**
   * The executable to run.
   *
   * @throws IllegalStateException if none is found, or the override does not name an executable
   */
  static Path path() {
    return Holder.PATH;
  }

  /**
   * The binary bundled in {@code org.signal:embedded-redis}, extracted once per JVM.
   *
   * @throws IllegalStateException if there is none for this platform
   */
  static Path embedded() {
    return EmbeddedHolder.PATH;
  }

  /** {@code redis-server} on {@code PATH}, or the {@value #OVERRIDE_PROPERTY} path, if any. */
  static Optional<Path> onPath() {
    String override = System.getProperty(OVERRIDE_PROPERTY, "").trim();
    if (!override.isEmpty() && !override.equals("embedded")) {
      return Optional.of(Path.of(override));
    }
    return findOnPath("redis-server");
  }

  private static final class EmbeddedHolder {
    static final Path PATH = extractEmbedded("embedded backend");
  }

  /** Lazy holder: resolution (and possibly extraction) happens on first use, exactly once. */
  private static final class Holder {
    static final Path PATH = resolve();
  }

  private static Path resolve() {
    String override = System.getProperty(OVERRIDE_PROPERTY, "").trim();
    if (override.equals("embedded")) {
      return extractEmbedded("-D" + OVERRIDE_PROPERTY + "=embedded");
    }
    if (!override.isEmpty()) {
      Path path = Path.of(override);
      if (!Files.isRegularFile(path) || !Files.isExecutable(path)) {
        throw new IllegalStateException("-D" + OVERRIDE_PROPERTY + "=" + override
            + " is not an executable file");
      }
      LOG.log(Level.INFO, "Using redis-server {0} (from -D{1})", path, OVERRIDE_PROPERTY);
      return path;
    }
    Optional<Path> onPath = findOnPath("redis-server");
    if (onPath.isPresent()) {
      LOG.log(Level.INFO, "Using redis-server {0} (found on PATH)", onPath.get());
      return onPath.get();
    }
    return extractEmbedded("no redis-server on PATH");
  }

  /**
   * The executable file named {@code executable} in the first {@code PATH} directory that has
   * one, as a shell would find it (e.g. {@code openssl} for the TLS test).
   */
  public static Optional<Path> findOnPath(String executable) {
    String pathVariable = System.getenv("PATH");
    if (pathVariable == null) {
      return Optional.empty();
    }
    for (String directory : pathVariable.split(Pattern.quote(File.pathSeparator))) {
      if (directory.isEmpty()) {
        continue;
      }
      Path candidate = Path.of(directory, executable);
      if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
        return Optional.of(candidate.toAbsolutePath());
      }
    }
    return Optional.empty();
  }

  /**
   * Copies the executable class-path resource {@code resource} (e.g. a redis-server of another
   * version shipped by a test dependency) to a temp file deleted on exit.
   *
   * @return the executable, or empty if no such resource is on the class path
   */
  public static Optional<Path> extract(String resource) {
    if (RedisBinary.class.getClassLoader().getResource(resource) == null) {
      return Optional.empty();
    }
    return Optional.of(extractEmbedded(resource, "requested"));
  }

  private static Path extractEmbedded(String reason) {
    return extractEmbedded(findEmbeddedResource(platformSuffix()), reason);
  }

  private static Path extractEmbedded(String resource, String reason) {
    try (InputStream in = RedisBinary.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException(reason + ", and no resource " + resource
            + " on the class path (is org.signal:embedded-redis a test dependency?)");
      }
      Path target = Files.createTempFile("holdfast-" + resource + "-", "");
      target.toFile().deleteOnExit();
      Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
      if (!target.toFile().setExecutable(true, true)) {
        throw new IllegalStateException("Cannot make " + target + " executable");
      }
      LOG.log(Level.INFO,
          "Using redis-server {0} ({1}; extracted from embedded-redis resource {2})",
          target, reason, resource);
      return target;
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot extract " + resource, e);
    }
  }

  /**
   * Lists the embedded-redis jar for {@code redis-server-<version>-<platform>} and picks the
   * newest version, so a newer embedded-redis release works without a code change; falls back
   * to the name known from 0.9.1.
   */
  private static String findEmbeddedResource(String platform) {
    String fallback = "redis-server-" + EMBEDDED_KNOWN_VERSION + "-" + platform;
    URL marker = RedisBinary.class.getClassLoader().getResource(EMBEDDED_MARKER_CLASS);
    if (marker == null || !marker.getProtocol().equals("jar")) {
      return fallback;
    }
    Pattern name = Pattern.compile("redis-server-(\\d+(?:\\.\\d+)*)-" + Pattern.quote(platform));
    try {
      JarURLConnection connection = (JarURLConnection) marker.openConnection();
      connection.setUseCaches(false);
      try (JarFile jar = connection.getJarFile()) {
        return jar.stream()
            .map(entry -> name.matcher(entry.getName()))
            .filter(Matcher::matches)
            .max(Comparator.comparing(m -> versionKey(m.group(1))))
            .map(m -> m.group(0))
            .orElse(fallback);
      }
    } catch (IOException | ClassCastException e) {
      return fallback;
    }
  }

  /** "7.0.15" → "00007.00000.00015", so plain string order is version order. */
  private static String versionKey(String version) {
    StringBuilder key = new StringBuilder();
    for (String part : version.split("\\.")) {
      key.append(String.format(Locale.ROOT, "%05d.", Integer.parseInt(part)));
    }
    return key.toString();
  }

  private static String platformSuffix() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    String osPart;
    if (os.contains("linux")) {
      osPart = "linux";
    } else if (os.contains("mac") || os.contains("darwin")) {
      osPart = "darwin";
    } else {
      throw new IllegalStateException(
          "No redis-server on PATH and no embedded binary for OS " + os);
    }
    String archPart = switch (arch) {
      case "amd64", "x86_64" -> "amd64";
      case "aarch64", "arm64" -> "arm64";
      case "x86", "i386", "i686" -> "386";
      default -> throw new IllegalStateException(
          "No redis-server on PATH and no embedded binary for architecture " + arch);
    };
    return osPart + "-" + archPart;
  }
}
