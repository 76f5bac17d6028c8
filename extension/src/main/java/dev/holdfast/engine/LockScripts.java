package dev.holdfast.engine;

/**
 * Every Lua script Holdfast runs, in one place.
 *
 * <p>The data layout is Redisson's {@code RLock}, so that both libraries exclude each other and
 * wake each other's waiters: the lock is a hash whose single field {@code <clientId>:<threadId>}
 * holds the reentry count; the key's expiry is the lease; the last unlock deletes the key and
 * publishes {@code 0} on the lock's channel.
 *
 * <p><b>Idempotence.</b> A script can run twice for one call: the client timed out and retried
 * while the first request was still queued, or a cluster retry followed a lost reply. Acquire and
 * release therefore carry the count this client believes the thread holds, so a replay is
 * recognised by its result already being there, and the final release leaves a short-lived
 * marker keyed by request id, because "already deleted by me" and "lost" look the same otherwise.
 * Redisson's scripts ignore the expected count, so mixing clients never breaks mutual exclusion.
 *
 * <p><b>Order of effects.</b> Redis does not roll back a script that fails halfway, so every call
 * that can be refused (a publish the ACL user may not make, a marker key outside its key
 * patterns) comes before the deletion: a refused release changes nothing. Waiters cannot observe
 * the order inside a script.
 */
final class LockScripts {

  private LockScripts() {
  }

  /**
   * Acquire or re-enter.
   *
   * <pre>
   * KEYS[1] lock key
   * ARGV[1] lease in ms
   * ARGV[2] hash field of the caller: clientId:threadId
   * ARGV[3] the hold count the caller believes it has (0 if it thinks it does not hold the lock)
   * returns {1, count} when the caller now holds the lock with that count,
   *         {0, pttl}  when someone else holds it (pttl is -1 for a lock without expiry)
   * </pre>
   *
   * A current count of expected + 1 means this request already ran: it is answered, not applied.
   */
  static final LockScript ACQUIRE = new LockScript("acquire", """
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
      if count > 0 and count == tonumber(ARGV[3]) + 1 then
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, count}
      end
      if count > 0 or redis.call('exists', KEYS[1]) == 0 then
        count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, count}
      end
      return {0, redis.call('pttl', KEYS[1])}
      """);

  /**
   * Release one hold.
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] release marker key for this request (same slot as the key)
   * ARGV[1] hash field of the caller: clientId:threadId
   * ARGV[2] lease in ms to set when holds remain
   * ARGV[3] the hold count the caller believes it has
   * ARGV[4] 'publish' or 'spublish'
   * ARGV[5] how long the release marker lives, in ms
   * ARGV[6] unlock channel (same slot as the key; an argument, not a key, so that ACL key
   *         patterns need not cover it — '&' channel patterns do)
   * returns the count left: 0 when the lock was deleted (and a waiter woken),
   *         -1 when the caller does not hold the lock
   * </pre>
   */
  static final LockScript RELEASE = new LockScript("release", """
      if redis.call('exists', KEYS[2]) == 1 then
        return 0
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      if count == 0 then
        return -1
      end
      local expected = tonumber(ARGV[3])
      if count == expected - 1 then
        return count
      end
      if count > 1 then
        count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
        redis.call('pexpire', KEYS[1], ARGV[2])
        return count
      end
      redis.call(ARGV[4], ARGV[6], '0')
      redis.call('set', KEYS[2], '1', 'px', ARGV[5])
      redis.call('del', KEYS[1])
      return 0
      """);

  /**
   * Renew a batch of watchdog holds (all keys in one slot in cluster mode).
   *
   * <pre>
   * KEYS[i]   lock key of hold i
   * ARGV[1]   lease in ms
   * ARGV[i+1] hash field of hold i
   * returns a list with, for each hold, 1 if it was renewed or 0 if it is no longer held
   * </pre>
   */
  static final LockScript RENEW = new LockScript("renew", """
      local renewed = {}
      for i = 1, #KEYS do
        if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
          redis.call('pexpire', KEYS[i], ARGV[1])
          renewed[i] = 1
        else
          renewed[i] = 0
        end
      end
      return renewed
      """);

  /**
   * Delete the lock whoever holds it.
   *
   * <pre>
   * KEYS[1] lock key
   * ARGV[1] 'publish' or 'spublish'
   * ARGV[2] unlock channel (same slot as the key)
   * returns 1 if a lock was deleted, 0 if there was none
   * </pre>
   */
  static final LockScript FORCE_RELEASE = new LockScript("force-release", """
      if redis.call('exists', KEYS[1]) == 1 then
        redis.call(ARGV[1], ARGV[2], '0')
        redis.call('del', KEYS[1])
        return 1
      end
      return 0
      """);
}
