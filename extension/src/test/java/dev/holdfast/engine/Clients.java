package dev.holdfast.engine;

import dev.holdfast.LockClient;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Creates lock clients for one test and closes them after it, so a failing test cannot leave
 * watchdogs renewing locks into the next one.
 */
final class Clients implements AfterEachCallback {
  private final List<LockClient> open = new ArrayList<>();

  /** A client for {@code base} plus {@code extra} key/value pairs. */
  synchronized LockClient create(Map<String, String> base, String... extra) {
    Map<String, String> properties = new HashMap<>(base);
    for (int i = 0; i < extra.length; i += 2) {
      properties.put(extra[i], extra[i + 1]);
    }
    LockClient client = LockClient.create(properties);
    open.add(client);
    return client;
  }

  /** A client for a typed configuration. */
  synchronized LockClient create(dev.holdfast.LockClientConfig config) {
    LockClient client = LockClient.create(config);
    open.add(client);
    return client;
  }

  @Override
  public synchronized void afterEach(ExtensionContext context) {
    open.forEach(LockClient::close);
    open.clear();
  }

  /** The engine behind a client, for assertions on internal state. */
  static LockEngine engine(LockClient client) {
    try {
      var field = LockClient.class.getDeclaredField("engine");
      field.setAccessible(true);
      return (LockEngine) field.get(client);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }
}
