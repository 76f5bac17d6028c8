package dev.holdfast.benchmarks;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisServer;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * In-process figures, JMH: what a lock handle costs — {@code LockClient.getLock(name)} against
 * Redisson's {@code getLock(name)} — once with a fixed name and once with a name built per call
 * (as a {@code @Locked} name rendered from a parameter would be). Neither call talks to Redis;
 * the server (a local redis-server) is there because both clients connect when created.
 *
 * <p>Not measured here, and why: rendering a {@code @Locked} name template
 * ({@code dev.holdfast.cdi.LockNameTemplate} is package-private, reachable only through the CDI
 * interceptor) and the interceptor itself (needs a CDI container in the benchmark); a CDI-level
 * benchmark on Weld SE would measure both.
 *
 * <p>Run: {@code java -jar benchmarks/target/benchmarks.jar jmh HandleBenchmark} (defaults below:
 * 1 fork, 3 x 1 s warm-up, 5 x 1 s measurement); a smoke run:
 * {@code ... jmh HandleBenchmark -wi 0 -i 1 -r 1s}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class HandleBenchmark {

  private RedisServer redis;
  private LockClient holdfast;
  private RedissonClient redisson;
  private long sequence;

  @Setup(Level.Trial)
  public void start() {
    redis = RedisServer.start();
    holdfast = LockClient.create(LockClientConfig.builder().address(redis.uri()).build());
    Config config = new Config();
    config.useSingleServer().setAddress(redis.uri());
    redisson = Redisson.create(config);
  }

  @TearDown(Level.Trial)
  public void stop() {
    redisson.shutdown(0, 2, TimeUnit.SECONDS);
    holdfast.close();
    redis.close();
  }

  @Benchmark
  public DistributedLock holdfastGetLock() {
    return holdfast.getLock("orders:42");
  }

  @Benchmark
  public RLock redissonGetLock() {
    return redisson.getLock("orders:42");
  }

  @Benchmark
  public DistributedLock holdfastGetLockBuiltName() {
    return holdfast.getLock("orders:" + sequence++);
  }

  @Benchmark
  public RLock redissonGetLockBuiltName() {
    return redisson.getLock("orders:" + sequence++);
  }
}
