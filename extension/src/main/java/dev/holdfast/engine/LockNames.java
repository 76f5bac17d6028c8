package dev.holdfast.engine;

/**
 * The Redis names of one lock: its key, its unlock channel, its request markers and its fencing
 * token key, all in the key's hash slot, and its {@link LockKind}. Channel naming is Redisson's,
 * so both libraries wake each other's waiters. Keys (lock and markers) start with the key prefix;
 * the channel cannot, to stay Redisson's.
 *
 * <p><b>Two keys, one slotted form.</b> Redisson derives a lock's channel and its kind's keys
 * (the fair queue and scores, the readers' timeout keys) from the key's slotted form, which is
 * the same for an untagged key {@code K} and the key {@code {K}} (for example lock {@code a}
 * and lock {@code {a}} without a key prefix, or {@code a} under prefix {@code p:} and
 * {@code {p:a}} without one). Two such locks are still two locks:
 * <ul>
 *   <li>They share their unlock channel (Redisson's name, kept for interop); a channel is only
 *       a wake-up, and everything a client keeps for its waiters is per lock, not per channel
 *       (see {@link UnlockSubscriptions}).
 *   <li>A fair lock's queue and scores are built from {@link #derivedBase}, which is the
 *       slotted form for every key except a <em>braced</em> one — a key whose whole text is one
 *       hash tag, {@code {K}} with no other {@code '{'}, possibly followed by {@code '~'}s — whose
 *       base is the key plus one {@code '~'}. So lock {@code a} keeps Redisson's
 *       {@code redisson_lock_queue:{a}}, lock {@code {a}} uses {@code redisson_lock_queue:{a}~}
 *       and lock {@code {a}~} uses {@code {a}~~}: the base is one-to-one over all keys and in
 *       the key's slot, and two locks never queue in one list (a queue's head blocks every
 *       other waiter in it). The rule looks at the whole key only, so it holds across clients
 *       with different key prefixes. <b>Interop exception:</b> a fair lock whose key is braced
 *       keeps its own queue, so between Holdfast and Redisson on such a name exclusion holds
 *       (the hash is one) but fair order and the head's wake-up do not: each library's
 *       waiters then poll within their park bound.
 *   <li>A read-write lock keeps Redisson's timeout keys {@code <slotted>:<field>:rwlock_timeout:<n>}
 *       for every key, because both libraries read each other's readers' timeout keys to tell
 *       live readers from dead ones: moving them would let one library's writer take the lock
 *       from the other's live reader. What keeps {@code {a}}'s readers apart from {@code a}'s is
 *       the <em>field</em>: for a key that is exactly {@code {K}} a thread's field ends in
 *       {@link #fieldSuffix} ({@code '~'}), so the thread's timeout keys of the two locks
 *       differ. Fields are opaque to Redisson, which scans every field of the hash.
 *   <li>Request markers and the fencing token key stay on the slotted form: markers are named
 *       by globally unique request ids, and a token counter shared by two locks still gives
 *       each strictly increasing tokens (moving it would restart a braced lock's tokens).
 * </ul>
 *
 * @param slotted the key with a hash tag: the key itself if it has one, else {@code {key}}
 * @param derivedBase what a fair lock's queue and scores are named after: {@code slotted}, or
 *     for a braced key the key plus {@code '~'}
 * @param fieldSuffix appended to a thread's field in a read-write lock whose key is exactly
 *     {@code {K}} ({@code "~"}), else empty
 */
record LockNames(String name, String key, String channel, String markerPrefix, String tokenKey,
    String slotted, String derivedBase, String fieldSuffix, LockKind kind) {

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
    if (!tagged && key.indexOf('}') >= 0) {
      // {key} would hash only the text before the first '}': markers and derived keys would
      // land in another cluster slot than the key itself.
      throw new IllegalArgumentException("Lock key '" + key + "' contains '}' but no hash tag; "
          + "use e.g. 'orders:{42}' or no braces");
    }
    // A tagged key already pins its slot; otherwise the whole key becomes the tag.
    String slotted = tagged ? key : "{" + key + "}";
    // Markers live under the key prefix, so an ACL user limited to '~<prefix>*' may write them.
    return new LockNames(name, key, kind.channelPrefix() + slotted,
        keyPrefix + MARKER_PREFIX + slotted + ":", keyPrefix + TOKEN_PREFIX + slotted, slotted,
        braced(key) ? key + "~" : slotted,
        kind instanceof ReadWriteLockKind && braced(key) && !key.endsWith("~") ? "~" : "", kind);
  }

  /** The hash field in this lock of a thread whose plain field is {@code threadField}. */
  String field(String threadField) {
    return kind.field(fieldSuffix.isEmpty() ? threadField : threadField + fieldSuffix);
  }

  /** The key that identifies a thread's hold of this lock in the client's hold registry. */
  String holdKey() {
    return key + kind.idSuffix();
  }

  /**
   * Whether {@code key} (valid) is braced: {@code {K}} followed by zero or more {@code '~'},
   * where {@code K} has no {@code '{'}. Those are exactly the tagged keys whose derived base
   * would otherwise be the slotted form of an untagged key or of another braced key.
   */
  static boolean braced(String key) {
    int end = key.length();
    while (end > 0 && key.charAt(end - 1) == '~') {
      end--;
    }
    return end >= 3 && key.charAt(0) == '{' && key.charAt(end - 1) == '}'
        && key.lastIndexOf('{', end - 1) == 0;
  }

  private static boolean hasHashTag(String key) {
    int open = key.indexOf('{');
    int close = key.indexOf('}', open + 1);
    return close > open + 1;
  }
}
