package dev.holdfast;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * Decides what happens to each {@code holdfast.*} key given to {@link LockClientConfig}.
 *
 * <p>Holdfast does not own every key that starts with {@code holdfast.}: builds pass
 * {@code -Dholdfast.version=…} (the usual Maven property for a dependency's version), and
 * MicroProfile Config exposes system properties. So an unknown key is an error only where it is
 * certainly a mistake, and a logged warning elsewhere (as Quarkus does for unrecognised keys):
 * <ul>
 *   <li>a known client key ({@link LockClientConfig#KEYS}) is read;</li>
 *   <li>a {@code @Locked} override ({@code holdfast.locked.*},
 *       {@code holdfast."<class>[/<method>]".locked.*}) or a container switch
 *       ({@link #CONTAINER_KEYS}) is left to the CDI layer, which checks it;</li>
 *   <li>any other key under {@code holdfast.redis.} is an error;</li>
 *   <li>any other key within {@value #MAX_TYPO_DISTANCE} edits of one of Holdfast's keys (e.g.
 *       {@code holdfast.watchdog-timout}) is an error: a typo would otherwise silently leave the
 *       default in force;</li>
 *   <li>any other {@code holdfast.} key is ignored with a warning naming the key and Holdfast's
 *       closest key.</li>
 * </ul>
 * Keys that do not start with {@code holdfast.} are ignored.
 */
final class ConfigKeys {
  private static final System.Logger LOG = System.getLogger(LockClientConfig.class.getName());

  static final String PREFIX = "holdfast.";
  static final int MAX_TYPO_DISTANCE = 2;

  /** The CDI layer's {@code @Locked} override keys. */
  private static final Pattern OVERRIDE = Pattern.compile("holdfast\\.(?:\"[^\"]+\"\\.)?locked\\..+");

  /** The CDI layer's switches: the readiness check and the container's meter registry. */
  static final List<String> CONTAINER_KEYS =
      List.of("holdfast.health.enabled", "holdfast.metrics.enabled");

  /** Every key Holdfast defines, for suggestions: the client's and the CDI layer's. */
  private static final List<String> CANDIDATES = concat(LockClientConfig.KEYS,
      concat(CONTAINER_KEYS,
          List.of("holdfast.locked.wait-time", "holdfast.locked.lease-time",
              "holdfast.locked.mode", "holdfast.locked.skip-if-busy",
              "holdfast.locked.hold-at-least", "holdfast.locked.on-loss",
              "holdfast.locked.verify-before-commit")));

  private ConfigKeys() {
  }

  /**
   * The entries of {@code properties} that are client keys; logs a warning for each foreign
   * {@code holdfast.*} key.
   *
   * @throws IllegalArgumentException naming every unknown key in Holdfast's namespaces, with the
   *     closest known key
   */
  static Map<String, String> clientKeys(Map<String, String> properties) {
    Map<String, String> client = new TreeMap<>();
    List<String> errors = new ArrayList<>();
    for (Map.Entry<String, String> e : new TreeMap<>(properties).entrySet()) {
      String key = e.getKey();
      if (LockClientConfig.KEYS.contains(key)) {
        client.put(key, e.getValue());
      } else if (key.startsWith(PREFIX) && !OVERRIDE.matcher(key).matches()
          && !CONTAINER_KEYS.contains(key)) {
        String closest = closest(key);
        if (key.startsWith(PREFIX + "redis.") || distance(key, closest) <= MAX_TYPO_DISTANCE) {
          errors.add("Unknown configuration key '" + key + "': did you mean '" + closest + "'?");
        } else {
          LOG.log(Level.WARNING, "Unrecognized configuration key '" + key + "' was provided; "
              + "Holdfast ignores it (its closest key is '" + closest + "'). Holdfast reads "
              + "holdfast.redis.*, holdfast.watchdog-timeout, holdfast.key-prefix, "
              + "holdfast.health.enabled, holdfast.metrics.enabled and the @Locked overrides "
              + "holdfast.[\"<class>[/<method>]\".]locked.*");
        }
      }
    }
    if (!errors.isEmpty()) {
      throw new IllegalArgumentException(String.join("; ", errors)
          + " Holdfast's client keys are " + LockClientConfig.KEYS);
    }
    return client;
  }

  /**
   * The key Holdfast defines that {@code key} was most likely meant to be: the fewest edits away
   * when that is a typo's distance, else one that ends in the same segment
   * ({@code holdfast.redis.cluster.nodes} → {@code holdfast.redis.nodes}), else the fewest edits
   * away.
   */
  static String closest(String key) {
    String best = CANDIDATES.get(0);
    int bestDistance = Integer.MAX_VALUE;
    for (String candidate : CANDIDATES) {
      int d = distance(key, candidate);
      if (d < bestDistance) {
        best = candidate;
        bestDistance = d;
      }
    }
    if (bestDistance > MAX_TYPO_DISTANCE) {
      String last = lastSegment(key);
      for (String candidate : CANDIDATES) {
        if (lastSegment(candidate).equals(last)) {
          return candidate;
        }
      }
    }
    return best;
  }

  private static String lastSegment(String key) {
    return key.substring(key.lastIndexOf('.') + 1);
  }

  /**
   * Edits (insertions, deletions, substitutions, transpositions of neighbours) that turn
   * {@code a} into {@code b}: the optimal string alignment distance.
   */
  static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  private static List<String> concat(List<String> a, List<String> b) {
    List<String> all = new ArrayList<>(a);
    all.addAll(b);
    return List.copyOf(all);
  }
}
