package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fifth round of attacks on the multi-lock's owed record (commit b3754b9): the RedLock member's
 * hold-identity check ({@code Due.memberHolds}), composite identities
 * ({@code LockGroup#identity}) and a nested multi-lock owed only while it keeps its own record
 * ({@code MultiLock#owes}). Client A talks to Redis directly, B through a {@link BlackHoleProxy}.
 * Two probes showed that a RedLock's identity depended on its members' order (a new handle with
 * them reordered missed the record; the same RedLock twice was accepted), fixed since: a
 * RedLock is identified by the set of its members. One stays disabled (a DEFECT, not fixed).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttack5Test extends MultiLockOwedFixture {

  /**
   * RedLock(r1 on client C, r2 and r3 through B) in a multi-lock held twice; the failed unlock
   * releases r1 and leaves r2, r3 (a majority) with a release not run. Client C (one minority
   * member's client) is closed. Held: the RedLock's owed release is still retried and r2, r3
   * end up released (the check keeps the closed member's hold as recorded).
   */
  @Test
  void redLockMember_minorityClientClosed_majorityStillReleased() {
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    DistributedLock red = a.getRedLock(c.getLock("r51-1"), b.getLock("r51-2"),
        b.getLock("r51-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a51"), red);
    takeTwiceThenFailUnlock(multi); // A 1, r1 1; r2, r3 2 (not run)
    c.close();
    System.out.println("completion: " + unlockOutcome(multi));
    System.out.println("last: " + unlockOutcome(multi));
    assertFalse(redisState.exists("a51"));
    assertFalse(redisState.exists("r51-2"), "r2: " + redisState.hget("r51-2",
        RedisProbe.fieldOf(b)));
    assertFalse(redisState.exists("r51-3"));
  }

  /**
   * A new multi-lock handle over a new RedLock handle whose members are given in another order.
   * A RedLock is a set of votes: the order means nothing, but its identity is an ordered list,
   * so the record is not found and r2, r3 are re-entered on top of the release not run.
   */
  @Test
  void redLockMember_newHandleMembersReordered_findsRecord() {
    DistributedLock multi = a.getMultiLock(a.getLock("a52"), a.getRedLock(a.getLock("r52-1"),
        b.getLock("r52-2"), b.getLock("r52-3")));
    takeTwiceThenFailUnlock(multi);
    DistributedLock again = a.getMultiLock(a.getLock("a52"), a.getRedLock(b.getLock("r52-2"),
        a.getLock("r52-1"), b.getLock("r52-3")));
    again.lock();
    System.out.println("r2 after relock: " + redisState.hget("r52-2", RedisProbe.fieldOf(b)));
    System.out.println("again: " + unlockOutcome(again));
    System.out.println("multi: " + unlockOutcome(multi));
    assertFalse(redisState.exists("a52"));
    assertFalse(redisState.exists("r52-2"), "r2: " + redisState.hget("r52-2",
        RedisProbe.fieldOf(b)));
    assertFalse(redisState.exists("r52-3"));
  }

  /**
   * Nested multi-lock [x on A, foreign lock over B's f] inside an outer multi-lock [nested, w on
   * C]; both held twice. The outer unlock fails on f (release not run). Was a defect: the
   * nested multi-lock kept its record in A's store only (the foreign lock has no engine), so
   * closing A dropped it, {@code owes} said false and the outer dropped f's owed section: f (on
   * B, open) stayed held for ever. A record owing a lock outside its direct members' engines is
   * now kept in the static store.
   */
  @Test
  void nestedMulti_libraryClientClosed_foreignMemberStillReleased() {
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    LockClient direct = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    DistributedLock foreign = hook(b.getLock("f53"), null, null);
    DistributedLock nested = direct.getMultiLock(direct.getLock("x53"), foreign);
    DistributedLock outer = c.getMultiLock(nested, c.getLock("w53"));
    takeTwiceThenFailUnlock(outer); // w 1, x 1; f 2 (not run)
    direct.close();
    unlockOutcome(outer); // the completion: the nested one's foreign member is still owed
    unlockOutcome(outer); // the outer section
    assertFalse(redisState.exists("w53"));
    assertFalse(redisState.exists("f53"), "f: " + redisState.hget("f53",
        RedisProbe.fieldOf(b)));
  }

  /**
   * The thread re-enters the RedLock alone (same holds, count + 1) between the failed unlock
   * and the next acquisition: the owed release is still the multi-lock's, retried; the
   * thread's own section survives both multi-lock unlocks and its own unlock ends everything.
   */
  @Test
  void redLockMember_reenteredAloneBeforeRelock_ownSectionSurvives() {
    DistributedLock red = a.getRedLock(a.getLock("r54-1"), b.getLock("r54-2"),
        b.getLock("r54-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a54"), red);
    takeTwiceThenFailUnlock(multi);
    red.lock(); // re-entry of the same holds
    multi.lock();
    assertTrue(unlockOutcome(multi) == null);
    assertTrue(unlockOutcome(multi) == null);
    assertTrue(red.isHeldByCurrentThread(), "the thread's own RedLock section survives");
    red.unlock();
    assertFalse(redisState.exists("a54"));
    assertFalse(redisState.exists("r54-2"));
    assertFalse(redisState.exists("r54-3"));
  }

  /**
   * A multi-lock holding a RedLock and, directly, one of the RedLock's own members (distinct
   * identities, so allowed): the failed unlock leaves the direct member's and the RedLock's
   * releases on B not run; the next acquisition and two unlocks leave nothing held.
   */
  @Test
  void redLockAndItsOwnMemberDirectly_releaseNotRun_countsMatch() {
    DistributedLock red = a.getRedLock(b.getLock("r55-1"), b.getLock("r55-2"),
        a.getLock("r55-3"));
    DistributedLock multi = a.getMultiLock(b.getLock("r55-1"), red);
    takeTwiceThenFailUnlock(multi);
    multi.lock();
    System.out.println("r1 after relock: " + redisState.hget("r55-1", RedisProbe.fieldOf(b)));
    System.out.println("1: " + unlockOutcome(multi));
    System.out.println("2: " + unlockOutcome(multi));
    assertFalse(redisState.exists("r55-1"), "r1: " + redisState.hget("r55-1",
        RedisProbe.fieldOf(b)));
    assertFalse(redisState.exists("r55-2"));
  }

  /**
   * Two RedLocks over the same locks in different order have different identities, so one
   * multi-lock may hold both (one server's vote counted twice in one composite). LockGroup.of
   * rejects two handles of the same RedLock; a reordered one is the same RedLock.
   */
  @Test
  void twoRedLocksSameMembersReordered_rejected() {
    IllegalArgumentException thrown = null;
    try {
      a.getMultiLock(a.getRedLock(a.getLock("r56-1"), a.getLock("r56-2"), a.getLock("r56-3")),
          a.getRedLock(a.getLock("r56-2"), a.getLock("r56-1"), a.getLock("r56-3")));
    } catch (IllegalArgumentException e) {
      thrown = e;
    }
    assertTrue(thrown != null, "the same RedLock twice is rejected");
  }
}
