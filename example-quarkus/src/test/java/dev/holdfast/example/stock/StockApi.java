package dev.holdfast.example.stock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A small client of the example's HTTP API for the tests and the demo, including the burst of
 * concurrent reservations they fire at one or more instances.
 */
final class StockApi {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpClient http = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1) // no h2c upgrade dance: one request, one connection
      .connectTimeout(Duration.ofSeconds(5))
      .build();

  /**
   * What a burst of reservations came back with.
   *
   * @param errors   answers other than 200
   * @param waitsMs  every 200 answer's {@code waitedMs}, sorted
   * @param reservedPerInstance successes by instance, in the order the instances were given
   * @param onVirtualThreads 200 answers that say {@code "virtualThread": true}
   */
  record Burst(int requests, int reserved, int errors, long[] waitsMs,
      int[] reservedPerInstance, Duration took, int onVirtualThreads) {

    /** The nearest-rank percentile of the waits, e.g. {@code 99} for p99. */
    long waitPercentile(double percent) {
      if (waitsMs.length == 0) {
        throw new IllegalStateException("No answers");
      }
      int rank = (int) Math.ceil(percent / 100 * waitsMs.length);
      return waitsMs[Math.max(0, rank - 1)];
    }
  }

  void setStock(URI instance, String sku, int units) {
    expectOk(send(request(instance, "/stock/" + sku)
        .PUT(HttpRequest.BodyPublishers.ofString("{\"units\": " + units + "}"))
        .header("Content-Type", "application/json").build()));
  }

  int units(URI instance, String sku) {
    return json(expectOk(send(request(instance, "/stock/" + sku).GET().build())))
        .get("units").asInt();
  }

  void delete(URI instance, String sku) {
    HttpResponse<String> response = send(request(instance, "/stock/" + sku).DELETE().build());
    if (response.statusCode() / 100 != 2) {
      throw new IllegalStateException("DELETE " + sku + " answered " + response.statusCode());
    }
  }

  /**
   * The answer to {@code PUT /stock/<sku>/fenced} or {@code …/unfenced}.
   *
   * @param status   200 if the store took the write, 409 if it refused the token
   * @param token    the write's fencing token, if the answer has one
   * @param lockLost whether the lock's lease ran out before it was released
   */
  record Write(int status, boolean accepted, Long token, boolean lockLost) {
  }

  /**
   * Starts {@code PUT /stock/<sku>/fenced} (or {@code …/unfenced}) with {@code units}, waiting
   * {@code holdMs} under the lock before writing; completes with the answer, or fails on a status
   * other than 200 and 409.
   */
  CompletableFuture<Write> write(URI instance, String sku, boolean fenced, int units,
      long holdMs) {
    HttpRequest request = request(instance, "/stock/" + sku + (fenced ? "/fenced" : "/unfenced")
        + "?holdMs=" + holdMs)
        .PUT(HttpRequest.BodyPublishers.ofString("{\"units\": " + units + "}"))
        .header("Content-Type", "application/json").build();
    return http.sendAsync(request, HttpResponse.BodyHandlers.ofString()).thenApply(response -> {
      if (response.statusCode() != 200 && response.statusCode() != 409) {
        expectOk(response); // throws, with the body
      }
      JsonNode answer = json(response);
      JsonNode token = answer.get("token");
      return new Write(response.statusCode(), answer.get("accepted").asBoolean(),
          token == null || token.isNull() ? null : token.asLong(),
          answer.get("lockLost").asBoolean());
    });
  }

  /** One run of the snapshot job, from {@code GET /snapshots}. */
  record SnapshotRun(Instant occurrence, String instance) {
  }

  /**
   * {@code GET /snapshots}: the answering instance's name and every instance's runs of the
   * snapshot job, oldest first.
   */
  record Snapshots(String instance, List<SnapshotRun> runs) {
  }

  Snapshots snapshots(URI instance) {
    JsonNode answer = json(expectOk(send(request(instance, "/snapshots").GET().build())));
    List<SnapshotRun> runs = new ArrayList<>();
    for (JsonNode run : answer.get("snapshots")) {
      runs.add(new SnapshotRun(Instant.parse(run.get("occurrence").asText()),
          run.get("instance").asText()));
    }
    return new Snapshots(answer.get("instance").asText(), runs);
  }

  /**
   * The value of the Prometheus series {@code name{labels}} at {@code /q/metrics}, or 0 if the
   * instance has not published it (Micrometer creates some meters on first use).
   */
  double metric(URI instance, String name, String labels) {
    String metrics = expectOk(send(request(instance, "/q/metrics").GET().build())).body();
    Matcher m = Pattern.compile(
        "(?m)^" + Pattern.quote(name + "{" + labels + "}") + " (\\S+)$")
        .matcher(metrics);
    return m.find() ? Double.parseDouble(m.group(1)) : 0;
  }

  /** Starts {@code POST /report} on one instance; completes with the status code. */
  CompletableFuture<Integer> report(URI instance) {
    return http.sendAsync(request(instance, "/report").POST(HttpRequest.BodyPublishers.noBody())
        .build(), HttpResponse.BodyHandlers.discarding()).thenApply(HttpResponse::statusCode);
  }

  /**
   * Sends {@code requests} reservations of one unit of {@code sku} at once, round-robin over
   * {@code instances}, to {@code /stock/<sku>/<endpoint>}, and waits for every answer.
   */
  Burst reserveAll(List<URI> instances, String sku, String endpoint, int requests) {
    long start = System.nanoTime();
    List<CompletableFuture<HttpResponse<String>>> calls = new ArrayList<>();
    for (int i = 0; i < requests; i++) {
      URI instance = instances.get(i % instances.size());
      calls.add(http.sendAsync(request(instance, "/stock/" + sku + "/" + endpoint)
          .POST(HttpRequest.BodyPublishers.noBody()).build(),
          HttpResponse.BodyHandlers.ofString()));
    }
    int reserved = 0;
    int errors = 0;
    int onVirtualThreads = 0;
    int[] perInstance = new int[instances.size()];
    List<Long> waits = new ArrayList<>();
    for (int i = 0; i < calls.size(); i++) {
      HttpResponse<String> response = calls.get(i).join();
      if (response.statusCode() != 200) {
        errors++;
        continue;
      }
      JsonNode answer = json(response);
      waits.add(answer.get("waitedMs").asLong());
      if (answer.has("virtualThread") && answer.get("virtualThread").asBoolean()) {
        onVirtualThreads++;
      }
      if (answer.get("reserved").asBoolean()) {
        reserved++;
        perInstance[i % instances.size()]++;
      }
    }
    long[] sorted = waits.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(sorted);
    return new Burst(requests, reserved, errors, sorted, perInstance,
        Duration.ofNanos(System.nanoTime() - start), onVirtualThreads);
  }

  private static HttpRequest.Builder request(URI instance, String path) {
    return HttpRequest.newBuilder(instance.resolve(path)).timeout(TIMEOUT);
  }

  private HttpResponse<String> send(HttpRequest request) {
    try {
      return http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new UncheckedIOException(request.method() + " " + request.uri(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted: " + request.method() + " " + request.uri(), e);
    }
  }

  private static HttpResponse<String> expectOk(HttpResponse<String> response) {
    if (response.statusCode() != 200) {
      throw new IllegalStateException(response.request().method() + " " + response.uri()
          + " answered " + response.statusCode() + ": " + response.body());
    }
    return response;
  }

  private static JsonNode json(HttpResponse<String> response) {
    try {
      return JSON.readTree(response.body());
    } catch (IOException e) {
      throw new UncheckedIOException("Not JSON from " + response.uri() + ": " + response.body(), e);
    }
  }
}
