/**
 * holdfast-testing: real Redis for tests (add {@code dev.holdfast:holdfast-testing} in test
 * scope) — a single
 * server ({@link dev.holdfast.testing.RedisServer}), Sentinel
 * ({@link dev.holdfast.testing.RedisSentinelSetup}) and Cluster
 * ({@link dev.holdfast.testing.RedisClusterSetup}) topologies, the JUnit 5
 * {@link dev.holdfast.testing.RedisExtension} that owns one per test class, and
 * {@link dev.holdfast.testing.Await} for waiting on conditions instead of sleeping.
 *
 * <p>Servers run on a {@link dev.holdfast.testing.RedisBackend}: Testcontainers when a Docker
 * engine is available, else {@code redis-server} on the {@code PATH}, else the embedded binary;
 * {@code -Dholdfast.testing.backend} picks one. {@link dev.holdfast.testing.QuarkusRedisTestResource}
 * serves {@code @QuarkusTest}s.
 *
 * <p>Test code only; not part of Holdfast's API. Every process is started by and killed by this
 * package (explicitly, or by a shutdown hook), listens on 127.0.0.1 only and persists nothing
 * unless asked to ({@code --appendonly yes}). {@link dev.holdfast.testing.FaultProxy} sits between
 * a client and a server to drop replies, delay, black-hole or reset connections.
 * The binary is {@code redis-server} from {@code PATH}, else the one bundled in
 * {@code org.signal:embedded-redis}; {@code -Dholdfast.redis-server=<path>|embedded} overrides.
 */
package dev.holdfast.testing;
