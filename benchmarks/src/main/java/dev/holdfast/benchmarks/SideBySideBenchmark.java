package dev.holdfast.benchmarks;

import dev.holdfast.benchmarks.Scenario.Figure;
import dev.holdfast.benchmarks.Scenario.Options;
import dev.holdfast.benchmarks.Scenario.Topology;
import dev.holdfast.benchmarks.Scenario.Unit;
import dev.holdfast.testing.RedisBackend;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import redis.clients.jedis.Jedis;

/**
 * Holdfast and Redisson 4.7 side by side, in one run, on the same local redis-server (started on
 * a free 127.0.0.1 port by {@code holdfast-testing}), beside the <em>protocol floor</em>: the two
 * classic scripts of the lock layout sent with raw Jedis {@code EVALSHA} (see
 * {@link ProtocolFloor}). The implementations alternate within every round (the order reversed
 * each round), each measured with a fresh client, so that machine noise hits all alike; the
 * table gives the median over the rounds of each figure and the median of the per-round ratios.
 *
 * <p>Scenarios (select by name; all by default):
 * <ul>
 *   <li>{@code uncontended-1}, {@code uncontended-16}: {@code lock()} + {@code unlock()} per
 *       second, 1 thread and 16 threads on keys of their own; with the floor;</li>
 *   <li>{@code hot-key-16}: 16 threads of one client on one key; {@code hot-key-2x8}: two
 *       clients of 8 threads on one key;</li>
 *   <li>{@code handoff}: latency (p50, p99) from a holder's {@code unlock()} to a waiter in
 *       another client returning from {@code lock()};</li>
 *   <li>{@code watchdog}: 10,000 locks held under the watchdog by one thread; script calls per
 *       second that Redis receives ({@code INFO commandstats}) and Redis CPU milliseconds per
 *       second ({@code INFO cpu}), over whole renewal periods; the floor column is an idle
 *       Redis;</li>
 *   <li>{@code sync-replicas-1}, {@code sync-replicas-16}: the uncontended figures against a
 *       master with one replica, Holdfast at {@code sync-replicas=auto}, Redisson told of the
 *       replica (so it checks synced replicas), the floor pipelining {@code WAIT 1 1000};</li>
 *   <li>{@code cluster}: a 3-primary Cluster, 16 threads, names on all slots against names on one
 *       node.</li>
 * </ul>
 *
 * <p>Run: {@code ./mvnw -B -q -pl benchmarks -am package -Pbench -DskipTests -Dexec.skip &&
 * java -jar benchmarks/target/benchmarks.jar side-by-side --rounds 5}, or without the jar:
 * {@code ./mvnw -B -q -pl benchmarks -am package -Pbench -DskipTests
 * -Dbench.main=dev.holdfast.benchmarks.SideBySideBenchmark -Dbench.args="--rounds 5"}.
 *
 * <p>Flags: {@code --rounds N} (5), {@code --seconds S} per implementation and round (5),
 * {@code --warmup S} uncounted before each measurement (1), {@code --threads N} (16),
 * {@code --holds N} (10000), {@code --watchdog-timeout D} for both implementations ({@code 30s};
 * {@code 500ms}, {@code 2m} also work), {@code --settle-ms N} the handoff holder waits after the
 * waiter parked (5), {@code --out FILE} also writes the table there, {@code --list}. {@code --smoke}
 * runs every selected scenario once, about a second per implementation (1 round, 1 s, 0.2 s
 * warm-up, 1,000 holds, a 3 s watchdog timeout; flags given after it win) and exits with 1 if a
 * figure is missing or not positive; it proves the harness works, not a number.
 */
public final class SideBySideBenchmark {

  private SideBySideBenchmark() {
  }

  /**
   * Runs the scenarios named in {@code args} (all if none) and prints the table.
   *
   * @throws IllegalStateException if a smoke run found a figure missing or not positive
   */
  public static void main(String[] args) throws Exception {
    // No System.exit: under exec:java this runs inside Maven's JVM.
    if (run(args) != 0) {
      throw new IllegalStateException("side-by-side smoke run failed (see above)");
    }
  }

  /** Runs as {@link #main} would; answers the exit status. */
  static int run(String[] args) throws Exception {
    preferLocalRedis();
    int rounds = 5;
    double seconds = 5;
    double warmup = 1;
    int threads = 16;
    int holds = 10_000;
    Duration watchdog = Duration.ofSeconds(30);
    long settle = 5;
    boolean smoke = false;
    Path out = null;
    List<String> selected = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      switch (arg) {
        case "--smoke" -> {
          smoke = true;
          rounds = 1;
          seconds = 1;
          warmup = 0.2;
          holds = 1_000;
          watchdog = Duration.ofSeconds(3);
        }
        case "--rounds" -> rounds = Integer.parseInt(value(args, ++i, arg));
        case "--seconds" -> seconds = Double.parseDouble(value(args, ++i, arg));
        case "--warmup" -> warmup = Double.parseDouble(value(args, ++i, arg));
        case "--threads" -> threads = Integer.parseInt(value(args, ++i, arg));
        case "--holds" -> holds = Integer.parseInt(value(args, ++i, arg));
        case "--watchdog-timeout" -> watchdog = duration(value(args, ++i, arg));
        case "--settle-ms" -> settle = Long.parseLong(value(args, ++i, arg));
        case "--out" -> out = Path.of(value(args, ++i, arg));
        case "--list" -> {
          Scenario.all(threads, holds).forEach(s -> System.out.println(s.name));
          return 0;
        }
        default -> {
          if (arg.startsWith("--")) {
            throw new IllegalArgumentException("unknown flag " + arg + "; see the Javadoc of "
                + SideBySideBenchmark.class.getName());
          }
          selected.add(arg);
        }
      }
    }
    if (rounds < 1 || seconds <= 0 || threads < 2 || threads % 2 != 0 || holds < 1) {
      throw new IllegalArgumentException("need --rounds >= 1, --seconds > 0, an even --threads"
          + " >= 2 and --holds >= 1");
    }
    List<Scenario> scenarios = select(Scenario.all(threads, holds), selected);
    Options options = new Options(seconds, warmup, watchdog, settle);

    Map<Figure, Row> rows = new LinkedHashMap<>();
    Map<Topology, Deployment> deployments = new EnumMap<>(Topology.class);
    String redisVersion = "?";
    try {
      for (Scenario scenario : scenarios) {
        Deployment deployment = deployments.computeIfAbsent(scenario.topology,
            SideBySideBenchmark::deploy);
        redisVersion = redisVersion(deployment.masters().get(0));
        scenario.figures.forEach(f -> rows.put(f, new Row(f)));
        for (int round = 0; round < rounds; round++) {
          List<Impl> order = new ArrayList<>(scenario.impls);
          if (round % 2 == 1) {
            Collections.reverse(order);
          }
          Map<Impl, Map<Figure, Double>> measured = new EnumMap<>(Impl.class);
          for (Impl impl : order) {
            deployment.flush();
            Map<Figure, Double> values = scenario.measure(impl, deployment, options);
            measured.put(impl, values);
            StringBuilder line = new StringBuilder();
            for (Figure figure : scenario.figures) {
              line.append(String.format(Locale.ROOT, "%n  %s: " + figure.unit().format,
                  figure.label(), values.get(figure)));
            }
            System.err.printf(Locale.ROOT, "%s, round %d/%d, %s:%s%n", scenario.name, round + 1,
                rounds, impl.label(), line);
          }
          for (Figure figure : scenario.figures) {
            rows.get(figure).add(measured);
          }
        }
      }
    } finally {
      deployments.values().forEach(Deployment::close);
    }

    String table = table(rows.values(), String.format(Locale.ROOT,
        "Side by side: %d round(s), %s s per implementation and round (+%s s warm-up), Redis %s,"
            + " Java %s, %d CPUs, watchdog timeout %d ms%s", rounds, number(seconds), number(warmup),
        redisVersion, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors(), watchdog.toMillis(), smoke ? ", SMOKE RUN" : ""));
    System.out.println(table);
    if (out != null) {
      Files.writeString(out, table, StandardCharsets.UTF_8);
    }
    if (smoke) {
      List<String> bad = new ArrayList<>();
      for (Row row : rows.values()) {
        bad.addAll(row.problems());
      }
      if (!bad.isEmpty()) {
        System.err.println("Smoke run failed: " + bad);
        return 1;
      }
      System.err.println("Smoke run passed: " + rows.size() + " figures, each measured.");
    }
    return 0;
  }

  private static Deployment deploy(Topology topology) {
    return switch (topology) {
      case STANDALONE -> Deployment.standalone();
      case REPLICATED -> Deployment.replicated();
      case CLUSTER -> Deployment.cluster();
    };
  }

  private static List<Scenario> select(List<Scenario> all, List<String> names) {
    if (names.isEmpty()) {
      return all;
    }
    List<Scenario> selected = new ArrayList<>();
    for (String name : names) {
      Scenario scenario = all.stream().filter(s -> s.name.equals(name)).findFirst()
          .orElseThrow(() -> new IllegalArgumentException("unknown scenario " + name + "; known: "
              + all.stream().map(s -> s.name).toList()));
      selected.add(scenario);
    }
    return selected;
  }

  /** The values of one figure over the rounds, per implementation, and their per-round ratios. */
  private static final class Row {
    final Figure figure;
    final Map<Impl, List<Double>> values = new EnumMap<>(Impl.class);
    final List<Double> holdfastToRedisson = new ArrayList<>();
    final List<Double> holdfastToFloor = new ArrayList<>();
    final List<Double> redissonToFloor = new ArrayList<>();

    Row(Figure figure) {
      this.figure = figure;
    }

    void add(Map<Impl, Map<Figure, Double>> round) {
      Map<Impl, Double> v = new EnumMap<>(Impl.class);
      round.forEach((impl, figures) -> {
        Double value = figures.get(figure);
        if (value != null) {
          v.put(impl, value);
          values.computeIfAbsent(impl, i -> new ArrayList<>()).add(value);
        }
      });
      ratio(v, Impl.HOLDFAST, Impl.REDISSON, holdfastToRedisson);
      if (figure.unit().ratioToFloor) {
        ratio(v, Impl.HOLDFAST, Impl.FLOOR, holdfastToFloor);
        ratio(v, Impl.REDISSON, Impl.FLOOR, redissonToFloor);
      }
    }

    private static void ratio(Map<Impl, Double> v, Impl a, Impl b, List<Double> into) {
      if (v.containsKey(a) && v.containsKey(b)) {
        into.add(v.get(a) / v.get(b));
      }
    }

    String cell(Impl impl) {
      List<Double> list = values.get(impl);
      return list == null ? "—"
          : String.format(Locale.ROOT, figure.unit().format, Measurements.median(list));
    }

    static String ratioCell(List<Double> ratios) {
      return ratios.isEmpty() ? "—"
          : String.format(Locale.ROOT, "%.2fx", Measurements.median(ratios));
    }

    /** What a smoke run rejects: a figure without value, or one not positive. */
    List<String> problems() {
      List<String> problems = new ArrayList<>();
      for (Impl impl : List.of(Impl.HOLDFAST, Impl.REDISSON)) {
        List<Double> list = values.get(impl);
        double median = list == null ? Double.NaN : Measurements.median(list);
        boolean ok = figure.unit() == Unit.PER_SECOND ? median >= 0 : median > 0;
        if (!ok || Double.isInfinite(median)) {
          problems.add(figure.label() + " / " + impl.label() + " = " + median);
        }
      }
      return problems;
    }
  }

  private static String table(Iterable<Row> rows, String caption) {
    StringBuilder out = new StringBuilder();
    out.append('\n').append(caption).append("\n\n");
    out.append("| figure | Holdfast | Redisson | Holdfast ÷ Redisson | protocol floor"
        + " | Holdfast ÷ floor | Redisson ÷ floor |\n");
    out.append("|---|---:|---:|---:|---:|---:|---:|\n");
    for (Row row : rows) {
      out.append("| ").append(row.figure.label())
          .append(" | ").append(row.cell(Impl.HOLDFAST))
          .append(" | ").append(row.cell(Impl.REDISSON))
          .append(" | ").append(Row.ratioCell(row.holdfastToRedisson))
          .append(" | ").append(row.cell(Impl.FLOOR))
          .append(" | ").append(Row.ratioCell(row.holdfastToFloor))
          .append(" | ").append(Row.ratioCell(row.redissonToFloor))
          .append(" |\n");
    }
    return out.toString();
  }

  static String redisVersion(RedisServer server) {
    try (Jedis admin = server.admin()) {
      for (String line : admin.info("server").split("\r?\n")) {
        if (line.startsWith("redis_version:")) {
          return line.substring("redis_version:".length()).trim();
        }
      }
    }
    return "?";
  }

  private static String value(String[] args, int i, String flag) {
    if (i >= args.length) {
      throw new IllegalArgumentException(flag + " needs a value");
    }
    return args[i];
  }

  /** {@code 500ms}, {@code 30s}, {@code 2m}, or ISO-8601 ({@code PT30S}). */
  static Duration duration(String text) {
    String t = text.trim().toLowerCase(Locale.ROOT);
    if (t.startsWith("pt")) {
      return Duration.parse(text.trim());
    }
    if (t.endsWith("ms")) {
      return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2)));
    }
    if (t.endsWith("s")) {
      return Duration.ofMillis((long) (Double.parseDouble(t.substring(0, t.length() - 1)) * 1000));
    }
    if (t.endsWith("m")) {
      return Duration.ofSeconds(Long.parseLong(t.substring(0, t.length() - 1)) * 60);
    }
    throw new IllegalArgumentException("--watchdog-timeout: not a duration: " + text);
  }

  private static String number(double value) {
    return value == Math.rint(value) ? Long.toString((long) value) : Double.toString(value);
  }

  /**
   * Measures a local {@code redis-server} even where Docker is available (a container's network
   * would be measured too), unless the caller chose a backend explicitly.
   */
  static void preferLocalRedis() {
    if (System.getProperty(RedisBackend.PROPERTY) == null
        && System.getenv(RedisBackend.ENV) == null) {
      System.setProperty(RedisBackend.PROPERTY, "local");
    }
  }
}
