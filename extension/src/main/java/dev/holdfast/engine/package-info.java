/**
 * The framework-free lock engine: Lua scripts, Redis topologies (Jedis), waiting on unlock
 * messages, the lease watchdog and configuration parsing.
 *
 * <p><b>Not API.</b> The few public types here are public only so that {@code dev.holdfast} and
 * {@code dev.holdfast.cdi} can reach them; they may change in any release. This package imports
 * nothing from {@code jakarta.*} or {@code org.eclipse.microprofile.*}, so that Holdfast works with
 * no container at all.
 */
package dev.holdfast.engine;
