/**
 * Holdfast's public API: reentrant distributed locks on Redis.
 *
 * <p>Start with {@link dev.holdfast.LockClient}: create one per application (it owns the Redis
 * connections and the lease watchdog), take cheap {@link dev.holdfast.DistributedLock} handles from
 * it with {@link dev.holdfast.LockClient#getLock(String)}, and close it at shutdown.
 *
 * <p>Only the types in this package are for users. {@code dev.holdfast.engine} and
 * {@code dev.holdfast.cdi} are implementation and may change in any release.
 */
package dev.holdfast;
