package dev.holdfast.engine;

/**
 * The Redis names of one lock: its key, its unlock channel, its request markers and its fencing
 * token key, all in the key's hash slot, and its {@link LockKind}. Channel naming is Redisson's,
 * so both libraries wake each other's waiters. Keys (lock and markers) start with the key prefix;
 * the channel cannot, to stay Redisson's.
 *
 * @param slotted the key with a hash tag: the key itself if it has one, else {@code {key}}
 */
record LockNames(String name, String key, String channel, String markerPrefix, String tokenKey,
    String slotted, LockKind kind) {

  private static final String MARKER_PREFIX = "holdfast_unlock_marker:";
  private static final String TOKEN_PREFIX = "holdfast_fence:";

  /** The names of exclusive lock {@code name} under {@code keyPrefix}. */
  static LockNames of(String keyPrefix, String name) {
    return of(keyPrefix, name, LockKind.EXCLUSIVE);
  }

  /**
   * Derives the names for lock {@code name} of {@code kind} under {@code keyPrefix}.
   *
   * @throws IllegalArgumentException if the name is empty or has a malformed hash tag
   */
  static LockNames of(String keyPrefix, String name, LockKind kind) {
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
    return new LockNames(name, key, kind.channelPrefix() + slotted,
        keyPrefix + MARKER_PREFIX + slotted + ":", keyPrefix + TOKEN_PREFIX + slotted, slotted,
        kind);
  }

  /** The key that identifies a thread's hold of this lock in the client's hold registry. */
  String holdKey() {
    return key + kind.idSuffix();
  }

  private static boolean hasHashTag(String key) {
    int open = key.indexOf('{');
    int close = key.indexOf('}', open + 1);
    return close > open + 1;
  }
}
