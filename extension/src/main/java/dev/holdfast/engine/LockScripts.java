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
 *   <li>{@code d:<n>} or {@code d:<n>:<token>} — the request ran and left count {@code n}
 *       (written by every final release, and by any call sent a second time, a "sealed" call);
 *       a fenced grant records the token it was given;</li>
 *   <li>{@code n:<pttl>} — a sealed acquisition ran and found the lock held by someone else;</li>
 *   <li>{@code x:<n>} — the request was resolved by {@link #RESOLVE}: a copy arriving later (a
 *       retry queued behind a paused server or a slow network) is refused; {@code x:<n>:1}
 *       when an abandon resolved it.</li>
 * </ul>
 * The first attempt of a call writes no marker (except a final release), so the common path
 * costs one extra read of a missing key.
 *
 * <p><b>The replay rule.</b> A recorded outcome counts only while it is still true. A re-sent
 * acquisition whose marker says {@code d:<n>} is answered "granted" only if the caller's field
 * still has exactly {@code n} and the hold is live (for a read hold: one of its own section keys
 * lives); it then answers the token that request was given (from the marker, never the token
 * key, which a later grant may have moved on) and the TTL the hold has <em>now</em> (never the
 * full lease: the client counts it from the re-send). Otherwise the grant has ended since (its
 * lease ran out, it was force-unlocked, someone else may hold the lock): a fresh acquisition is
 * told "held by someone else" ({@code {0, pttl}}) and tries again as a new request; a re-entry is
 * told its hold is gone ({@code -1}) or that the count is not what it can be ({@code -2}). A
 * re-sent release whose marker says {@code d:<n>} with {@code n > 0} is answered {@code n} only
 * while the caller's field still has {@code n} ({@code -1} when it is gone).
 *
 * <p><b>One skeleton, every kind.</b> The acquire, release and resolve scripts of every kind are
 * composed (as text, once, when this class loads) from the same fragments, and each kind adds
 * only its own logic:
 * <ul>
 *   <li>{@link #MARKER}: reading a request's marker — the only place that parses one;</li>
 *   <li>{@link #ACQUIRE_FLOW}: the replay rule, the expected-count check, the fencing token and
 *       sealing of every acquisition, with four slots the kind fills: whether the caller's hold
 *       is still live and its TTL ({@code @LIVE@}), whether a fresh acquisition is refused
 *       ({@code @REFUSED@}), the grant ({@code @TAKE@}) and the re-entry ({@code @REENTER@});
 *       {@link #HASH_LIVE} and {@link #HASH_REENTER} fill two of them for every hold that is a
 *       hash field under the key's expiry (exclusive, fair, write);</li>
 *   <li>{@link #RELEASE_PROLOGUE}: the replay rule and the expected-count check of every
 *       release; the kind's body follows;</li>
 *   <li>{@link #RESOLVE_PROLOGUE}: marker lookup and the count a resolve settles to; the kind's
 *       body follows.</li>
 * </ul>
 * KEEP, TRANSFER and RENEW are written out whole for now. A marked KEEP or TRANSFER takes the same
 * fragments: {@link #MARKER} for the lookup and a kind's {@code @LIVE@} for its replay (a
 * replayed TRANSFER is "handed over" only while the waiter's field still has 1); RENEW's check
 * of a hash hold is {@link #HASH_LIVE}'s.
 *
 * <p><b>Order of effects.</b> Redis does not roll back a script that fails halfway, so every call
 * that can be refused (a publish the ACL user may not make, a marker or token key outside its key
 * patterns) comes before the change to the lock: a refused call changes nothing. Waiters cannot
 * observe the order inside a script.
 */
final class LockScripts {

  private LockScripts() {
  }

  // ---- The skeleton: fragments every kind's acquire, release and resolve are composed of ----
  //
  // Composed as text, not as Lua functions: a closure costs about a microsecond of Redis's time
  // on every call (measured), and these run on every lock() and unlock().

  /**
   * Reads the marker of this call's request ({@code KEYS[2]}): {@code marker} (nil if the request
   * left none) and, if there is one, its {@code letter} ({@code 'd'} ran, {@code 'n'} found the
   * lock held, {@code 'r'} was refused, {@code 'x'} was settled), its number {@code recorded}
   * (the count the request left, the pttl it found, or the refusal's reply) and {@code given}
   * (the token a fenced grant was given, the count a refusal found, 1 for a request an abandon
   * settled; 0 if none). The only place that parses a marker: a marker without a token parses
   * the same.
   */
  private static final String MARKER = """
      local marker = redis.call('get', KEYS[2])
      local letter, recorded, given
      if marker then
        local number, token = string.match(marker, '^.:(%-?%d+):?(%d*)')
        letter, recorded, given = string.sub(marker, 1, 1), tonumber(number), tonumber(token) or 0
      end
      """;

  /**
   * Every acquisition ({@link #ACQUIRE}'s KEYS and ARGV), after the kind's helpers: the replay
   * rule, the expected-count check, the fencing token and sealing. The kind fills four slots,
   * each Lua statements on the locals {@code lease}, {@code expected}, {@code count} (the caller's
   * field) and {@code pttl}:
   * <ul>
   *   <li>{@code @LIVE@}: whether the caller's hold of {@code count} sections still stands — set
   *       {@code pttl} to the TTL it has now, or to nil if it is gone;</li>
   *   <li>{@code @REFUSED@}: a fresh acquisition ({@code count} 0, or 1 for the caller's own
   *       leftover) — set {@code pttl} to the pttl to report if the caller may not take the lock
   *       (the kind may queue it), else leave it nil;</li>
   *   <li>{@code @TAKE@}: grant it: the caller's field gets count 1; set {@code pttl};</li>
   *   <li>{@code @REENTER@}: grant a re-entry ({@code count} is {@code expected}, or
   *       {@code expected + 1} when this request ran unsealed before; {@code pttl} from
   *       {@code @LIVE@}): set {@code count} and {@code pttl}.</li>
   * </ul>
   * The kind's helpers ({@code @HELPERS@}) come after {@code lease} and {@code expected} are
   * read. The token is assigned and the outcome sealed before the lock changes (an ACL may refuse
   * either).
   */
  private static final String ACQUIRE_FLOW = """
      local lease = tonumber(ARGV[1])
      local expected = tonumber(ARGV[3])
      @HELPERS@
      """ + MARKER + """
      local count, pttl
      if letter == 'd' then
        -- A replay counts only while it is still true (see the class comment).
        count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
        if count == recorded and count > 0 then
          @LIVE@
          if pttl then
            return {1, count, pttl, given}
          end
        end
        if expected == 0 and count <= 1 then
          -- That grant has ended: not granted; the caller tries again as a new request.
          pttl = redis.call('pttl', KEYS[1])
          if pttl == -2 then
            pttl = 0
          end
          return {0, pttl, 0, 0}
        elseif count == 0 or count == recorded then
          return {-1, 0, 0, 0}
        end
        return {-2, count, 0, 0}
      elseif letter == 'n' then
        return {0, recorded, 0, 0}
      elseif letter == 'r' then
        return {recorded, recorded == -2 and given or 0, 0, 0}
      elseif letter then
        return {-3, 0, 0, 0}
      end
      count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
      -- A sealed call that is refused records it (r:<reply>:<count>), so that a late copy of an
      -- earlier send can never apply to a hold the caller takes afterwards.
      if expected == 0 then
        if count > 1 then
          @REFUSE_COUNT@
          return {-2, count, 0, 0}
        end
        @REFUSED@
        if pttl then
          if ARGV[4] == '1' then
            redis.call('set', KEYS[2], 'n:' .. pttl, 'px', ARGV[5])
          end
          return {0, pttl, 0, 0}
        end
      elseif count == 0 then
        @REFUSE_GONE@
        return {-1, 0, 0, 0}
      elseif count ~= expected and count ~= expected + 1 then
        @REFUSE_COUNT@
        return {-2, count, 0, 0}
      else
        @LIVE@
        if not pttl then
          @REFUSE_GONE@
          return {-1, 0, 0, 0} -- its lease ended: it is no longer held
        end
      end
      -- Granted: the token, then the outcome for a sealed call, then the lock.
      local granted = 0
      if ARGV[6] == '1' then
        local time = redis.call('time')
        granted = math.max(tonumber(redis.call('get', KEYS[3]) or '0') + 1,
            tonumber(time[1]) * 1000000 + tonumber(time[2]))
        redis.call('set', KEYS[3], string.format('%.0f', granted), 'px', ARGV[7])
      end
      if ARGV[4] == '1' then
        local outcome = 'd:' .. (expected + 1)
        if granted > 0 then
          outcome = outcome .. ':' .. string.format('%.0f', granted)
        end
        redis.call('set', KEYS[2], outcome, 'px', ARGV[5])
      end
      if expected == 0 then
        @TAKE@
        count = 1
      else
        @REENTER@
      end
      return {1, count, pttl, granted}
      """;

  /**
   * {@code @LIVE@} and {@code @REENTER@} of a hold that is a hash field under the key's expiry
   * (exclusive, fair, write): live while the key has time left; a re-entry adds one (unless this
   * request already did) and never shortens the key's expiry.
   */
  private static final String HASH_LIVE = """
      pttl = redis.call('pttl', KEYS[1])
      if pttl == 0 or pttl == -2 then
        pttl = nil
      end
      """;

  /** See {@link #HASH_LIVE}. */
  private static final String HASH_REENTER = """
      if count == expected then
        count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
      end
      if pttl >= 0 and pttl < lease then
        redis.call('pexpire', KEYS[1], lease)
        pttl = lease
      end
      """;

  /**
   * What every release script starts with ({@link #RELEASE}'s KEYS and ARGV), after the kind's
   * helpers: {@link #MARKER}, the replay rule (a recorded count is answered only while it is still
   * the caller's), and the expected-count check: a request that already ran
   * ({@code count == expected - 1}) is answered, not applied. The kind's body follows with
   * {@code count == expected}; it records {@code d:<left>} in the marker when sealed (and always
   * for a final release).
   */
  private static final String RELEASE_PROLOGUE = MARKER + """
      if letter == 'd' then
        if recorded == 0 then
          return 0
        end
        local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
        if count == recorded then
          return count
        elseif count == 0 then
          return -1
        end
        return -2
      elseif letter == 'r' then
        return recorded
      elseif letter then
        return -2
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      local expected = tonumber(ARGV[3])
      if count == 0 then
        -- Refused. Sealed, it is recorded, so that a late copy of an earlier send can never
        -- release a hold the caller takes afterwards.
        @REFUSE_GONE@
        return -1
      elseif count ~= expected and count ~= expected - 1 then
        @REFUSE_COUNT@
        return -2
      elseif count == expected - 1 then
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. count, 'px', ARGV[5])
        end
        return count
      end
      """;

  /**
   * What every resolve script starts with ({@link #RESOLVE}'s KEYS and ARGV), after the kind's
   * helpers: {@link #MARKER}; a request resolved before answers as it did — except to an abandon
   * when no abandon resolved it: the client gives a hold up under a request whose earlier
   * resolve may have run unanswered, and the field must go all the same; else {@code outcome}
   * ('d' if its marker says it ran), the caller's {@code count}, the {@code target} count it
   * settles to and the {@code seal} the kind's body records in the marker: {@code x:<target>},
   * or {@code x:<target>:1} for an abandon (the mark that stops its own late copies).
   */
  private static final String RESOLVE_PROLOGUE = MARKER + """
      if letter == 'x' and (ARGV[3] ~= 'abandon' or given == 1) then
        return {recorded, 'x'}
      end
      local outcome = ''
      if letter == 'd' then
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
      local seal = 'x:' .. target
      if ARGV[3] == 'abandon' then
        seal = seal .. ':1'
      end
      """;

  /** An acquire script: the kind's helpers, then {@link #ACQUIRE_FLOW} with its slots filled. */
  private static LockScript acquireScript(String name, String helpers, String live,
      String refused, String take, String reenter) {
    return new LockScript(name, ACQUIRE_FLOW.replace("@REFUSE_GONE@", refusal("ARGV[4]", -1,
        "ARGV[5]")).replace("@REFUSE_COUNT@", refusal("ARGV[4]", -2, "ARGV[5]"))
        .replace("@HELPERS@", helpers)
        .replace("@LIVE@", live).replace("@REFUSED@", refused).replace("@TAKE@", take)
        .replace("@REENTER@", reenter));
  }

  /**
   * Lua that records a refusal ({@code r:<reply>:<count>}) in this request's marker when
   * {@code sealed} (a Lua expression) is {@code '1'}: its own re-sends are answered the same
   * refusal, and a late copy of an earlier send applies nothing.
   */
  private static String refusal(String sealed, int reply, String markerMillis) {
    return "if " + sealed + " == '1' then redis.call('set', KEYS[2], 'r:" + reply
        + ":' .. count, 'px', " + markerMillis + ") end";
  }

  /** A release script: the kind's helpers, the shared prologue, the kind's body. */
  private static LockScript releaseScript(String name, String helpers, String body) {
    return new LockScript(name, helpers + RELEASE_PROLOGUE
        .replace("@REFUSE_GONE@", refusal("ARGV[7]", -1, "ARGV[5]"))
        .replace("@REFUSE_COUNT@", refusal("ARGV[7]", -2, "ARGV[5]")) + body);
  }

  /** A resolve script: the kind's helpers, the shared prologue, the kind's body. */
  private static LockScript resolveScript(String name, String helpers, String body) {
    return new LockScript(name, helpers + RESOLVE_PROLOGUE + body);
  }

  /**
   * How every keep script ({@link #KEEP}, {@link #RW_WRITE_KEEP}, {@link #RW_READ_KEEP}) starts,
   * {@code @LIVE@} being the kind's test that the caller's {@code count} sections still stand:
   * {@link #MARKER} decides before anything else — {@code d:}, this request ran already: answer
   * 1 while the lock is still kept ({@code @KEPT@}) and apply nothing; {@code r:}, it was refused:
   * the same refusal; {@code x:}, it was settled ({@link #RESOLVE}): -3. Then the count: a keep
   * that is refused (0: not held, -2: another count) records {@code r:<reply>:<count>}, and
   * one that applies records {@code d:0}, before the kind's body changes anything. A keep always
   * leaves its marker, so no copy of it can apply after another copy was answered. The kind's
   * {@code @WAKE@} comes before any write that applies: it publishes, which an ACL may refuse.
   */
  private static final String KEEP_PROLOGUE = MARKER + """
      if letter == 'd' then
        -- Answered "kept" only while the lock is still kept.
        if @KEPT@ then
          return 1
        end
        return 0
      elseif letter == 'r' then
        return recorded
      elseif letter then
        return -3
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      local refusal
      if count == 0 or not (@LIVE@) then
        refusal = 0
      elseif count ~= tonumber(ARGV[3]) then
        refusal = -2
      end
      if refusal then
        redis.call('set', KEYS[2], 'r:' .. refusal .. ':' .. count, 'px', ARGV[4])
        return refusal
      end
      @WAKE@
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[4])
      """;

  /** {@code @KEPT@} of a kind whose keep renames the caller's field {@code <field>:kept}. */
  private static final String HASH_KEPT = "redis.call('hexists', KEYS[1], ARGV[1] .. ':kept') == 1";

  /**
   * A keep script: the kind's helpers, {@link #KEEP_PROLOGUE} with its test and its wake-up of
   * waiters (when the keep makes the lock expire sooner than they were told), the kind's body.
   */
  private static LockScript keepScript(String name, String helpers, String kept, String live,
      String wake, String body) {
    return new LockScript(name, helpers + KEEP_PROLOGUE.replace("@KEPT@", kept)
        .replace("@LIVE@", live).replace("@WAKE@", wake) + body);
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
   *         {0, pttl, 0, 0}   someone else holds it (pttl -1: a lock without expiry; 0: a
   *                           replayed grant that has ended and a lock that is free now)
   *         {-1, 0, 0, 0}     a re-entry whose hold is gone: refused, nothing changed
   *         {-2, count, 0, 0} the field's count is not what the caller can have: nothing changed
   *         {-3, 0, 0, 0}     this request was resolved (cancelled) earlier: nothing changed
   * </pre>
   *
   * A fresh acquisition that finds the caller's own field with count 1 takes it over: it is this
   * request's replay or the leftover of an earlier uncertain one of the same thread, which holds
   * nothing else. A re-entry never shortens the key's expiry below what it was. A replay is
   * answered as the class comment's replay rule says: granted (with the key's TTL now and the
   * token this request was given) only while the caller's field still has the count it left.
   *
   * <p>A fencing token is the larger of the last token plus one and the server's clock in
   * microseconds, so tokens only grow even after the token key is gone (expired, or lost in a
   * restart without persistence); it stays below 2^53, exact in Lua's numbers.
   */
  static final LockScript ACQUIRE = acquireScript("acquire", "", HASH_LIVE, """
      if count == 0 then
        pttl = redis.call('pttl', KEYS[1])
        if pttl == -2 then
          pttl = nil
        end
      end
      """, """
      redis.call('hset', KEYS[1], ARGV[2], 1)
      redis.call('pexpire', KEYS[1], lease)
      pttl = lease
      """, HASH_REENTER);

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
  static final LockScript RELEASE = releaseScript("release", "", """
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
   *         'abandon': the hold is given up: remove the caller's field (even if the request
   *                    was resolved before, unless by an abandon)
   * ARGV[4] 'publish' or 'spublish'
   * ARGV[5] unlock channel
   * ARGV[6] how long the marker lives, in ms
   * returns {count, outcome}: the caller's count after settling, and 'd' if the request is known
   *         to have run (its marker said so), 'x' if it was settled before (and nothing was
   *         done), '' otherwise
   * </pre>
   */
  static final LockScript RESOLVE = resolveScript("resolve", "", """
      local last = target == 0 and count > 0 and redis.call('hlen', KEYS[1]) <= 1
      if last then
        redis.call(ARGV[4], ARGV[5], '0')
      end
      redis.call('set', KEYS[2], seal, 'px', ARGV[6])
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
   * Renew a batch of watchdog holds (in a cluster: of one slot, or of one Redis 7 node with
   * {@link #RENEW_ACROSS_SLOTS}). A renewal extends the
   * TTL to the lease and never shortens it: an open fixed-lease section of the same hold may have
   * been granted a longer TTL, which its holder goes on believing (contract 4).
   *
   * <pre>
   * KEYS[i]    lock key of hold i; for detail 'sections:...', its reader's first timeout key
   * ARGV[1]    lease in ms
   * ARGV[2i]   hash field of hold i
   * ARGV[2i+1] what else the hold's kind renews ({@link LockKind#renewalDetail}); '' for none;
   *            'read:<prefix>' for a read hold, whose own timeout keys are <prefix>:1..count;
   *            'sections:<prefix>' renews only those timeout keys (KEYS[i] is <prefix>:1):
   *            the second half of a read hold's renewal answered -2
   * returns a list with, for each hold, 1 if it was renewed (its TTL is now at least the lease),
   *   0 if it is no longer held, -1 if this node could not tell: a key of the hold is not
   *   served here (its slot moved, or is migrating and the key already left), so the hold must
   *   be renewed where its slot is now; or -2 for a read hold whose hash has its field here
   *   (the hash was renewed) but none of whose timeout keys is visible here: a slot migration
   *   may have split its keys (after ASKING, a key still on the source reads as missing), so
   *   its 'sections:' half must be renewed where they are, and tells whether it lives
   * </pre>
   *
   * Every access is a {@code redis.pcall}: a script spanning slots declares no keys, so Redis
   * cannot redirect it, and one key that is not local would otherwise abort the whole batch
   * ("Script attempted to access a non local key…"). A hold answered -1 may have been renewed
   * partly (some timeout keys of a read hold); renewing it again elsewhere is harmless.
   */
  static final LockScript RENEW = new LockScript("renew", """
      local function call(...)
        local reply = redis.pcall(...)
        if type(reply) == 'table' and reply.err then
          error(reply)
        end
        return reply
      end
      -- A lock key is given the lease if its TTL is shorter (or it has none); a timeout key
      -- only if it has a shorter one.
      local function extend(key, lease)
        if call('pttl', key) < lease then
          call('pexpire', key, lease)
        end
      end
      local function extend_section(key, ttl, lease)
        if ttl >= 0 and ttl < lease then
          call('pexpire', key, lease)
        end
      end
      -- A read hold (detail 'read:<its timeout key prefix>') lives while one of its own timeout
      -- keys does: renew those, never shortening, and keep the hash at least as long. A timeout
      -- key not served here (migrating, already left) is not visible: -2, renew them where they
      -- are. The hash is renewed while it has the field: the keys that do live need it.
      local function renew_reader(key, field, prefix, lease)
        local count = tonumber(call('hget', key, field) or '0')
        if count == 0 then
          return 0
        end
        local alive = 0
        for n = 1, count do
          local ok, ttl = pcall(call, 'pttl', prefix .. ':' .. n)
          if ok and ttl ~= -2 then
            alive = 1
            extend_section(prefix .. ':' .. n, ttl, lease)
          end
        end
        extend(key, lease)
        return alive == 1 and 1 or -2
      end
      -- The other half (detail 'sections:<prefix>', KEYS[i] its first): the timeout keys 1, 2,
      -- ... up to the first one that is missing or not served here (a reader's are numbered
      -- from 1 without gaps; on a migration's source, a missing one is not served).
      local function renew_sections(prefix, lease)
        local n = 1
        while true do
          local ok, ttl = pcall(call, 'pttl', prefix .. ':' .. n)
          if n == 1 and not ok then
            error(ttl)
          elseif not ok or ttl == -2 then
            return n > 1 and 1 or 0
          end
          extend_section(prefix .. ':' .. n, ttl, lease)
          n = n + 1
        end
      end
      local function renew(key, field, detail, lease)
        if string.sub(detail, 1, 5) == 'read:' then
          return renew_reader(key, field, string.sub(detail, 6), lease)
        elseif string.sub(detail, 1, 9) == 'sections:' then
          return renew_sections(string.sub(detail, 10), lease)
        elseif call('hexists', key, field) == 1 then
          extend(key, lease)
          return 1
        end
        return 0
      end
      local renewed = {}
      local lease = tonumber(ARGV[1])
      for i = 1, #KEYS do
        local ok, result = pcall(renew, KEYS[i], ARGV[2 * i], ARGV[2 * i + 1], lease)
        renewed[i] = ok and result or -1
      end
      return renewed
      """);

  /**
   * Changes nothing; sent with the last argument {@code auto}, it answers {@code {0, replicas}}:
   * how many replicas of the node can acknowledge writes now ({@link LockScript}).
   */
  static final LockScript ONLINE_REPLICAS = new LockScript("replicas", "return 0");

  /** {@link #RENEW} for a whole Redis 7+ cluster node in one call. */
  static final LockScript RENEW_ACROSS_SLOTS = RENEW.acrossSlots();

  /**
   * End a hold locally but keep the lock in Redis for a while (a {@code @Locked} method's
   * {@code holdAtLeast}): the key expires after exactly that long. The caller's field is renamed
   * {@code <field>:kept}, a field no thread has, so that the lock then excludes everyone, the
   * caller's own thread included (a field of its own would let it re-enter).
   *
   * <pre>
   * KEYS[1] lock key
   * KEYS[2] marker key of this request (same slot as the key)
   * ARGV[1] hash field of the caller
   * ARGV[2] how much longer the lock stays, in ms
   * ARGV[3] the hold count the caller believes it has (1: a keep always ends the hold)
   * ARGV[4] how long the marker lives, in ms
   * ARGV[5] 'publish' or 'spublish', ARGV[6] unlock channel: when the keep makes the lock expire
   *         sooner than it would have, its waiters are woken to learn the new expiry
   * returns 1  the caller held it: it now expires then (or this request had done so already)
   *         0  the caller does not hold it: nothing changed
   *         -2 the caller's count is not what it believes: nothing changed
   *         -3 this request was settled ({@link #RESOLVE}) before it arrived: nothing changed
   * </pre>
   *
   * Like a final release, a keep always leaves its marker, {@code d:0} (the caller's field has
   * count 0 now): a re-sent or delayed copy finding it answers 1 without applying, so it can
   * never rename or extend a later hold of the same thread; whether that later hold exists does
   * not matter, since the keep's answer grants nothing. A copy finding {@code x:} is refused.
   * The marker is checked before the count, the count before anything is written.
   */
  static final LockScript KEEP = keepScript("keep", "", HASH_KEPT, "true", """
      if redis.call('pttl', KEYS[1]) > tonumber(ARGV[2]) then
        redis.call(ARGV[5], ARGV[6], '0')
      end""", """
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], ARGV[1] .. ':kept', count)
      redis.call('pexpire', KEYS[1], ARGV[2])
      return 1
      """);


  /**
   * A force-release request runs once: {@code body} (the kind's, after its {@code helpers}) runs
   * only if the request's marker ({@code KEYS[#KEYS]}, the last key) is absent, and its reply is
   * recorded there. Any other copy of the request
   * — a send whose answer was lost and that arrives after the retry, or one held up until after
   * the call failed and was sealed ({@link #FORCE_SEAL}) — returns what was recorded ({@code -1}
   * if sealed) and changes nothing: a late copy must not delete a lock taken since. The marker's
   * lifetime is {@code ARGV[lifetimeArg]}, after the kind's arguments.
   */
  private static LockScript forceReleaseScript(String name, String helpers, int lifetimeArg,
      String body) {
    return new LockScript(name, ("""
        local once = KEYS[#KEYS]
        local ran = redis.call('get', once)
        if ran then
          return tonumber(ran)
        end
        """ + helpers + """
        local function force()
        """ + body + """
        end
        local result = force()
        redis.call('set', once, result, 'px', ARGV[@LIFETIME@])
        return result
        """).replace("@LIFETIME@", Integer.toString(lifetimeArg)));
  }

  /**
   * Delete the lock whoever holds it (once per request: {@link #forceReleaseScript}).
   *
   * <pre>
   * KEYS[1] lock key, then the kind's extra keys, then the request's marker
   * ARGV[1] 'publish' or 'spublish'
   * ARGV[2] unlock channel (same slot as the key)
   * then the kind's extra arguments, then the marker's lifetime (ms)
   * returns 1 if a lock was deleted, 0 if there was none (-1: the request was sealed)
   * </pre>
   */
  static final LockScript FORCE_RELEASE = forceReleaseScript("force-release", "", 3, """
      if redis.call('exists', KEYS[1]) == 1 then
        redis.call(ARGV[1], ARGV[2], '0')
        redis.call('del', KEYS[1])
        return 1
      end
      return 0
      """);

  /**
   * Seals a force-release request whose call failed (no answer): a copy still on its way finds
   * the marker and does nothing.
   *
   * <pre>
   * KEYS[1] the request's marker
   * ARGV[1] the marker's lifetime (ms)
   * returns 1 if a copy had run first (its reply is in the marker), 0 if sealed (now, or by an
   *     earlier send of this seal whose reply was lost)
   * </pre>
   */
  static final LockScript FORCE_SEAL = new LockScript("force-seal", """
      local ran = redis.call('get', KEYS[1])
      if ran then
        return ran == '-1' and 0 or 1
      end
      redis.call('set', KEYS[1], '-1', 'px', ARGV[1])
      return 0
      """);

  // ---- fair lock (FairKind): Redisson's RFairLock queue beside the exclusive lock's hash ----

  /**
   * What every fair script starts with. {@code Q}, {@code T}: the queue list and the scores'
   * sorted set; {@code now}: the server's clock in ms. {@code purge()} drops the waiters whose
   * deadline passed, wherever they stand, and a head without a score (no script leaves one; it
   * could only block the queue forever); it returns whether the head changed. {@code leave(f)}
   * takes one field out of the queue. {@code wakeHead(cmd, channel)} publishes Redisson's unlock
   * message {@code 0} to the head waiter's own channel, if there is a head ({@code wakeHead(cmd,
   * channel, 1)}: to the waiter behind it).
   *
   * <p><b>A new head is always woken.</b> Nothing is published when a lease runs out, and only the
   * head may take a free lock, so the head must never park longer than the lease of whoever holds
   * the lock. A waiter that is not the head may have parked far longer (it was told the time until
   * the head's deadline, while the lock was free); so every script that changes the head wakes the
   * new one, which re-polls and learns the holder's remaining lease: a grant wakes the waiter
   * behind the taker, a leave or purge that moves the head wakes the new head, whether or not the
   * lock is held, and so does a nested release that shortens the lock's expiry. One publish per
   * change of head; the first acquisition of a lock without waiters publishes nothing.
   */
  private static final String FAIR_COMMON = """
      local time = redis.call('time')
      local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
      local function purge(Q, T)
        local before = redis.call('lindex', Q, 0)
        local dead = redis.call('zrangebyscore', T, '-inf', string.format('%.0f', now))
        for i = 1, #dead do
          redis.call('lrem', Q, 0, dead[i])
        end
        if #dead > 0 then
          redis.call('zremrangebyscore', T, '-inf', string.format('%.0f', now))
        end
        while true do
          local head = redis.call('lindex', Q, 0)
          if not head or redis.call('zscore', T, head) then
            break
          end
          redis.call('lpop', Q)
        end
        return redis.call('lindex', Q, 0) ~= before
      end
      local function leave(Q, T, field)
        if redis.call('zrem', T, field) == 1 then
          redis.call('lrem', Q, 0, field)
        end
      end
      local function wakeHead(Q, cmd, channel, at)
        local head = redis.call('lindex', Q, at or 0)
        if head then
          redis.call(cmd, channel .. ':' .. head, '0')
        end
      end
      """;

  /**
   * {@link #ACQUIRE} for the fair lock: the same KEYS, ARGV and replies, then
   *
   * <pre>
   * KEYS[4] queue list, KEYS[5] scores' sorted set
   * ARGV[8] waiter timeout in ms, ARGV[9] 'publish'/'spublish', ARGV[10] lock channel
   * ARGV[11] '1' if the caller waits when refused (it queues), '0' for a single try
   * </pre>
   *
   * A fresh acquisition succeeds only if the lock is free and the queue is empty or the caller
   * is its head; it then leaves the queue. Otherwise the caller joins the queue's tail, or stays
   * where it is with a new deadline ({@code now + waiter timeout}), and the reply's pttl is how
   * long to park: the holder's remaining lease, or, when the lock is free but another waiter has
   * the turn, the time until that waiter's deadline (its turn passes if it never comes; it is
   * woken when it becomes the head). A taker that was the head wakes the waiter behind it, and a
   * purge that moved the head wakes the new head, held lock or not. A
   * re-sent (sealed) copy cannot enqueue twice: a field has one score, and a new score means a
   * new queue entry only when there was none. Re-entry ignores the queue, as the exclusive lock's.
   */
  static final LockScript FAIR_ACQUIRE = acquireScript("fair-acquire", FAIR_COMMON, HASH_LIVE,
      """
      local headChanged = purge(KEYS[4], KEYS[5])
      if count == 0 then
        local held = redis.call('exists', KEYS[1]) == 1
        local head = redis.call('lindex', KEYS[4], 0)
        if held or (head and head ~= ARGV[2]) then
          if headChanged and head ~= ARGV[2] then
            wakeHead(KEYS[4], ARGV[9], ARGV[10])
          end
          if ARGV[11] == '1' and redis.call('zadd', KEYS[5],
              string.format('%.0f', now + tonumber(ARGV[8])), ARGV[2]) == 1 then
            redis.call('lrem', KEYS[4], 0, ARGV[2])
            redis.call('rpush', KEYS[4], ARGV[2])
          end
          if held then
            pttl = redis.call('pttl', KEYS[1])
          else
            pttl = math.max(1, math.floor(tonumber(redis.call('zscore', KEYS[5], head)) - now))
          end
        elseif head then
          -- The caller takes it as the head: the waiter behind it becomes the head, re-polls and
          -- parks by this lease (published before any change, like every publish).
          wakeHead(KEYS[4], ARGV[9], ARGV[10], 1)
        end
      end
      """, """
      leave(KEYS[4], KEYS[5], ARGV[2])
      redis.call('hset', KEYS[1], ARGV[2], 1)
      redis.call('pexpire', KEYS[1], lease)
      pttl = lease
      """, HASH_REENTER);

  /**
   * {@link #RELEASE} for the fair lock (KEYS[3] queue, KEYS[4] scores; ARGV[8..10] as
   * {@link #FAIR_ACQUIRE}'s): the final release wakes the head waiter on its own channel instead
   * of every waiter on the lock channel; a nested one wakes it when it moved the head or made the
   * lock expire sooner than the head was told.
   */
  static final LockScript FAIR_RELEASE = releaseScript("fair-release", FAIR_COMMON, """
      local headChanged = purge(KEYS[3], KEYS[4])
      if count > 1 and ARGV[2] ~= '0' then
        if headChanged or redis.call('pttl', KEYS[1]) > tonumber(ARGV[2]) then
          wakeHead(KEYS[3], ARGV[4], ARGV[6])
        end
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. (count - 1), 'px', ARGV[5])
        end
        count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
        redis.call('pexpire', KEYS[1], ARGV[2])
        return count
      end
      wakeHead(KEYS[3], ARGV[4], ARGV[6])
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[5])
      redis.call('del', KEYS[1])
      return 0
      """);

  /**
   * {@link #RESOLVE} for the fair lock (KEYS[3] queue, KEYS[4] scores; ARGV[7..9] as
   * {@link #FAIR_ACQUIRE}'s ARGV[8..10]). Settling a fresh acquisition also takes the caller out
   * of the queue: the call it settles ends without the lock. A lock this frees, or a new head,
   * wakes the head.
   */
  static final LockScript FAIR_RESOLVE = resolveScript("fair-resolve", FAIR_COMMON, """
      local last = target == 0 and count > 0 and redis.call('hlen', KEYS[1]) <= 1
      -- Queue housekeeping first (harmless alone), then the calls that may be refused, then the
      -- change to the lock.
      local headChanged = purge(KEYS[3], KEYS[4])
      if ARGV[3] == 'acquire' and expected == 0 then
        local head = redis.call('lindex', KEYS[3], 0)
        leave(KEYS[3], KEYS[4], ARGV[1])
        headChanged = headChanged or head == ARGV[1]
      end
      if last or headChanged then
        wakeHead(KEYS[3], ARGV[4], ARGV[5])
      end
      redis.call('set', KEYS[2], seal, 'px', ARGV[6])
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
   * {@link #FORCE_RELEASE} for the fair lock (KEYS[2] queue, KEYS[3] scores; ARGV[3..5] as
   * {@link #FAIR_ACQUIRE}'s ARGV[8..10]): wakes the head waiter on its own channel.
   */
  static final LockScript FAIR_FORCE_RELEASE = forceReleaseScript("fair-force-release",
      FAIR_COMMON, 6, """
      purge(KEYS[2], KEYS[3])
      if redis.call('exists', KEYS[1]) == 1 then
        wakeHead(KEYS[2], ARGV[1], ARGV[2])
        redis.call('del', KEYS[1])
        return 1
      end
      return 0
      """);

  /**
   * {@link #KEEP} for the fair lock (KEYS[3] queue, KEYS[4] scores, after KEEP's KEYS and ARGV
   * the fair extras): a keep that makes the lock expire sooner wakes the head waiter on its own
   * channel, which parks by the holder's remaining lease.
   */
  static final LockScript FAIR_KEEP = keepScript("fair-keep", FAIR_COMMON, HASH_KEPT, "true",
      """
      if redis.call('pttl', KEYS[1]) > tonumber(ARGV[2]) then
        purge(KEYS[3], KEYS[4])
        wakeHead(KEYS[3], ARGV[5], ARGV[6])
      end""", """
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], ARGV[1] .. ':kept', count)
      redis.call('pexpire', KEYS[1], ARGV[2])
      return 1
      """);

  /**
   * A fair waiter gave up (timeout, interrupt, failure): it leaves the queue, and if that moved
   * the head the new head is woken: to take a free lock whose turn was passing to the one that
   * left, or to learn the lease of the holder it now waits for.
   *
   * <pre>
   * KEYS[1] lock key, KEYS[2] queue, KEYS[3] scores
   * ARGV[1] the waiter's field, ARGV[2] 'publish'/'spublish', ARGV[3] lock channel
   * returns 1
   * </pre>
   */
  static final LockScript FAIR_LEAVE = new LockScript("fair-leave", FAIR_COMMON + """
      local wasHead = redis.call('lindex', KEYS[2], 0) == ARGV[1]
      leave(KEYS[2], KEYS[3], ARGV[1])
      local headChanged = purge(KEYS[2], KEYS[3])
      if wasHead or headChanged then
        wakeHead(KEYS[2], ARGV[2], ARGV[3])
      end
      return 1
      """);

  // ---- Read-write lock (Redisson's RReadWriteLock layout) ----
  //
  // One hash at the lock key: field 'mode' = 'read' | 'write'; a reader's field <clientId>:<threadId>
  // holds its read count, the writer's field <clientId>:<threadId>:write its write count. Read
  // section n of a reader has its own timeout key <prefix>:<field>:rwlock_timeout:<n>, where the
  // prefix is the key's slotted form ({key}, or the key if it has a hash tag: Redisson's, see
  // LockNames for how locks a and {a} keep theirs apart); its TTL is that
  // reader's lease, and the hash lives at least as long as every live timeout key (and the
  // writer's lease). A reader field none of whose timeout keys lives belongs to a reader whose
  // lease ended (a crashed process): it is dead, and the scripts that look remove it. Unlock
  // channel redisson_rwlock:<slotted key>; '1' wakes every waiter (the lock is free to readers),
  // '0' one (the last reader left, or the lock expires sooner than waiters were told). Each
  // script takes the KEYS and ARGV of its exclusive
  // counterpart, then one extra key: the timeout key prefix.

  /** Lua helpers of every read-write lock script. */
  private static final String RW_HELPERS = """
      local function timeout_key(prefix, field, n)
        return prefix .. ':' .. field .. ':rwlock_timeout:' .. n
      end
      -- The longest TTL among the timeout keys 1..count of a reader: -2 if none lives, -1 if one
      -- never expires.
      local function reader_ttl(prefix, field, count)
        local longest = -2
        for n = 1, count do
          local ttl = redis.call('pttl', timeout_key(prefix, field, n))
          if ttl == -1 then
            return -1
          elseif ttl > longest then
            longest = ttl
          end
        end
        return longest
      end
      -- The readers other than skip: how many live, the longest TTL among them (0 if none), and
      -- the fields of the dead ones. Reads only.
      local function readers(key, prefix, skip)
        local live, longest, dead = 0, 0, {}
        local all = redis.call('hgetall', key)
        for i = 1, #all, 2 do
          local field = all[i]
          if field ~= 'mode' and field ~= skip and string.sub(field, -6) ~= ':write' then
            local ttl = reader_ttl(prefix, field, tonumber(all[i + 1]) or 0)
            if ttl == -2 then
              table.insert(dead, field)
            else
              live = live + 1
              longest = math.max(longest, ttl)
            end
          end
        end
        return live, longest, dead
      end
      local function drop_fields(key, fields)
        for _, field in ipairs(fields) do
          redis.call('hdel', key, field)
        end
      end
      local function drop_keys(prefix, field, from, to)
        for n = from, to do
          redis.call('del', timeout_key(prefix, field, n))
        end
      end
      -- Deletes the lock and every reader's timeout keys.
      local function delete_lock(key, prefix)
        local all = redis.call('hgetall', key)
        for i = 1, #all, 2 do
          if all[i] ~= 'mode' and string.sub(all[i], -6) ~= ':write' then
            drop_keys(prefix, all[i], 1, tonumber(all[i + 1]) or 0)
          end
        end
        redis.call('del', key)
      end
      """;

  /**
   * {@link #ACQUIRE} of the write side (ARGV[2] is {@code <clientId>:<threadId>:write}), plus
   * {@code KEYS[4]} the timeout key prefix. A fresh acquisition succeeds when the key is absent,
   * or in read mode with only dead readers (removed, and the lock taken); readers hold it off,
   * including the caller's own (an upgrade is refused by the client before it gets here).
   */
  static final LockScript RW_WRITE_ACQUIRE = acquireScript("rw-write-acquire", RW_HELPERS + """
      -- Whether the key holds only readers whose leases ended: taking the lock deletes it first.
      local stale = false
      """, HASH_LIVE, """
      if count == 0 and redis.call('exists', KEYS[1]) == 1 then
        local others, longest, dead = 1, 0, {}
        if redis.call('hget', KEYS[1], 'mode') == 'read' then
          others, longest, dead = readers(KEYS[1], KEYS[4], '')
        end
        if others > 0 then
          drop_fields(KEYS[1], dead)
          pttl = redis.call('pttl', KEYS[1])
        else
          stale = true
        end
      end
      """, """
      if stale then
        redis.call('del', KEYS[1])
      end
      redis.call('hset', KEYS[1], 'mode', 'write')
      redis.call('hset', KEYS[1], ARGV[2], 1)
      pttl = redis.call('pttl', KEYS[1])
      if pttl < lease then
        redis.call('pexpire', KEYS[1], lease)
        pttl = lease
      end
      """, HASH_REENTER);

  /**
   * {@link #RELEASE} of the write side, plus {@code KEYS[3]} the timeout key prefix. An inner
   * release keeps the hash at least as long as the caller's own read sections. The final release
   * publishes {@code 1}: the lock becomes free, or, if the writer holds read sections too, it is
   * downgraded (mode read), and waiting readers may enter either way.
   */
  static final LockScript RW_WRITE_RELEASE = releaseScript("rw-write-release", RW_HELPERS, """
      local prefix = KEYS[3]
      if count > 1 and ARGV[2] ~= '0' then
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. (count - 1), 'px', ARGV[5])
        end
        count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
        local live, longest = readers(KEYS[1], prefix, '')
        redis.call('pexpire', KEYS[1], math.max(tonumber(ARGV[2]), longest))
        return count
      end
      local live, longest, dead = readers(KEYS[1], prefix, '')
      redis.call(ARGV[4], ARGV[6], '1')
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[5])
      if live == 0 then
        redis.call('del', KEYS[1])
      else
        drop_fields(KEYS[1], dead)
        redis.call('hdel', KEYS[1], ARGV[1])
        redis.call('hset', KEYS[1], 'mode', 'read')
        if longest > 0 then
          redis.call('pexpire', KEYS[1], longest)
        end
      end
      return 0
      """);

  /** {@link #RESOLVE} of the write side, plus {@code KEYS[3]} the timeout key prefix. */
  static final LockScript RW_WRITE_RESOLVE = resolveScript("rw-write-resolve", RW_HELPERS, """
      local prefix = KEYS[3]
      if target == 0 and count > 0 then
        local live, longest, dead = readers(KEYS[1], prefix, '')
        redis.call(ARGV[4], ARGV[5], '1')
        redis.call('set', KEYS[2], seal, 'px', ARGV[6])
        if live == 0 then
          redis.call('del', KEYS[1])
        else
          drop_fields(KEYS[1], dead)
          redis.call('hdel', KEYS[1], ARGV[1])
          redis.call('hset', KEYS[1], 'mode', 'read')
          if longest > 0 then
            redis.call('pexpire', KEYS[1], longest)
          end
        end
        return {0, outcome}
      end
      redis.call('set', KEYS[2], seal, 'px', ARGV[6])
      if target ~= count then
        redis.call('hset', KEYS[1], ARGV[1], target)
      end
      return {target, outcome}
      """);
  /**
   * {@link #FORCE_RELEASE} of the write side ({@code KEYS[2]} the timeout key prefix): deletes
   * the lock only in write mode, as Redisson's write lock does.
   */
  static final LockScript RW_WRITE_FORCE_RELEASE = forceReleaseScript("rw-write-force-release",
      RW_HELPERS, 3, """
      if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
        return 0
      end
      redis.call(ARGV[1], ARGV[2], '1')
      delete_lock(KEYS[1], KEYS[2])
      return 1
      """);

  /**
   * {@link #KEEP} of the write side, same KEYS, ARGV and replies, plus {@code KEYS[3]} the
   * timeout key prefix: the hash expires after that long, or when the caller's own read sections
   * end if later.
   */
  static final LockScript RW_WRITE_KEEP = keepScript("rw-write-keep", RW_HELPERS,
      "redis.call('hexists', KEYS[1], string.sub(ARGV[1], 1, -7) .. ':kept:write') == 1", "true",
      """
      local live, longest = readers(KEYS[1], KEYS[3], '')
      local expiry = math.max(tonumber(ARGV[2]), longest)
      if redis.call('pttl', KEYS[1]) > expiry then
        redis.call(ARGV[5], ARGV[6], '1')
      end""", """
      -- Renamed to a writer field no thread has (still ending ':write'), so that the kept lock
      -- excludes the writer's own thread as well.
      local kept = string.sub(ARGV[1], 1, -7) .. ':kept:write'
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], kept, count)
      redis.call('pexpire', KEYS[1], expiry)
      return 1
      """);

  /**
   * {@link #ACQUIRE} of the read side (ARGV[2] is {@code <clientId>:<threadId>}), plus
   * {@code KEYS[4]} the timeout key prefix. A fresh acquisition succeeds in read mode, when the
   * key is absent, or in write mode when the caller holds the write lock (the first step of a
   * downgrade). Each section n opens timeout key n with the section's lease; the hash never
   * expires before it. The pttl replied is this reader's own (its longest timeout key), not the
   * hash's, which other readers may keep longer. A read hold is live while one of its own timeout
   * keys is: a re-entry or replay finding none is answered as a hold that is gone.
   */
  static final LockScript RW_READ_ACQUIRE = acquireScript("rw-read-acquire", RW_HELPERS + """
      local prefix = KEYS[4]
      local function open(n)
        redis.call('set', timeout_key(prefix, ARGV[2], n), 1, 'px', lease)
        if redis.call('pttl', KEYS[1]) < lease then
          redis.call('pexpire', KEYS[1], lease)
        end
      end
      """, """
      pttl = reader_ttl(prefix, ARGV[2], count)
      if pttl == 0 or pttl == -2 then
        pttl = nil
      end
      """, """
      if count == 0 and redis.call('exists', KEYS[1]) == 1 then
        local mode = redis.call('hget', KEYS[1], 'mode')
        if mode ~= 'read' and not (mode == 'write'
            and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 1) then
          pttl = redis.call('pttl', KEYS[1])
        end
      end
      """, """
      redis.call('hsetnx', KEYS[1], 'mode', 'read')
      redis.call('hset', KEYS[1], ARGV[2], 1)
      open(1)
      pttl = lease
      """, """
      if count == expected then
        count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
        open(count)
      elseif redis.call('pttl', timeout_key(prefix, ARGV[2], count)) < lease then
        open(count)
      end
      pttl = reader_ttl(prefix, ARGV[2], count)
      """);

  /**
   * {@link #RELEASE} of the read side, plus {@code KEYS[3]} the timeout key prefix. An inner
   * release deletes the newest section's timeout key and gives the sections left
   * {@code ARGV[2]}. A reader's last release removes its field and keys, and readers found dead;
   * if no reader is left in read mode the lock is deleted and {@code 0} published (Redisson's
   * read unlock message). In read mode the hash then expires with the longest live reader; if
   * that is sooner than before, {@code 0} is published too, so that a waiter parked until the
   * old expiry (a writer waiting out a crashed reader) looks again. A reader whose lease already
   * ended is removed the same way, and answered -1.
   */
  static final LockScript RW_READ_RELEASE = releaseScript("rw-read-release", RW_HELPERS, """
      local prefix = KEYS[3]
      local alive = reader_ttl(prefix, ARGV[1], count) ~= -2
      local mode = redis.call('hget', KEYS[1], 'mode')
      local live, longest, dead = readers(KEYS[1], prefix, ARGV[1])
      if alive and count > 1 and ARGV[2] ~= '0' then
        longest = math.max(longest, tonumber(ARGV[2]))
        if mode == 'read' and longest < redis.call('pttl', KEYS[1]) then
          redis.call(ARGV[4], ARGV[6], '0') -- a waiter parked until the old expiry looks again
        end
        if ARGV[7] == '1' then
          redis.call('set', KEYS[2], 'd:' .. (count - 1), 'px', ARGV[5])
        end
        redis.call('del', timeout_key(prefix, ARGV[1], count))
        count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
        for n = 1, count do
          redis.call('set', timeout_key(prefix, ARGV[1], n), 1, 'px', ARGV[2])
        end
        if mode == 'read' or redis.call('pttl', KEYS[1]) < longest then
          redis.call('pexpire', KEYS[1], longest)
        end
        return count
      end
      local free = mode ~= 'write' and live == 0
      if free or (mode == 'read' and longest > 0 and longest < redis.call('pttl', KEYS[1])) then
        -- Freed, or expiring sooner: a waiter parked until the old expiry looks again.
        redis.call(ARGV[4], ARGV[6], '0')
      end
      if alive then
        redis.call('set', KEYS[2], 'd:0', 'px', ARGV[5])
      elseif ARGV[7] == '1' then
        -- A dead reader's release is refused (-1); sealed, recorded like every refusal.
        redis.call('set', KEYS[2], 'r:-1:' .. count, 'px', ARGV[5])
      end
      drop_keys(prefix, ARGV[1], 1, count)
      if free then
        redis.call('del', KEYS[1])
      else
        drop_fields(KEYS[1], dead)
        redis.call('hdel', KEYS[1], ARGV[1])
        if mode == 'read' and longest > 0 then
          redis.call('pexpire', KEYS[1], longest)
        end
      end
      if alive then
        return 0
      end
      return -1
      """);

  /** {@link #RESOLVE} of the read side, plus {@code KEYS[3]} the timeout key prefix. */
  static final LockScript RW_READ_RESOLVE = resolveScript("rw-read-resolve", RW_HELPERS, """
      local prefix = KEYS[3]
      local mode = redis.call('hget', KEYS[1], 'mode')
      if target == count or count == 0 then
        redis.call('set', KEYS[2], seal, 'px', ARGV[6])
        return {target, outcome}
      end
      local live, longest, dead = readers(KEYS[1], prefix, ARGV[1])
      if target > 0 then
        -- Undo the newest section: the caller's own sections left count too.
        longest = math.max(longest, reader_ttl(prefix, ARGV[1], target))
        live = live + 1
      end
      local free = mode ~= 'write' and live == 0
      if free or (mode == 'read' and longest > 0 and longest < redis.call('pttl', KEYS[1])) then
        redis.call(ARGV[4], ARGV[5], '0')
      end
      redis.call('set', KEYS[2], seal, 'px', ARGV[6])
      drop_keys(prefix, ARGV[1], target + 1, count)
      if free then
        redis.call('del', KEYS[1])
        return {0, outcome}
      end
      drop_fields(KEYS[1], dead)
      if target == 0 then
        redis.call('hdel', KEYS[1], ARGV[1])
      else
        redis.call('hset', KEYS[1], ARGV[1], target)
      end
      if mode == 'read' and longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
      end
      return {target, outcome}
      """);
  /**
   * {@link #FORCE_RELEASE} of the read side ({@code KEYS[2]} the timeout key prefix): deletes the
   * lock, and every reader's timeout keys, only in read mode, as Redisson's read lock does.
   */
  static final LockScript RW_READ_FORCE_RELEASE = forceReleaseScript("rw-read-force-release",
      RW_HELPERS, 3, """
      if redis.call('hget', KEYS[1], 'mode') ~= 'read' then
        return 0
      end
      redis.call(ARGV[1], ARGV[2], '1')
      delete_lock(KEYS[1], KEYS[2])
      return 1
      """);

  /**
   * {@link #KEEP} of the read side, same KEYS, ARGV and replies, plus {@code KEYS[3]} the timeout
   * key prefix: the caller's read sections move to the field {@code <field>:kept}, a reader no
   * thread is (so the caller's own later write or read lock does not take them for its own), with
   * timeout keys that expire after that long; in read mode the hash then expires with the longest
   * live reader. Sections kept earlier by the same thread and still there are added to, not
   * replaced.
   */
  static final LockScript RW_READ_KEEP = keepScript("rw-read-keep", RW_HELPERS,
      "reader_ttl(KEYS[3], ARGV[1] .. ':kept', "
          + "tonumber(redis.call('hget', KEYS[1], ARGV[1] .. ':kept') or '0')) ~= -2",
      "reader_ttl(KEYS[3], ARGV[1], count) ~= -2", "", """
      local kept = ARGV[1] .. ':kept'
      local base = tonumber(redis.call('hget', KEYS[1], kept) or '0')
      for n = 1, count do
        redis.call('del', timeout_key(KEYS[3], ARGV[1], n))
        redis.call('set', timeout_key(KEYS[3], kept, base + n), 1, 'px', ARGV[2])
      end
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], kept, base + count)
      local live, longest, dead = readers(KEYS[1], KEYS[3], '')
      drop_fields(KEYS[1], dead)
      if longest > 0 and (redis.call('hget', KEYS[1], 'mode') == 'read'
          or redis.call('pttl', KEYS[1]) < longest) then
        redis.call('pexpire', KEYS[1], longest)
      end
      return 1
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
   *         {0, 0}       handed over by an earlier copy, but the waiter's hold has ended since:
   *                      the releaser's hold is over, the waiter holds nothing
   *         {-1, 0}      the releaser does not hold the lock: nothing changed
   *         {-2, count}  the releaser's count is not 1: nothing changed
   *         {-3, 0}      one of the requests was settled or answered otherwise: nothing changed
   * </pre>
   *
   * Both markers are always written: {@code d:0} answers a re-sent release of the releaser's
   * request ("done, the hold ended"), {@code d:1} a re-sent acquisition of the waiter's request
   * ("granted"), and a copy of this call arriving after either was settled or answered by
   * {@link #RESOLVE}, {@link #RELEASE} or {@link #ACQUIRE} changes nothing. A copy finding the
   * pair this call writes is its own replay: it answers as the call did only while the waiter
   * still holds count 1, else {@code {0, 0}}.
   */
  static final LockScript TRANSFER = new LockScript("transfer", """
      local released = redis.call('get', KEYS[2])
      local granted = redis.call('get', KEYS[3])
      if released or granted then
        if released == 'd:0' and granted == 'd:1' then
          -- Its own replay. The grant counts only while it is still true: the waiter's field
          -- has the count 1 it was given (its lease may have ended, and the lock gone to
          -- someone else, since the first run).
          if redis.call('hget', KEYS[1], ARGV[2]) == '1' then
            return {1, redis.call('pttl', KEYS[1])}
          end
          return {0, 0}
        end
        local reply, found = string.match(released or '', '^r:(%-?%d+):(%d+)')
        if reply then
          return {tonumber(reply), tonumber(found)} -- its own refusal, answered again
        end
        return {-3, 0}
      end
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
      if count ~= 1 then
        -- Refused: recorded, so that a late copy can never hand over a later hold.
        local reply = count == 0 and -1 or -2
        redis.call('set', KEYS[2], 'r:' .. reply .. ':' .. count, 'px', ARGV[4])
        return {reply, count}
      end
      redis.call('set', KEYS[2], 'd:0', 'px', ARGV[4])
      redis.call('set', KEYS[3], 'd:1', 'px', ARGV[4])
      redis.call('hdel', KEYS[1], ARGV[1])
      redis.call('hset', KEYS[1], ARGV[2], 1)
      redis.call('pexpire', KEYS[1], ARGV[3])
      return {1, tonumber(ARGV[3])}
      """);
}
