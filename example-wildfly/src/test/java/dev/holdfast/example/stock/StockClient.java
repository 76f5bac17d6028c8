package dev.holdfast.example.stock;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/** The example's REST API on one server, as the tests call it. Thread-safe. */
final class StockClient {

  /** One client for all servers; HTTP/1.1 so that concurrent calls use parallel connections. */
  private static final HttpClient HTTP = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(5))
      .build();
  /** Generous: a locked reservation may queue behind many others. */
  private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(60);

  private final URI base;

  StockClient(WildFlyServer server) {
    this.base = server.baseUri();
  }

  /** {@code PUT /stock/{sku}}; fails unless it answers 200. */
  void setStock(String sku, int units) {
    HttpResponse<String> response = send(request("stock/" + sku)
        .header("Content-Type", "application/json")
        .PUT(HttpRequest.BodyPublishers.ofString("{\"units\":" + units + "}")));
    expectOk(response);
  }

  /** {@code GET /stock/{sku}}'s units; fails unless it answers 200. */
  int stock(String sku) {
    return json(expectOk(get("stock/" + sku))).getInt("units");
  }

  HttpResponse<String> get(String path) {
    return send(request(path).GET());
  }

  HttpResponse<String> post(String path) {
    return send(request(path).POST(HttpRequest.BodyPublishers.noBody()));
  }

  HttpResponse<String> put(String path, String json) {
    return send(request(path).header("Content-Type", "application/json")
        .PUT(HttpRequest.BodyPublishers.ofString(json)));
  }

  /** {@code POST /stock/{sku}/reserve}, or {@code …/reserve-unprotected} if {@code !locked}. */
  CompletableFuture<Reservation> reserveAsync(String sku, boolean locked) {
    return reserveAsync(sku, locked ? "reserve" : "reserve-unprotected");
  }

  /** {@code POST /stock/{sku}/{endpoint}}: one of the reservation endpoints. */
  CompletableFuture<Reservation> reserveAsync(String sku, String endpoint) {
    HttpRequest request = request("stock/" + sku + "/" + endpoint)
        .POST(HttpRequest.BodyPublishers.noBody())
        .build();
    return HTTP.sendAsync(request, HttpResponse.BodyHandlers.ofString())
        .thenApply(StockClient::expectOk)
        .thenApply(body -> {
          JsonObject json = json(body);
          return new Reservation(json.getBoolean("reserved"),
              json.getJsonNumber("waitedMs").longValue());
        });
  }

  /**
   * {@code PUT /stock/{sku}/fenced} (or {@code …/unfenced}) with {@code units}, waiting
   * {@code holdMs} under the lock before writing; completes with the answer, or fails on a status
   * other than 200 and 409.
   */
  CompletableFuture<Write> writeAsync(String sku, boolean fenced, int units, long holdMs) {
    HttpRequest request = request("stock/" + sku + (fenced ? "/fenced" : "/unfenced")
        + "?holdMs=" + holdMs)
        .header("Content-Type", "application/json")
        .PUT(HttpRequest.BodyPublishers.ofString("{\"units\":" + units + "}"))
        .build();
    return HTTP.sendAsync(request, HttpResponse.BodyHandlers.ofString()).thenApply(response -> {
      if (response.statusCode() != 409) {
        expectOk(response);
      }
      JsonObject json = json(response.body());
      // JSON-B leaves a null token out.
      Long token = json.containsKey("token") && !json.isNull("token")
          ? json.getJsonNumber("token").longValue() : null;
      return new Write(response.statusCode(), json.getBoolean("accepted"), token,
          json.getBoolean("lockLost"));
    });
  }

  /** One run of the snapshot job, from {@code GET /snapshots}. */
  record SnapshotRun(Instant occurrence, String instance) {
  }

  /**
   * {@code GET /snapshots}: the answering server's instance name and every instance's runs of
   * the snapshot job, oldest first.
   */
  record Snapshots(String instance, List<SnapshotRun> runs) {
  }

  Snapshots snapshots() {
    JsonObject answer = json(expectOk(get("snapshots")));
    List<SnapshotRun> runs = new ArrayList<>();
    for (JsonObject run : answer.getJsonArray("snapshots").getValuesAs(JsonObject.class)) {
      runs.add(new SnapshotRun(Instant.parse(run.getString("occurrence")),
          run.getString("instance")));
    }
    return new Snapshots(answer.getString("instance"), runs);
  }

  Reservation reserve(String sku, boolean locked) {
    return reserveAsync(sku, locked).join();
  }

  static JsonObject json(String body) {
    try (JsonReader reader = Json.createReader(new StringReader(body))) {
      return reader.readObject();
    }
  }

  static String expectOk(HttpResponse<String> response) {
    if (response.statusCode() != 200) {
      throw new AssertionError(response.request().method() + " " + response.uri() + " answered "
          + response.statusCode() + ": " + response.body());
    }
    return response.body();
  }

  private HttpRequest.Builder request(String path) {
    return HttpRequest.newBuilder(base.resolve(path)).timeout(REQUEST_TIMEOUT);
  }

  private static HttpResponse<String> send(HttpRequest.Builder request) {
    try {
      return HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("Interrupted", e);
    }
  }

  /** One reservation's answer. */
  record Reservation(boolean reserved, long waitedMs) {
  }

  /**
   * The answer to a fenced or unfenced write.
   *
   * @param status   200 if the store took the write, 409 if it refused the token
   * @param token    the write's fencing token, if the answer has one
   * @param lockLost whether the lock's lease ran out before it was released
   */
  record Write(int status, boolean accepted, Long token, boolean lockLost) {
  }
}
