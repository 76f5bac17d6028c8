package dev.holdfast.engine;

/**
 * The answer of one Redis node to {@link LockEngine#ping()}.
 *
 * @param node    {@code host:port}, or a description where no single node applies (e.g. slots
 *                that no primary serves); never credentials
 * @param role    {@code standalone}, {@code master} (Sentinel) or {@code primary} (Cluster)
 * @param up      whether it answered {@code PONG}
 * @param millis  how long it took, when it answered
 * @param error   why not, when it did not: the error's message, without credentials
 */
public record NodeStatus(String node, String role, boolean up, double millis, String error) {
}
