package dev.holdfast.benchmarks;

import java.util.Arrays;

/**
 * The entry point of {@code benchmarks/target/benchmarks.jar} (built by
 * {@code ./mvnw -B -q -pl benchmarks -am package -Pbench -DskipTests -Dexec.skip}):
 * {@code java -jar benchmarks/target/benchmarks.jar <command> [arguments]} with the commands
 * <ul>
 *   <li>{@code side-by-side [scenario...] [--rounds N] [--seconds S] [--smoke] ...}:
 *       {@link SideBySideBenchmark}, Holdfast beside Redisson and the protocol floor;</li>
 *   <li>{@code jmh [JMH options]}: the JMH micro-benchmarks of this jar ({@link HandleBenchmark}),
 *       e.g. {@code jmh -f 1 -wi 3 -i 5}; {@code jmh -h} lists JMH's options;</li>
 *   <li>{@code sync-replicas-cost [ops rounds]}: {@link SyncReplicasBenchmark};</li>
 *   <li>{@code observation [ops rounds modes...]}: {@link ObservationBenchmark};</li>
 *   <li>{@code script-cost [pairs]}: {@link ScriptCost}, the Redis-side cost of one
 *       uncontended lock+unlock per implementation;</li>
 *   <li>{@code virtual-threads [--threads N --calls C --names K --burn B ...]}:
 *       {@link VirtualThreadsBenchmark}, a burst of virtual threads, Holdfast beside Redisson
 *       (needs Java 21 or later);</li>
 *   <li>{@code virtual-threads-memory [--threads N --names K ...]}:
 *       {@link WaiterMemoryBenchmark}, heap per waiting virtual thread (Java 21 or later).</li>
 * </ul>
 */
public final class Main {

  private Main() {
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      System.err.println("usage: java -jar benchmarks.jar side-by-side|jmh|sync-replicas-cost"
          + "|observation|script-cost|virtual-threads|virtual-threads-memory [arguments]; see dev.holdfast.benchmarks.Main");
      System.exit(2);
    }
    String[] rest = Arrays.copyOfRange(args, 1, args.length);
    switch (args[0]) {
      case "side-by-side" -> System.exit(SideBySideBenchmark.run(rest));
      case "jmh" -> org.openjdk.jmh.Main.main(rest);
      case "sync-replicas-cost" -> SyncReplicasBenchmark.main(rest);
      case "observation" -> ObservationBenchmark.main(rest);
      case "script-cost" -> ScriptCost.main(rest);
      case "virtual-threads" -> System.exit(VirtualThreadsBenchmark.run(rest));
      case "virtual-threads-memory" -> System.exit(WaiterMemoryBenchmark.run(rest));
      default -> {
        System.err.println("unknown command " + args[0]
            + ": side-by-side, jmh, sync-replicas-cost, observation, script-cost, virtual-threads"
            + " or virtual-threads-memory");
        System.exit(2);
      }
    }
  }
}
