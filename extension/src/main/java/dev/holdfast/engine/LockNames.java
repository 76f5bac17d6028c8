package dev.holdfast.engine;

/**
 * The Redis names of one lock: its key, its unlock channel, its request markers and its fencing
 * token key, all in the key's hash slot. Channel naming is Redisson's, so both libraries wake each other's waiters.
 * Keys (lock and markers) start with the key prefix; the channel cannot, to stay Redisson's.
 */
record LockNames(String name, String key, String channel, String markerPrefix, String tokenKey) {

  private static final String CHANNEL_PREFIX = "redisson_lock__channel:";
  private static final String MARKER_PREFIX = "holdfast_unlock_marker:";
  private static final String TOKEN_PREFIX = "holdfast_fence:";

  /**
   * Derives the names for lock {@code name} under {@code keyPrefix}.
   *
   * @throws IllegalArgumentException if the name is empty or has a malformed hash tag
   */
  static LockNames of(String keyPrefix, String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("Lock name must not be null or empty");
    }
    String key = keyPrefix + name;
    boolean tagged = key.indexOf('{') >= 0;
    if (tagged && !hasHashTag(key)) {
      // Redis would hash the whole key but the channel differently: they would land in
      // different cluster slots and the unlock script could not publish.
      throw new IllegalArgumentException("Lock key '" + key + "' contains '{' but no hash tag "
          + "('{' followed by at least one character and '}'); use e.g. 'orders:{42}' or no braces");
    }
    // A tagged key already pins its slot; otherwise the whole key becomes the tag.
    String slotted = tagged ? key : "{" + key + "}";
    // Markers live under the key prefix, so an ACL user limited to '~<prefix>*' may write them.
    return new LockNames(name, key, CHANNEL_PREFIX + slotted,
        keyPrefix + MARKER_PREFIX + slotted + ":", keyPrefix + TOKEN_PREFIX + slotted);
  }

  private static boolean hasHashTag(String key) {
    int open = key.indexOf('{');
    int close = key.indexOf('}', open + 1);
    return close > open + 1;
  }
}
