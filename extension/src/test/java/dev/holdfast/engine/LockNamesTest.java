package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * The Redis names derived from a lock's name (issue 15 §1): Redisson's for every ordinary name,
 * and never one derived key shared by two different lock keys, whatever the key prefixes.
 */
class LockNamesTest {
  private static final List<String> PREFIXES = List.of("", "p:", "{", "{app}:", "{p");
  private static final List<String> NAMES = List.of("a", "{a}", "{a}~", "{a}~~", "a}", "{a}}",
      "{a}}~", "a}~", "x{a}", "{a}:b", "{a}b}", "p:a", "{p:a}", "{p:a}~", "app}:a", ":a}",
      "a~", "{a~}", "orders:{42}", "{42}");

  @Test
  void ordinaryNames_keepRedissonsNames() {
    LockNames a = LockNames.of("", "a", FairKind.INSTANCE);
    assertEquals("redisson_lock__channel:{a}", a.channel());
    assertEquals("redisson_lock_queue:{a}", FairKind.queueKey(a));
    assertEquals("redisson_lock_timeout:{a}", FairKind.timeoutKey(a));
    assertEquals("{a}", rwTimeoutPrefix(LockNames.of("", "a", ReadWriteLockKind.READ)));
    assertEquals("redisson_rwlock:{a}", LockNames.of("", "a", ReadWriteLockKind.READ).channel());
    // Read-write timeout keys stay Redisson's for a braced key too: only the field differs.
    assertEquals("{a}", rwTimeoutPrefix(LockNames.of("", "{a}", ReadWriteLockKind.READ)));
    assertEquals("c:1~", LockNames.of("", "{a}", ReadWriteLockKind.READ).field("c:1"));
    assertEquals("c:1~:write", LockNames.of("", "{a}", ReadWriteLockKind.WRITE).field("c:1"));
    assertEquals("c:1", LockNames.of("", "{a}", FairKind.INSTANCE).field("c:1"));

    LockNames tagged = LockNames.of("", "orders:{42}", FairKind.INSTANCE);
    assertEquals("redisson_lock_queue:orders:{42}", FairKind.queueKey(tagged));
    assertEquals("orders:{42}",
        rwTimeoutPrefix(LockNames.of("", "orders:{42}", ReadWriteLockKind.READ)));

    LockNames prefixed = LockNames.of("p:", "a", FairKind.INSTANCE);
    assertEquals("redisson_lock_queue:{p:a}", FairKind.queueKey(prefixed));
    assertEquals("redisson_lock__channel:{p:a}", prefixed.channel());
  }

  @Test
  void aAndBracedA_shareTheirChannel_butNoDerivedKey() {
    LockNames a = LockNames.of("", "a", FairKind.INSTANCE);
    LockNames braced = LockNames.of("", "{a}", FairKind.INSTANCE);
    assertEquals(a.channel(), braced.channel(), "Redisson's channel naming, kept for interop");
    assertDistinct(FairKind::queueKey);
  }

  @Test
  void fairQueues_ofDifferentKeys_areDistinct_andInTheKeysSlot() {
    assertDistinct(FairKind::queueKey);
    assertDistinct(FairKind::timeoutKey);
  }

  @Test
  void readerTimeoutKeys_ofDifferentKeys_areDistinct_andInTheKeysSlot() {
    assertDistinct(n -> rwTimeoutPrefix(n) + ":" + n.field("client:1") + ":rwlock_timeout:1");
    assertDistinct(n -> ReadWriteLockKind.READ.renewalDetail(n, n.field("client:1")));
  }

  @Test
  void untaggedKeyWithAClosingBrace_isRefused_namingTheKey() {
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
        IllegalArgumentException.class, () -> LockNames.of("", "a}"));
    org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("'a}'"), e.getMessage());
  }

  private static String rwTimeoutPrefix(LockNames names) {
    return ReadWriteLockKind.READ.extraKeys(names).get(0);
  }

  /** {@code derive} maps different lock keys (over all prefixes) to different keys in their slot. */
  private static void assertDistinct(Function<LockNames, String> derive) {
    Map<String, String> keyOf = new HashMap<>();
    for (String prefix : PREFIXES) {
      for (String name : NAMES) {
        LockNames names;
        try {
          names = LockNames.of(prefix, name, ReadWriteLockKind.READ);
        } catch (IllegalArgumentException e) {
          continue; // not a valid key (a brace without a hash tag)
        }
        String derived = derive.apply(names);
        String previous = keyOf.put(derived, names.key());
        if (previous != null) {
          assertEquals(previous, names.key(), "keys '" + previous + "' and '" + names.key()
              + "' share " + derived);
        }
        if (!derived.startsWith("read:")) {
          assertEquals(JedisClusterCRC16.getSlot(names.key()), JedisClusterCRC16.getSlot(derived),
              derived + " is not in the slot of " + names.key());
        }
      }
    }
  }
}
