package dev.holdfast.engine;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The separate JVM of a {@link LockModelTest} run: a {@link ModelProcess} with its own clients
 * and actors, started by the test as
 * {@code java -cp <test class path> dev.holdfast.engine.ModelWorker key=value...}.
 *
 * <p>Protocol, one line each. Stdout: {@code E<tab><event>} for every history event as it is
 * recorded, then {@code READY} once the actors run, {@code IDLE} once they ended after a stop,
 * {@code DONE} before exiting. Stdin: {@code stop} (release everything and end the actors),
 * {@code exit} (close the clients and exit); end of input means exit. Logs go to stderr.
 */
public final class ModelWorker {
  static final Duration ACTORS_TIMEOUT = Duration.ofSeconds(40);
  static final Duration CHANNELS_TIMEOUT = Duration.ofSeconds(10);

  private ModelWorker() {
  }

  /**
   * @param args {@code key=value}: the {@link ModelSettings#toArgs() settings}, {@code proc}
   *     (the process label) and, per client {@code i} from 0, its properties as
   *     {@code client<i>.<property>=<value>}
   */
  public static void main(String[] args) throws Exception {
    PrintStream protocol = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    System.setOut(System.err); // nothing but the protocol on stdout
    Map<String, String> options = new HashMap<>();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      options.put(arg.substring(0, eq), arg.substring(eq + 1));
    }
    ModelSettings settings = ModelSettings.fromArgs(options);
    List<Map<String, String>> clients = new ArrayList<>();
    for (int i = 0; ; i++) {
      String prefix = "client" + i + ".";
      if (options.keySet().stream().noneMatch(k -> k.startsWith(prefix))) {
        break;
      }
      Map<String, String> properties = new java.util.LinkedHashMap<>();
      options.forEach((k, v) -> {
        if (k.startsWith(prefix)) {
          properties.put(k.substring(prefix.length()), v);
        }
      });
      clients.add(properties);
    }
    ModelHistory history = new ModelHistory(options.get("proc"), line -> send(protocol,
        "E\t" + line));
    BufferedReader commands =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (ModelProcess process = new ModelProcess(settings, clients, history)) {
      process.start();
      send(protocol, "READY");
      String command = commands.readLine();
      process.stop();
      if (process.awaitActors(ACTORS_TIMEOUT)) {
        process.awaitNoWaitedChannels(CHANNELS_TIMEOUT);
      }
      send(protocol, "IDLE");
      if (command != null) {
        commands.readLine(); // "exit", or the end of input
      }
    } catch (Throwable t) {
      history.violation("worker", history.proc(), "worker failed: " + t);
      throw t;
    } finally {
      send(protocol, "DONE");
    }
    System.exit(0);
  }

  /** The arguments giving {@code clients} to a worker. */
  static List<String> clientArgs(List<Map<String, String>> clients) {
    List<String> args = new ArrayList<>();
    for (int i = 0; i < clients.size(); i++) {
      for (Map.Entry<String, String> e : clients.get(i).entrySet()) {
        args.add("client" + i + "." + e.getKey() + "=" + e.getValue());
      }
    }
    return args;
  }

  private static void send(PrintStream protocol, String line) {
    synchronized (protocol) {
      protocol.println(line);
      protocol.flush();
    }
  }
}
