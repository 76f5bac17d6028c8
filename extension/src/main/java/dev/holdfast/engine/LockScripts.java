package dev.holdfast.engine;

/**
 * Every Lua script Holdfast runs, in one place.
 *
 * <p>The data layout is Redisson's {@code RLock}, so that both libraries exclude each other and
 * wake each other's waiters: the lock is a hash whose single field {@code <clientId>:<threadId>}
 * holds the reentry count; the key's expiry is the lease; the last unlock deletes the key and
 * publishes {@code 0} on the lock's channel.
 *
 * <p><b>The client mirrors the script.</b> Every call carries the hold count the client believes
 * the thread has ({@code expected}), so a script can tell a fresh acquisition, a re-entry, a
 * replay of its own request and a hold that is gone apart, and answers which one it saw. A
 * re-entry whose hold is gone is refused, never turned into a new hold.
 *
 * <p><b>Request markers.</b> Each call has a request id, and a marker key per request id (same
 * slot as the lock, under the key prefix) records outcomes that the count alone cannot prove:
 * <ul>
 *   <li>{@code d:<n>} — the request ran and left count {@code n} (written by every final release,
 *       and by any call sent a second time, a "sealed" call);</li>
 *   <li>{@code n:<pttl>} — a sealed acquisition ran and found the lock held by someone else;</li>
 *   <li>{@code x:<n>} — the request was resolved by {@link #RESOLVE}: a copy arriving later (a
 *       retry queued behind a paused server or a slow network) is refused.</li>
 * </ul>
 * The first attempt of a call writes no marker (except a final release), so the common path
 * costs one extra read of a missing key.
 *
 * <p><b>Order of effects.</b> Redis does not roll back a script that fails halfway, so every call
 * that can be refused (a publish the ACL user may not make, a marker key outside its key
 * patterns) comes before the change to the lock: a refused call changes nothing. Waiters cannot
 * observe the order inside a script.
 */
final class LockScripts {

  private LockScripts() {
  }

  /**
   * Acquire or re-enter.
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] marker key of this request
   * KEYS[3] fencing token key of the lock
   * ARGV[1] lease in ms the new section needs
   * ARGV[2] hash field of the caller: clientId:threadId
   * ARGV[3] the hold count the caller believes it has (0: it believes it holds nothing)
   * ARGV[4] '1' to seal (record the outcome in the marker), '0' not to
   * ARGV[5] how long a marker lives, in ms
   * ARGV[6] '1' to assign a fencing token with the grant, '0' not to
   * ARGV[7] how long the token key lives after the last fenced grant, in ms
   * returns {1, count, pttl, token}  the caller holds the lock with that count; the key expires
   *                                  in pttl; token is the new fencing token (0 if none assigned)
   *         {0, pttl, 0, 0}   someone else holds it (pttl -1: a lock without expiry)
   *         {-1, 0, 0, 0}     a re-entry whose hold is gone: refused, nothing changed
   *         {-2, count, 0, 0} the field's count is not what the caller can have: nothing changed
   *         {-3, 0, 0, 0}     this request was resolved (cancelled) earlier: nothing changed
   * </pre>
   *
   * A fresh acquisition that finds the caller's own field with count 1 takes it over: it is this
   * request's replay or the leftover of an earlier uncertain one of the same thread, which holds
   * nothing else. A re-entry never shortens the key's expiry below what it was.
   *
   * <p>A fencing token is the larger of the last token plus one and the server's clock in
   * microseconds, so tokens only grow even after the token key is gone (expired, or lost in a
   * restart without persistence); it stays below 2^53, exact in Lua's numbers.
   */
  static final LockScript ACQUIRE = new LockScript("acquire", """
      local function token()
        if ARGV[6] ~= '1' then
          return 0
        end
        local time = redis.call('time')
        local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
        local next = math.max(tonumber(redis.call('get', KEYS[3]) or '0') + 1, now)
        redis.call('set', KEYS[3], string.format('%.0f', next), 'px', ARGV[7])
        return next
      end
      local marker = redis.call('get', KEYS[2])
      if marker then
        local kind, value = string.sub(marker, 1, 1), tonumber(string.sub(marker, 3))
        if kind == 'd' then
          local last = 0
          if ARGV[6] == '1' then
            last = tonumber(redis.call('get', KEYS[3]) or '0')
          end
          return {1, value, redis.call('pttl', KEYS[1]), last}
        elseif kind == 'n' then
          return {0, value, 0, 0}
        end
        return {-3, 0, 0, 0}
      end
      local lease = tonumber(ARGV[1])
      local expected = tonumber(ARGV[3])
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
      local pttl
      if expected == 0 then
        if count == 0 and redis.call('exists', KEYS[1]) == 1 then
          pttl = redis.call('pttl', KEYS[1])
          if ARGV[4] == '1' then
            redis.call('set', KEYS[2], 'n:' .. pttl, 'px', ARGV[5])
          end
          return {0, pttl, 0, 0}
        elseif count > 1 then
          return {-2, count, 0, 0}
        end
        if ARGV[4] == '1' then
          redis.call('set', KEYS[2], 'd:1', 'px', ARGV[5])
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], lease)
        return {1, 1, lease, token()}
      end
      if count == 0 then
        return {-1, 0, 0, 0}
      elseif count ~= expected and count ~= expected + 1 then
        return {-2, count, 0, 0}
      end
      if ARGV[4] == '1' then
        redis.call('set', KEYS[2], 'd:' .. (expected + 1), 'px', ARGV[5])
      end
      if count == expected then
        count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
      end
      pttl = redis.call('pttl', KEYS[1])
      if pttl >= 0 and pttl < lease then
        redis.call('pexpire', KEYS[1], lease)
        pttl = lease
      end
      return {1, count, pttl, token()}
      """);

  /**
   * Release one section of a hold.
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] marker key of this request (same slot as the key)
   * ARGV[1] hash field of the caller: clientId:threadId
   * ARGV[2] lease in ms that the sections still open need; '0' when their lease is over, so the
   *         hold ends now whatever its count
   * ARGV[3] the hold count the caller believes it has
   * ARGV[4] 'publish' or 'spublish'
   * ARGV[5] how long a marker lives, in ms
   * ARGV[6] unlock channel (same slot as the key; an argument, not a key, so that ACL key
   *         patterns need not cover it — '&' channel patterns do)
   * ARGV[7] '1' to seal, '0' not to
   * returns the count left: 0 when the lock was deleted (and a waiter woken),
   *         -1 when the caller does not hold the lock,
   *         -2 when the field's count is not what the caller can have (nothing changed)
   * </pre>
   *
   * A count of expected - 1 means this request already ran: it is answered, not applied. The
   * final release always leaves a marker, because "deleted by me" and "lost" look alike.
   */
  static final LockScript RELEASE = new LockScript("release", """
      local marker = redis.call('get', KEYS[2])
      if marker then
        if string.sub(marker, 1, 1) == 'd' then
          return tonumber(string.sub(marker, 3))
        end
        return -2
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      if count == 0 then
        return -1
      end
      local expected = tonumber(ARGV[3])
      if count == expected - 1 then
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. count, 'px', ARGV[5])
        end
        return count
      elseif count ~= expected then
        return -2
      end
      if count > 1 and ARGV[2] ~= '0' then
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. (count - 1), 'px', ARGV[5])
        end
        count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
        redis.call('pexpire', KEYS[1], ARGV[2])
        return count
      end
      redis.call(ARGV[4], ARGV[6], '0')
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[5])
      redis.call('del', KEYS[1])
      return 0
      """);

  /**
   * Settle a request whose reply never came: record that it is resolved (so a copy arriving later
   * is refused), undo it if it was an acquisition that ran, and say what the hold is now.
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] marker key of the request to settle
   * ARGV[1] hash field of the caller
   * ARGV[2] the hold count the caller had before the request
   * ARGV[3] 'acquire': undo it if it ran (a fresh acquisition's field is removed whatever its
   *                    count: the thread holds nothing else);
   *         'release': keep whatever it did, only report it;
   *         'abandon': the hold is given up: remove the caller's field
   * ARGV[4] 'publish' or 'spublish'
   * ARGV[5] unlock channel
   * ARGV[6] how long the marker lives, in ms
   * returns {count, outcome}: the caller's count after settling, and 'd' if the request is known
   *         to have run (its marker said so), 'x' if it was settled before, '' otherwise
   * </pre>
   */
  static final LockScript RESOLVE = new LockScript("resolve", """
      local marker = redis.call('get', KEYS[2])
      if marker and string.sub(marker, 1, 1) == 'x' then
        return {tonumber(string.sub(marker, 3)), 'x'}
      end
      local outcome = ''
      if marker and string.sub(marker, 1, 1) == 'd' then
        outcome = 'd'
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      local expected = tonumber(ARGV[2])
      local target = count
      if ARGV[3] == 'abandon' or (ARGV[3] == 'acquire' and expected == 0) then
        target = 0
      elseif ARGV[3] == 'acquire' and count == expected + 1 then
        target = expected
      end
      local last = target == 0 and count > 0 and redis.call('hlen', KEYS[1]) <= 1
      if last then
        redis.call(ARGV[4], ARGV[5], '0')
      end
      redis.call('set', KEYS[2], 'x:' .. target, 'px', ARGV[6])
      if last then
        redis.call('del', KEYS[1])
      elseif target == 0 and count > 0 then
        redis.call('hdel', KEYS[1], ARGV[1])
      elseif target ~= count then
        redis.call('hset', KEYS[1], ARGV[1], target)
      end
      return {target, outcome}
      """);

  /**
   * Renew a batch of watchdog holds (all keys in one slot in cluster mode). A renewal extends the
   * TTL to the lease and never shortens it: an open fixed-lease section of the same hold may have
   * been granted a longer TTL, which its holder goes on believing (contract 4).
   *
   * <pre>
   * KEYS[i]    lock key of hold i
   * ARGV[1]    lease in ms
   * ARGV[2i]   hash field of hold i
   * ARGV[2i+1] what else the hold's kind renews ({@link LockKind#renewalDetail}); '' for none
   * returns a list with, for each hold, 1 if it was renewed (its TTL is now at least the lease)
   *   or 0 if it is no longer held
   * </pre>
   */
  static final LockScript RENEW = new LockScript("renew", """
      local renewed = {}
      local lease = tonumber(ARGV[1])
      for i = 1, #KEYS do
        local field = ARGV[2 * i]
        if redis.call('hexists', KEYS[i], field) == 1 then
          if redis.call('pttl', KEYS[i]) < lease then
            redis.call('pexpire', KEYS[i], lease)
          end
          renewed[i] = 1
        else
          renewed[i] = 0
        end
      end
      return renewed
      """);

  /** {@link #RENEW} for a whole Redis 7+ cluster node in one call. */
  static final LockScript RENEW_ACROSS_SLOTS = RENEW.acrossSlots();

  /**
   * End a hold locally but keep the lock in Redis for a while (a {@code @Locked} method's
   * {@code holdAtLeast}): the key expires after exactly that long, unless held again meanwhile.
   *
   * <pre>
   * KEYS[1] lock key
   * ARGV[1] hash field of the caller
   * ARGV[2] how much longer the lock stays, in ms
   * returns 1 if the caller held it (it now expires then), 0 if it did not
   * </pre>
   *
   * A copy applied twice sets the same expiry again, counted from the copy: harmless.
   */
  static final LockScript KEEP = new LockScript("keep", """
      if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 1
      end
      return 0
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

  // ---- local handoff (exclusive lock) ----

  /**
   * Hand an exclusive lock from its releasing thread to a waiting thread of the same client, in
   * the release's own round trip: the hold moves from one field to the other, nothing is
   * published (the waiter is woken locally) and nobody else can slip in between.
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] marker key of the releaser's request (as a {@link #RELEASE} with expected 1)
   * KEYS[3] marker key of the request made for the waiter (as an {@link #ACQUIRE} with
   *         expected 0)
   * ARGV[1] hash field of the releaser
   * ARGV[2] hash field of the waiter
   * ARGV[3] the waiter's lease in ms
   * ARGV[4] how long the markers live, in ms
   * returns {1, pttl}    handed over: the waiter holds the lock with count 1, expiring in pttl
   *         {-1, 0}      the releaser does not hold the lock: nothing changed
   *         {-2, count}  the releaser's count is not 1: nothing changed
   *         {-3, 0}      one of the requests was settled or answered otherwise: nothing changed
   * </pre>
   *
   * Both markers are always written: {@code d:0} answers a re-sent release of the releaser's
   * request ("done, the hold ended"), {@code d:1} a re-sent acquisition of the waiter's request
   * ("granted"), and a copy of this call arriving after either was settled or answered by
   * {@link #RESOLVE}, {@link #RELEASE} or {@link #ACQUIRE} changes nothing. A copy finding the
   * pair this call writes is its own replay and answers as the call did.
   */
  static final LockScript TRANSFER = new LockScript("transfer", """
      local released = redis.call('get', KEYS[2])
      local granted = redis.call('get', KEYS[3])
      if released or granted then
        if released == 'd:0' and granted == 'd:1' then
          return {1, redis.call('pttl', KEYS[1])}
        end
        return {-3, 0}
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      if count == 0 then
        return {-1, 0}
      elseif count ~= 1 then
        return {-2, count}
      end
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[4])
      redis.call('set', KEYS[3], 'd:1', 'px', ARGV[4])
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], ARGV[2], 1)
      redis.call('pexpire', KEYS[1], ARGV[3])
      return {1, tonumber(ARGV[3])}
      """);
}
