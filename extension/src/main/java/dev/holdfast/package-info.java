/**
 * Holdfast's public API: reentrant distributed locks on Redis.
 *
 * <p>Start with {@link dev.holdfast.LockClient}: create one per application (it owns the Redis
 * connections and the lease watchdog), take cheap {@link dev.holdfast.DistributedLock} handles from
 * it with {@link dev.holdfast.LockClient#getLock(String)}, and close it at shutdown.
 *
 * <p><b>When a lock is lost</b> while its holder still works (a renewal that cannot reach Redis,
 * a failover, another client's {@code forceUnlock}, a long pause), Holdfast offers four defences,
 * from the cheapest: it is reported ({@link dev.holdfast.LockLost}, and the final release says
 * so); a JTA transaction that would commit under it is rolled back
 * ({@link dev.holdfast.CommitGuard}, automatic for {@link dev.holdfast.Locked @Locked} methods);
 * the running call can be interrupted or its result cancelled
 * ({@link dev.holdfast.Locked#onLoss()}); and a
 * {@linkplain dev.holdfast.FencedLock fencing token} lets the protected resource refuse the late
 * writes that no client-side check can stop.
 *
 * <p>Only the types in this package are for users. {@code dev.holdfast.engine} and
 * {@code dev.holdfast.cdi} are implementation and may change in any release.
 */
package dev.holdfast;
