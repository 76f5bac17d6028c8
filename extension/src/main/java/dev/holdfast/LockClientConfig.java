package dev.holdfast;

import dev.holdfast.engine.ConfigValues;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import javax.net.ssl.SSLSocketFactory;

/**
 * Everything a {@link LockClient} needs to know: where Redis is and how the locks behave.
 *
 * <p>Build one with {@link #builder()}, or read one from the {@code holdfast.*} keys with
 * {@link #fromProperties(Map)} — the same keys MicroProfile Config users put in
 * {@code microprofile-config.properties}:
 *
 * <table>
 *   <caption>Configuration keys</caption>
 *   <tr><th>key</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code holdfast.redis.mode}</td><td>{@code standalone}</td>
 *       <td>{@code standalone}, {@code sentinel} or {@code cluster}</td></tr>
 *   <tr><td>{@code holdfast.redis.address}</td><td>{@code redis://localhost:6379}</td>
 *       <td>standalone server; {@code rediss://} for TLS; user, password and database may be in
 *       the URI ({@code redis://user:secret@host:6379/2})</td></tr>
 *   <tr><td>{@code holdfast.redis.nodes}</td><td>—</td>
 *       <td>comma-separated {@code host:port} seeds (cluster) or sentinels (sentinel);
 *       {@code rediss://host:port} entries for TLS</td></tr>
 *   <tr><td>{@code holdfast.redis.sentinel.master}</td><td>—</td><td>the master name the
 *       sentinels monitor</td></tr>
 *   <tr><td>{@code holdfast.redis.username}, {@code .password}</td><td>—</td><td>ACL user and
 *       password (override the URI's)</td></tr>
 *   <tr><td>{@code holdfast.redis.database}</td><td>0</td><td>database index (not in cluster
 *       mode)</td></tr>
 *   <tr><td>{@code holdfast.redis.timeout}</td><td>{@code 2s}</td><td>connect and socket
 *       timeout</td></tr>
 *   <tr><td>{@code holdfast.redis.pool.max-size}</td><td>64</td><td>command connections per
 *       node; waiting threads use none. A queue, not a limit: calls wait for a free connection
 *       ({@code tryLock} within its wait); acquisitions use at most three quarters of it, the
 *       rest stays free for releases and renewals</td></tr>
 *   <tr><td>{@code holdfast.watchdog-timeout}</td><td>{@code 30s}</td><td>lease kept alive by
 *       the watchdog, renewed every third of it</td></tr>
 *   <tr><td>{@code holdfast.key-prefix}</td><td>empty</td><td>prepended to every lock
 *       key</td></tr>
 *   <tr><td>{@code holdfast.redis.sync-replicas}</td><td>{@code auto}</td><td>replica
 *       acknowledgements every lock-state change waits for: {@code auto}, {@code none} or a
 *       number</td></tr>
 *   <tr><td>{@code holdfast.redis.sync-timeout}</td><td>{@code 1s}</td><td>how long it waits
 *       for them</td></tr>
 *   <tr><td>{@code holdfast.redis.connect-at-startup}</td><td>{@code true}</td><td>whether
 *       {@link LockClient#create(LockClientConfig)} checks that Redis answers (and fails if
 *       not)</td></tr>
 * </table>
 *
 * <p>Durations are written {@code 500ms}, {@code 30s}, {@code 5m}, {@code 1h} or in ISO-8601
 * ({@code PT30S}). Instances are immutable and thread-safe; {@link #toString()} never shows a
 * password.
 */
public final class LockClientConfig {

  /** How Holdfast finds the Redis servers. */
  public enum Mode {
    /** One server (or a proxy in front of one) at {@code holdfast.redis.address}. */
    STANDALONE,
    /** A master found through the sentinels in {@code holdfast.redis.nodes}. */
    SENTINEL,
    /** A Redis Cluster discovered from the seeds in {@code holdfast.redis.nodes}. */
    CLUSTER
  }

  /** {@value}: {@code standalone} (the default), {@code sentinel} or {@code cluster}. */
  public static final String MODE = "holdfast.redis.mode";
  /** {@value}: the standalone server's URI; see {@link Builder#address(String)}. */
  public static final String ADDRESS = "holdfast.redis.address";
  /** {@value}: comma-separated cluster seeds or sentinels; see {@link Builder#nodes(List)}. */
  public static final String NODES = "holdfast.redis.nodes";
  /** {@value}: the master name the sentinels monitor (sentinel mode). */
  public static final String SENTINEL_MASTER = "holdfast.redis.sentinel.master";
  /** {@value}: the ACL user; overrides the address URI's. */
  public static final String USERNAME = "holdfast.redis.username";
  /** {@value}: the password; overrides the address URI's. Never logged or shown. */
  public static final String PASSWORD = "holdfast.redis.password";
  /** {@value}: the database index (not in cluster mode); overrides the address URI's path. */
  public static final String DATABASE = "holdfast.redis.database";
  /** {@value}: the connect and socket timeout, a duration. */
  public static final String TIMEOUT = "holdfast.redis.timeout";
  /** {@value}: command connections per node. */
  public static final String POOL_MAX_SIZE = "holdfast.redis.pool.max-size";
  /** {@value}: the watchdog lease, a duration, renewed every third of it. */
  public static final String WATCHDOG_TIMEOUT = "holdfast.watchdog-timeout";
  /** {@value}: prepended verbatim to every lock key. */
  public static final String KEY_PREFIX = "holdfast.key-prefix";
  /**
   * {@value}: which replica acknowledgements a lock-state change waits for: {@code auto} (the
   * default: the replicas connected at that moment, if any), {@code none}, or a positive number.
   * See {@link Builder#syncReplicas(int)}.
   */
  public static final String SYNC_REPLICAS = "holdfast.redis.sync-replicas";
  /** {@value}: how long a lock-state change waits for replica acknowledgements, a duration. */
  public static final String SYNC_TIMEOUT = "holdfast.redis.sync-timeout";
  /**
   * {@value}: {@code true} (the default) or {@code false}; whether creating a client checks that
   * Redis answers. See {@link Builder#connectAtStartup(boolean)}.
   */
  public static final String CONNECT_AT_STARTUP = "holdfast.redis.connect-at-startup";
  /**
   * {@value}: how long a fair lock's waiter may go without showing it is alive (it does so while
   * it waits) before it loses its place in the queue, a duration; the default is 5 s.
   */
  public static final String FAIR_WAITER_TIMEOUT = "holdfast.fair.waiter-timeout";

  /** The {@link #syncReplicas()} value meaning {@code auto}. */
  public static final int SYNC_REPLICAS_AUTO = -1;
  /** The {@link #syncReplicas()} value meaning {@code none}. */
  public static final int SYNC_REPLICAS_NONE = 0;

  /**
   * Every key this class reads. Other keys in Holdfast's namespaces are rejected as typos; see
   * {@link #fromProperties(Map)}.
   */
  public static final List<String> KEYS = List.of(MODE, ADDRESS, NODES, SENTINEL_MASTER, USERNAME,
      PASSWORD, DATABASE, TIMEOUT, POOL_MAX_SIZE, WATCHDOG_TIMEOUT, KEY_PREFIX, SYNC_REPLICAS,
      SYNC_TIMEOUT, CONNECT_AT_STARTUP, FAIR_WAITER_TIMEOUT);

  static final String DEFAULT_ADDRESS = "redis://localhost:6379";

  private final Mode mode;
  private final URI address;
  private final List<URI> nodes;
  private final String sentinelMaster;
  private final String username;
  private final String password;
  private final int database;
  private final Duration timeout;
  private final int poolMaxSize;
  private final Duration watchdogTimeout;
  private final Duration fairWaiterTimeout;
  private final String keyPrefix;
  private final int syncReplicas;
  private final Duration syncTimeout;
  private final boolean connectAtStartup;
  private final SSLSocketFactory sslSocketFactory;
  private final Object meterRegistry;

  private LockClientConfig(Builder b) {
    this.mode = b.mode;
    this.address = b.address;
    this.nodes = List.copyOf(b.nodes);
    this.sentinelMaster = b.sentinelMaster;
    this.username = b.username;
    this.password = b.password;
    this.database = b.database;
    this.timeout = b.timeout;
    this.poolMaxSize = b.poolMaxSize;
    this.watchdogTimeout = b.watchdogTimeout;
    this.fairWaiterTimeout = b.fairWaiterTimeout;
    this.keyPrefix = b.keyPrefix;
    this.syncReplicas = b.syncReplicas;
    this.syncTimeout = b.syncTimeout;
    this.connectAtStartup = b.connectAtStartup;
    this.sslSocketFactory = b.sslSocketFactory;
    this.meterRegistry = b.meterRegistry;
  }

  /** {@return a builder with every default in place} */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Reads the {@code holdfast.*} keys of the table above. Of the other keys:
   * <ul>
   *   <li>keys that do not start with {@code holdfast.}, and the CDI layer's {@code @Locked}
   *       overrides ({@code holdfast.locked.*}, {@code holdfast."<class>[/<method>]".locked.*})
   *       and switches ({@code holdfast.health.enabled}, {@code holdfast.metrics.enabled}), are
   *       ignored;</li>
   *   <li>an unknown {@code holdfast.redis.*} key, or an unknown key at most two edits away from
   *       one of Holdfast's keys (a typo such as {@code holdfast.watchdog-timout}), is an
   *       error;</li>
   *   <li>any other {@code holdfast.*} key (such as a build's {@code holdfast.version}) is ignored
   *       with a warning, logged through {@code System.Logger} {@code dev.holdfast.LockClientConfig},
   *       that names the key and the closest key Holdfast defines.</li>
   * </ul>
   *
   * @param properties keys and values, e.g. all system properties or a configuration file's
   * @return the configuration
   * @throws IllegalArgumentException naming the key and the bad value (never a password) when a
   *     value cannot be parsed, a key is unknown as described above (with the closest known key),
   *     or values contradict each other
   */
  public static LockClientConfig fromProperties(Map<String, String> properties) {
    Objects.requireNonNull(properties, "properties");
    return ConfigValues.read(ConfigKeys.clientKeys(properties), builder()).build();
  }

  /** {@return how Holdfast finds the Redis servers ({@value #MODE})} */
  public Mode mode() {
    return mode;
  }

  /**
   * {@return the standalone server's URI, credentials included when they were given in it
   * ({@value #ADDRESS})}
   */
  public URI address() {
    return address;
  }

  /**
   * {@return the cluster seeds or sentinels, as {@code redis://host:port} or
   * {@code rediss://host:port} ({@value #NODES}); empty in standalone mode}
   */
  public List<URI> nodes() {
    return nodes;
  }

  /** {@return the master name the sentinels monitor ({@value #SENTINEL_MASTER})} */
  public Optional<String> sentinelMaster() {
    return Optional.ofNullable(sentinelMaster);
  }

  /** {@return the ACL user: the {@value #USERNAME} setting, else the one in the address URI} */
  public Optional<String> username() {
    return Optional.ofNullable(username);
  }

  /** {@return the password: the {@value #PASSWORD} setting, else the one in the address URI} */
  public Optional<String> password() {
    return Optional.ofNullable(password);
  }

  /** {@return the database index ({@value #DATABASE}, else the address URI's path, else 0)} */
  public int database() {
    return database;
  }

  /** {@return the connect and socket timeout ({@value #TIMEOUT})} */
  public Duration timeout() {
    return timeout;
  }

  /** {@return the number of command connections per node ({@value #POOL_MAX_SIZE})} */
  public int poolMaxSize() {
    return poolMaxSize;
  }

  /**
   * {@return how long a fair lock's waiter may go without showing it is alive before it loses
   * its place ({@value #FAIR_WAITER_TIMEOUT})}
   */
  public Duration fairWaiterTimeout() {
    return fairWaiterTimeout;
  }

  /** {@return the watchdog lease, renewed every third of it ({@value #WATCHDOG_TIMEOUT})} */
  public Duration watchdogTimeout() {
    return watchdogTimeout;
  }

  /** {@return the prefix of every lock key, possibly empty ({@value #KEY_PREFIX})} */
  public String keyPrefix() {
    return keyPrefix;
  }

  /**
   * {@return the replica acknowledgements every lock-state change waits for}:
   * {@link #SYNC_REPLICAS_AUTO}, {@link #SYNC_REPLICAS_NONE} or a positive number
   */
  public int syncReplicas() {
    return syncReplicas;
  }

  /** {@return how long a lock-state change waits for replica acknowledgements} */
  public Duration syncTimeout() {
    return syncTimeout;
  }

  /**
   * {@return whether creating a client checks that Redis answers ({@value #CONNECT_AT_STARTUP})}
   */
  public boolean connectAtStartup() {
    return connectAtStartup;
  }

  /** {@return whether connections use TLS ({@code rediss://} addresses)} */
  public boolean tls() {
    return mode == Mode.STANDALONE
        ? "rediss".equals(address.getScheme())
        : nodes.stream().anyMatch(n -> "rediss".equals(n.getScheme()));
  }

  /** {@return the TLS socket factory set on the builder, if any; else the JVM default is used} */
  public Optional<SSLSocketFactory> sslSocketFactory() {
    return Optional.ofNullable(sslSocketFactory);
  }

  /**
   * {@return the Micrometer {@code MeterRegistry} that lock meters are published to, if one was
   * set with {@link Builder#meterRegistry(Object)}}
   */
  public Optional<Object> meterRegistry() {
    return Optional.ofNullable(meterRegistry);
  }

  @Override
  public String toString() {
    return "LockClientConfig{mode=" + mode.name().toLowerCase(Locale.ROOT)
        + (mode == Mode.STANDALONE ? ", address=" + ConfigValues.redact(address)
            : ", nodes=" + nodes.stream().map(ConfigValues::redact).toList())
        + (sentinelMaster == null ? "" : ", sentinelMaster=" + sentinelMaster)
        + (username == null ? "" : ", username=" + username)
        + (password == null ? "" : ", password=***")
        + ", database=" + database + ", timeout=" + timeout + ", poolMaxSize=" + poolMaxSize
        + ", watchdogTimeout=" + watchdogTimeout + ", fairWaiterTimeout=" + fairWaiterTimeout
        + ", keyPrefix='" + keyPrefix + "'"
        + ", syncReplicas=" + (syncReplicas == SYNC_REPLICAS_AUTO ? "auto"
            : syncReplicas == SYNC_REPLICAS_NONE ? "none" : Integer.toString(syncReplicas))
        + ", syncTimeout=" + syncTimeout + ", connectAtStartup=" + connectAtStartup + "}";
  }

  /**
   * Collects settings; {@link #build()} checks that they fit together. Setters throw
   * {@link IllegalArgumentException} for a value that can never be right. Not thread-safe.
   */
  public static final class Builder {
    private Mode mode = Mode.STANDALONE;
    private URI address = URI.create(DEFAULT_ADDRESS);
    private List<URI> nodes = List.of();
    private String sentinelMaster;
    private String username;
    private String password;
    private Integer database;
    private Duration timeout = Duration.ofSeconds(2);
    private int poolMaxSize = 64;
    private Duration watchdogTimeout = Duration.ofSeconds(30);
    private Duration fairWaiterTimeout = Duration.ofSeconds(5);
    private String keyPrefix = "";
    private int syncReplicas = SYNC_REPLICAS_AUTO;
    private Duration syncTimeout = Duration.ofSeconds(1);
    private boolean connectAtStartup = true;
    private SSLSocketFactory sslSocketFactory;
    private Object meterRegistry;

    private Builder() {
    }

    /**
     * Sets how Holdfast finds the Redis servers ({@value #MODE}); the default is
     * {@link Mode#STANDALONE}.
     *
     * @param mode the topology
     * @return this builder
     */
    public Builder mode(Mode mode) {
      this.mode = Objects.requireNonNull(mode, "mode");
      return this;
    }

    /**
     * Sets the standalone server ({@value #ADDRESS}); the default is
     * {@code redis://localhost:6379}.
     *
     * @param uri {@code redis://host:port} or {@code rediss://host:port} (TLS), optionally with
     *     user info and a database path ({@code redis://user:secret@host:6379/2}), or a bare
     *     {@code host:port}
     * @return this builder
     * @throws IllegalArgumentException if it is not such a URI (the message never shows the
     *     password)
     */
    public Builder address(String uri) {
      this.address = ConfigValues.redisUri(ADDRESS, uri);
      return this;
    }

    /**
     * Sets the cluster seeds or the sentinels ({@value #NODES}).
     *
     * @param nodes {@code host:port}, {@code redis://host:port} or {@code rediss://host:port}
     *     entries, all with the same scheme
     * @return this builder
     * @throws IllegalArgumentException if an entry is not such an address
     */
    public Builder nodes(List<String> nodes) {
      Objects.requireNonNull(nodes, "nodes");
      this.nodes = nodes.stream().map(n -> ConfigValues.redisUri(NODES, n)).toList();
      return this;
    }

    /**
     * Sets the master name the sentinels monitor ({@value #SENTINEL_MASTER}); required in
     * sentinel mode.
     *
     * @param name the master name
     * @return this builder
     * @throws IllegalArgumentException if it is blank
     */
    public Builder sentinelMaster(String name) {
      this.sentinelMaster = ConfigValues.nonBlank(SENTINEL_MASTER, name);
      return this;
    }

    /**
     * Sets the ACL user ({@value #USERNAME}), overriding the address URI's.
     *
     * @param username the user name
     * @return this builder
     * @throws IllegalArgumentException if it is blank
     */
    public Builder username(String username) {
      this.username = ConfigValues.nonBlank(USERNAME, username);
      return this;
    }

    /**
     * Sets the password ({@value #PASSWORD}), overriding the address URI's. Taken verbatim.
     *
     * @param password the password
     * @return this builder
     */
    public Builder password(String password) {
      this.password = Objects.requireNonNull(password, PASSWORD);
      return this;
    }

    /**
     * Sets the database index ({@value #DATABASE}), overriding the address URI's path; only 0
     * is possible in cluster mode.
     *
     * @param database the index
     * @return this builder
     * @throws IllegalArgumentException if it is negative
     */
    public Builder database(int database) {
      if (database < 0) {
        throw new IllegalArgumentException(DATABASE + " must not be negative, but was " + database);
      }
      this.database = database;
      return this;
    }

    /**
     * Sets the connect and socket timeout ({@value #TIMEOUT}); the default is 2 s.
     *
     * @param timeout a positive duration
     * @return this builder
     * @throws IllegalArgumentException if it is not positive
     */
    public Builder timeout(Duration timeout) {
      this.timeout = ConfigValues.positive(TIMEOUT, timeout);
      return this;
    }

    /**
     * Sets the number of command connections per node ({@value #POOL_MAX_SIZE}); the default is
     * 64. Waiting threads use none. A queue, not a limit: a call waits for a free connection;
     * acquisitions and queries use at most three quarters of the pool (all of a pool of one),
     * so releases, handoffs, renewals and settling always find the rest.
     *
     * @param size at least 1
     * @return this builder
     * @throws IllegalArgumentException if it is less than 1
     */
    public Builder poolMaxSize(int size) {
      if (size < 1) {
        throw new IllegalArgumentException(POOL_MAX_SIZE + " must be at least 1, but was " + size);
      }
      this.poolMaxSize = size;
      return this;
    }

    /**
     * Sets the watchdog lease ({@value #WATCHDOG_TIMEOUT}), renewed every third of it; the
     * default is 30 s.
     *
     * @param timeout at least 300 ms
     * @return this builder
     * @throws IllegalArgumentException if it is shorter
     */
    public Builder watchdogTimeout(Duration timeout) {
      ConfigValues.positive(WATCHDOG_TIMEOUT, timeout);
      if (timeout.toMillis() < 300) {
        throw new IllegalArgumentException(
            WATCHDOG_TIMEOUT + " must be at least 300ms, but was " + timeout.toMillis() + "ms");
      }
      this.watchdogTimeout = timeout;
      return this;
    }

    /**
     * Sets how long a fair lock's waiter may go without showing it is alive before it loses its
     * place in the queue ({@value #FAIR_WAITER_TIMEOUT}); the default is 5 s. A waiting thread
     * shows it about three times per timeout, so only a waiter whose process died or lost Redis
     * is dropped; after its drop the next waiter gets its turn.
     *
     * @param timeout at least 300 ms
     * @return this builder
     * @throws IllegalArgumentException if it is shorter
     */
    public Builder fairWaiterTimeout(Duration timeout) {
      ConfigValues.positive(FAIR_WAITER_TIMEOUT, timeout);
      if (timeout.toMillis() < 300) {
        throw new IllegalArgumentException(FAIR_WAITER_TIMEOUT + " must be at least 300ms, but was "
            + timeout.toMillis() + "ms");
      }
      this.fairWaiterTimeout = timeout;
      return this;
    }

    /**
     * Sets the prefix of every lock key ({@value #KEY_PREFIX}), taken verbatim; the default is
     * empty.
     *
     * @param prefix e.g. {@code billing:}
     * @return this builder
     */
    public Builder keyPrefix(String prefix) {
      this.keyPrefix = Objects.requireNonNull(prefix, KEY_PREFIX);
      return this;
    }

    /**
     * Sets which replica acknowledgements every lock-state change (acquisition, re-entry,
     * release, renewal, force-release) waits for with {@code WAIT} ({@value #SYNC_REPLICAS}):
     * <ul>
     *   <li>{@link #SYNC_REPLICAS_AUTO} (the default): the replicas connected to the master at that
     *       moment; when some are connected but none acknowledged within
     *       {@link #syncTimeout(Duration)}, an acquisition is rolled back and not granted. With no
     *       replica connected nothing is waited for and no round trip is added.</li>
     *   <li>{@link #SYNC_REPLICAS_NONE}: never waits (no {@code WAIT} is sent).</li>
     *   <li>a positive number: at least that many replicas must acknowledge, else an acquisition
     *       is rolled back and not granted.</li>
     * </ul>
     * A release or renewal that was not acknowledged is reported (logged), and an unacknowledged
     * renewal does not extend the hold's confirmed lease. {@code WAIT} narrows the failover window
     * of asynchronous replication; it is not consensus.
     *
     * @param replicas {@link #SYNC_REPLICAS_AUTO}, {@link #SYNC_REPLICAS_NONE} or a positive number
     * @return this builder
     * @throws IllegalArgumentException if it is none of these
     */
    public Builder syncReplicas(int replicas) {
      if (replicas < SYNC_REPLICAS_AUTO) {
        throw new IllegalArgumentException(SYNC_REPLICAS + " must be auto (" + SYNC_REPLICAS_AUTO
            + "), none (" + SYNC_REPLICAS_NONE + ") or a positive number, but was " + replicas);
      }
      this.syncReplicas = replicas;
      return this;
    }

    /**
     * Sets how long a lock-state change waits for replica acknowledgements
     * ({@value #SYNC_TIMEOUT}); the default is 1 s.
     *
     * @param timeout positive
     * @return this builder
     * @throws IllegalArgumentException if it is not positive
     */
    public Builder syncTimeout(Duration timeout) {
      ConfigValues.positive(SYNC_TIMEOUT, timeout);
      this.syncTimeout = timeout;
      return this;
    }

    /**
     * Sets whether {@link LockClient#create(LockClientConfig)} checks that Redis answers
     * ({@value #CONNECT_AT_STARTUP}); the default is {@code true}.
     * <ul>
     *   <li>{@code true}: creating the client connects, authenticates and sends {@code PING}
     *       within {@link #timeout(Duration)} — to the standalone server, to the master the
     *       sentinels name, or to a cluster primary — and fails with a {@link LockException}
     *       naming the address and the cause (refused, authentication, timeout) if it cannot. In
     *       CDI this fails the deployment or the application's start.</li>
     *   <li>{@code false}: for applications that must start while Redis is down. A standalone
     *       client is created without any I/O; its first lock call meets the outage as any later
     *       call would (a waiting call rides it out, {@code tryLock()} fails fast). Sentinel and
     *       cluster clients still need a sentinel that knows the master, or a cluster seed,
     *       to discover the topology when they are created; only the check of the master is
     *       skipped.</li>
     * </ul>
     *
     * @param connect whether to check the connection when the client is created
     * @return this builder
     */
    public Builder connectAtStartup(boolean connect) {
      this.connectAtStartup = connect;
      return this;
    }

    /**
     * Sets the TLS socket factory for {@code rediss://} connections, e.g. one trusting a private
     * CA; without one, the JVM's default trust store is used.
     *
     * @param factory the factory
     * @return this builder
     */
    public Builder sslSocketFactory(SSLSocketFactory factory) {
      this.sslSocketFactory = Objects.requireNonNull(factory, "sslSocketFactory");
      return this;
    }

    /**
     * Publishes lock meters ({@code holdfast.lock.wait}, {@code holdfast.lock.held},
     * {@code holdfast.lock.active}, {@code holdfast.lock.waiting}, {@code holdfast.lock.renewals},
     * {@code holdfast.lock.lost}, {@code holdfast.redis.errors}; see docs/operations.md,
     * "Metrics") to a Micrometer registry. Without one, no meters are kept. In a CDI container
     * Holdfast finds the container's registry itself.
     *
     * <p>The parameter is typed {@code Object} so that this API, and applications without
     * Micrometer, never need Micrometer's classes; it must be an
     * {@code io.micrometer.core.instrument.MeterRegistry} of the Micrometer that Holdfast's class
     * loader sees.
     *
     * @param registry a {@code MeterRegistry}, e.g. the application's
     *     {@code PrometheusMeterRegistry}
     * @return this builder
     * @throws IllegalArgumentException if it is not a {@code MeterRegistry}, or Micrometer is not
     *     visible to Holdfast
     */
    public Builder meterRegistry(Object registry) {
      Objects.requireNonNull(registry, "meterRegistry");
      String type = "io.micrometer.core.instrument.MeterRegistry";
      boolean named = false;
      for (Class<?> c = registry.getClass(); c != null && !named; c = c.getSuperclass()) {
        named = c.getName().equals(type);
      }
      if (!named) {
        throw new IllegalArgumentException("meterRegistry must be a " + type + ", but was a "
            + registry.getClass().getName());
      }
      try {
        if (!Class.forName(type, false, LockClientConfig.class.getClassLoader())
            .isInstance(registry)) {
          throw new IllegalArgumentException("meterRegistry is a " + type + " from another "
              + "class loader than the Micrometer Holdfast sees");
        }
      } catch (ClassNotFoundException e) {
        throw new IllegalArgumentException("meterRegistry is a " + type + ", but Holdfast's "
            + "class loader does not see Micrometer", e);
      }
      this.meterRegistry = registry;
      return this;
    }

    /**
     * Checks the settings against each other and the mode, fills credentials and database from
     * the address URI where not set explicitly, and builds the configuration.
     *
     * @return the configuration
     * @throws IllegalArgumentException naming the keys that contradict each other
     */
    public LockClientConfig build() {
      switch (mode) {
        case STANDALONE -> {
          ConfigValues.UserInfo info = ConfigValues.userInfo(address);
          if (username == null) {
            username = info.username();
          }
          if (password == null) {
            password = info.password();
          }
          Integer fromPath = ConfigValues.databaseFromPath(address);
          if (database == null) {
            database = fromPath;
          }
        }
        case SENTINEL -> {
          requireNodes("sentinel");
          if (sentinelMaster == null) {
            throw new IllegalArgumentException(
                SENTINEL_MASTER + " is required when " + MODE + "=sentinel");
          }
        }
        case CLUSTER -> {
          requireNodes("cluster");
          if (database != null && database != 0) {
            throw new IllegalArgumentException(DATABASE + "=" + database
                + " is not possible with " + MODE + "=cluster: Redis Cluster has only database 0");
          }
        }
      }
      if (mode != Mode.STANDALONE) {
        long schemes = nodes.stream().map(URI::getScheme).distinct().count();
        if (schemes > 1) {
          throw new IllegalArgumentException(
              NODES + " mixes redis:// and rediss:// entries; use one scheme for all nodes");
        }
      }
      if (database == null) {
        database = 0;
      }
      return new LockClientConfig(this);
    }

    private void requireNodes(String modeName) {
      if (nodes.isEmpty()) {
        throw new IllegalArgumentException(NODES + " is required when " + MODE + "=" + modeName);
      }
    }
  }
}
