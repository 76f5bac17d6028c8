package dev.holdfast.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A TCP proxy on 127.0.0.1 in front of one Redis server on 127.0.0.1, with faults a test can
 * switch on and off while clients are connected:
 *
 * <ul>
 *   <li>{@link #dropReplies(int)}: the next replies to script calls ({@code EVAL}/{@code EVALSHA})
 *       are swallowed. The request reaches Redis and runs; the client never hears back, times
 *       out and retries — the situation in which a non-idempotent script would apply twice.
 *       Other commands (handshakes, pool checks, queries) pass.</li>
 *   <li>{@link #delay(Duration)}: added latency in each direction (a round trip costs twice
 *       the delay on top of Redis' own time).</li>
 *   <li>{@link #blackHole(boolean)}: a half-dead network. Nothing is forwarded in either
 *       direction, but every socket stays open, so clients see timeouts, not errors; new
 *       connections are accepted (the client's connect succeeds) but not forwarded, nor even
 *       connected to Redis. <b>Bytes are held, not dropped</b>, as a network that heals lets TCP
 *       retransmit them: when the black hole is switched off they are delivered late, in order,
 *       including a close (FIN or reset) that happened meanwhile — so a request whose client gave
 *       up during the outage still reaches Redis afterwards. Each direction of each connection
 *       holds at most {@value #BUFFER_LIMIT_BYTES} bytes; beyond that the proxy stops reading and
 *       TCP flow control pushes back on the sender, as a full network would.</li>
 *   <li>{@link #resetAll()}: every connection is closed abruptly, with a reset ({@code RST},
 *       through {@code SO_LINGER 0}) on both the client's and Redis' side.</li>
 * </ul>
 *
 * <p>Faults combine: bytes are delayed, then held while the black hole is on, then delivered.
 * The delay of a chunk is fixed when the proxy reads it, so lowering the delay does not reorder
 * anything. If Redis is down, a new connection is reset as soon as the proxy fails to connect
 * upstream (like a refused connection); when Redis dies, the proxy forwards the close it sees.
 *
 * <p>Limits: reply dropping recognises script calls and their replies per read, which matches
 * clients that do not pipeline scripts (Jedis, Holdfast); at most {@code maxConnections} client
 * connections are open at once (more are reset at once), each served by four daemon threads.
 * Listens on 127.0.0.1 only and connects only to 127.0.0.1.
 *
 * <p>Thread-safe: faults may be switched from any thread while traffic flows.
 * {@link #close()} is idempotent.
 */
public final class FaultProxy implements AutoCloseable {

  /** Connections served at once unless the constructor says otherwise. */
  public static final int DEFAULT_MAX_CONNECTIONS = 64;
  static final int BUFFER_LIMIT_BYTES = 1 << 20;

  private static final int CHUNK_BYTES = 16 * 1024;
  private static final int UPSTREAM_CONNECT_TIMEOUT_MS = 1_000;
  /** Bytes of a request inspected for a script command name. */
  private static final int COMMAND_PEEK_BYTES = 64;

  private final int upstreamPort;
  private final int maxConnections;
  private final ServerSocket listener;
  private final Set<Link> links = ConcurrentHashMap.newKeySet();
  private final AtomicInteger repliesToDrop = new AtomicInteger();
  private final AtomicLong accepted = new AtomicLong();
  private final AtomicLong refused = new AtomicLong();
  private final AtomicLong resets = new AtomicLong();
  private final AtomicInteger linkIds = new AtomicInteger();
  private volatile long delayNanos;
  private volatile boolean blackHole;
  private volatile boolean closed;

  /** Starts forwarding 127.0.0.1:{@link #port()} to 127.0.0.1:{@code upstreamPort}. */
  public FaultProxy(int upstreamPort) throws IOException {
    this(upstreamPort, DEFAULT_MAX_CONNECTIONS);
  }

  /**
   * Like {@link #FaultProxy(int)}, serving at most {@code maxConnections} connections at once.
   *
   * @throws IllegalArgumentException if a value is out of range
   */
  public FaultProxy(int upstreamPort, int maxConnections) throws IOException {
    if (upstreamPort <= 0 || upstreamPort > 65_535) {
      throw new IllegalArgumentException("upstreamPort out of range: " + upstreamPort);
    }
    if (maxConnections <= 0) {
      throw new IllegalArgumentException("maxConnections must be positive: " + maxConnections);
    }
    this.upstreamPort = upstreamPort;
    this.maxConnections = maxConnections;
    this.listener = new ServerSocket(0, 50, LoopbackPorts.LOOPBACK);
    daemon("fault-proxy-" + port() + "-accept", this::accept).start();
  }

  /** The port this proxy listens on (127.0.0.1). */
  public int port() {
    return listener.getLocalPort();
  }

  /** {@code redis://127.0.0.1:<port>}. */
  public String uri() {
    return "redis://" + RedisServer.HOST + ":" + port();
  }

  /**
   * The replies to the next {@code count} script calls to reach Redis, on any connection, are
   * discarded; 0 disarms. Replaces any count still pending.
   *
   * @throws IllegalArgumentException if {@code count} is negative
   */
  public void dropReplies(int count) {
    if (count < 0) {
      throw new IllegalArgumentException("count must not be negative: " + count);
    }
    repliesToDrop.set(count);
  }

  /** How many armed drops have not happened yet. */
  public int pendingDrops() {
    return repliesToDrop.get();
  }

  /**
   * Adds {@code delay} of latency to every chunk read from now on, in each direction;
   * {@link Duration#ZERO} stops adding it.
   *
   * @throws IllegalArgumentException if {@code delay} is negative
   */
  public void delay(Duration delay) {
    Objects.requireNonNull(delay, "delay");
    if (delay.isNegative()) {
      throw new IllegalArgumentException("delay must not be negative: " + delay);
    }
    delayNanos = delay.toNanos();
  }

  /** The latency currently added in each direction. */
  public Duration delay() {
    return Duration.ofNanos(delayNanos);
  }

  /**
   * Stops ({@code true}) or resumes ({@code false}) forwarding in both directions, keeping every
   * connection open; see the class comment for what happens to the bytes meanwhile.
   */
  public void blackHole(boolean on) {
    blackHole = on;
    links.forEach(Link::wake);
  }

  /** Whether forwarding is stopped by {@link #blackHole(boolean)}. */
  public boolean isBlackHoled() {
    return blackHole;
  }

  /**
   * Resets every open connection (both sides, {@code RST}); bytes held for them are dropped.
   * New connections are accepted as usual.
   *
   * @return how many connections were reset
   */
  public int resetAll() {
    int count = 0;
    for (Link link : links) {
      if (link.close(true)) {
        count++;
      }
    }
    resets.addAndGet(count);
    return count;
  }

  /**
   * Bytes of requests read from clients and not yet delivered to Redis (held back by
   * {@link #delay(Duration)} or {@link #blackHole(boolean)}), over every connection: 0 once every
   * request sent so far — a late copy included — has been handed to Redis.
   */
  public long pendingRequestBytes() {
    long bytes = 0;
    for (Link link : links) {
      bytes += link.up.queuedBytes();
    }
    return bytes;
  }

  /** Client connections open now. */
  public int openConnections() {
    return links.size();
  }

  /** Client connections accepted and served so far (not counting those refused over the limit). */
  public long acceptedConnections() {
    return accepted.get();
  }

  /** Connections reset on arrival because {@code maxConnections} were open. */
  public long refusedConnections() {
    return refused.get();
  }

  /** Stops listening and resets every connection. Idempotent. */
  @Override
  public void close() {
    closed = true;
    closeQuietly(listener);
    resetAll();
  }

  @Override
  public String toString() {
    return "FaultProxy[127.0.0.1:" + port() + " -> 127.0.0.1:" + upstreamPort + "]";
  }

  private void accept() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (closed) {
          return;
        }
        continue; // a failed accept (e.g. the peer reset during the handshake) is not fatal
      }
      if (links.size() >= maxConnections) {
        refused.incrementAndGet();
        reset(client);
        continue;
      }
      accepted.incrementAndGet();
      Link link = new Link(client, linkIds.incrementAndGet());
      links.add(link);
      if (closed) {
        link.close(true);
        return;
      }
      link.start();
    }
  }

  /**
   * One client connection and its upstream connection: two directions, each with a reader
   * thread that queues what it reads and a writer thread that delivers it when due.
   */
  private final class Link {
    final Socket client;
    final String name;
    final Direction up;
    final Direction down;
    /** Replies still to drop on this connection: script calls sent while drops were armed. */
    final AtomicInteger scriptRepliesToDrop = new AtomicInteger();
    /** Set by the upstream writer once connected; read by the others after that. */
    volatile Socket server;
    private boolean done;

    Link(Socket client, int id) {
      this.client = client;
      this.name = "fault-proxy-" + port() + "-" + id;
      this.up = new Direction(this, true);
      this.down = new Direction(this, false);
    }

    void start() {
      daemon(name + "-up-read", () -> up.read(client)).start();
      daemon(name + "-up-write", this::connectAndForwardUp).start();
    }

    private void connectAndForwardUp() {
      // Held requests must not reach Redis while the black hole is on: connect only after it.
      if (!up.awaitOpenNetwork()) {
        return;
      }
      Socket upstream = new Socket();
      try {
        upstream.setTcpNoDelay(true);
        upstream.connect(new InetSocketAddress(LoopbackPorts.LOOPBACK, upstreamPort),
            UPSTREAM_CONNECT_TIMEOUT_MS);
      } catch (IOException e) {
        closeQuietly(upstream);
        close(true); // like a refused connection
        return;
      }
      synchronized (this) {
        if (done) {
          reset(upstream);
          return;
        }
        server = upstream;
      }
      daemon(name + "-down-read", () -> down.read(upstream)).start();
      daemon(name + "-down-write", () -> down.write(client)).start();
      up.write(upstream);
    }

    /** Closes both sides (with a reset if {@code abrupt}); true if this call closed it. */
    boolean close(boolean abrupt) {
      Socket upstream;
      synchronized (this) {
        if (done) {
          return false;
        }
        done = true;
        upstream = server;
      }
      links.remove(this);
      if (abrupt) {
        reset(client);
        if (upstream != null) {
          reset(upstream);
        }
      } else {
        closeQuietly(client);
        if (upstream != null) {
          closeQuietly(upstream);
        }
      }
      wake();
      return true;
    }

    synchronized boolean isDone() {
      return done;
    }

    void wake() {
      up.wake();
      down.wake();
    }
  }

  /** One direction of a link: a bounded queue of chunks, each with the time it is due. */
  private final class Direction {
    private final Link link;
    /** Client to Redis (requests) when true, else Redis to client (replies). */
    private final boolean requests;
    private final ArrayDeque<Chunk> queue = new ArrayDeque<>();
    private int queuedBytes;

    Direction(Link link, boolean requests) {
      this.link = link;
      this.requests = requests;
    }

    /** Reader thread: queues what {@code from} sends, then an end marker. */
    void read(Socket from) {
      boolean reset = false;
      byte[] buffer = new byte[CHUNK_BYTES];
      try {
        InputStream in = from.getInputStream();
        int n;
        while ((n = in.read(buffer)) >= 0) {
          if (!requests && link.scriptRepliesToDrop.getAndUpdate(left -> Math.max(0, left - 1))
              > 0) {
            continue;
          }
          if (!put(new Chunk(Arrays.copyOf(buffer, n), System.nanoTime() + delayNanos, false))) {
            return;
          }
        }
      } catch (IOException e) {
        reset = true; // a reset, or our own close
      }
      put(new Chunk(null, System.nanoTime() + delayNanos, reset));
    }

    /** Writer thread: delivers chunks to {@code to} when due and the network is open. */
    void write(Socket to) {
      try {
        OutputStream out = to.getOutputStream();
        Chunk chunk;
        while ((chunk = take()) != null) {
          if (chunk.bytes == null) {
            link.close(chunk.reset);
            return;
          }
          if (requests && isScriptCall(chunk.bytes)
              && repliesToDrop.getAndUpdate(left -> Math.max(0, left - 1)) > 0) {
            link.scriptRepliesToDrop.incrementAndGet();
          }
          out.write(chunk.bytes);
          out.flush();
        }
      } catch (IOException e) {
        link.close(true);
      }
    }

    /** Waits until the black hole is off; false if the link closed meanwhile. */
    synchronized boolean awaitOpenNetwork() {
      while (blackHole && !link.isDone()) {
        waitQuietly(0);
      }
      return !link.isDone();
    }

    private synchronized boolean put(Chunk chunk) {
      while (chunk.bytes != null && queuedBytes >= BUFFER_LIMIT_BYTES && !link.isDone()) {
        waitQuietly(0);
      }
      if (link.isDone()) {
        return false;
      }
      queue.add(chunk);
      queuedBytes += chunk.size();
      notifyAll();
      return true;
    }

    /** The next chunk once it is due and the network is open; null when the link is closed. */
    private synchronized Chunk take() {
      while (!link.isDone()) {
        Chunk head = queue.peek();
        if (head == null || blackHole) {
          waitQuietly(0);
          continue;
        }
        long wait = head.dueNanos - System.nanoTime();
        if (wait > 0) {
          waitQuietly(Math.max(1, wait / 1_000_000));
          continue;
        }
        queue.poll();
        queuedBytes -= head.size();
        notifyAll();
        return head;
      }
      return null;
    }

    synchronized void wake() {
      notifyAll();
    }

    synchronized int queuedBytes() {
      return queuedBytes;
    }

    /** Caller holds this monitor. Proxy threads are private and never interrupted. */
    private void waitQuietly(long millis) {
      try {
        wait(millis);
      } catch (InterruptedException e) {
        // Not restored: the loops around every wait re-check their condition anyway.
      }
    }
  }

  /** Bytes read at once, or the end of a direction ({@code bytes == null}). */
  private record Chunk(byte[] bytes, long dueNanos, boolean reset) {
    int size() {
      return bytes == null ? 0 : bytes.length;
    }
  }

  private static boolean isScriptCall(byte[] request) {
    String head = new String(request, 0, Math.min(request.length, COMMAND_PEEK_BYTES),
        StandardCharsets.US_ASCII);
    return head.toUpperCase(Locale.ROOT).contains("EVAL");
  }

  private static Thread daemon(String name, Runnable body) {
    Thread t = new Thread(body, name);
    t.setDaemon(true);
    return t;
  }

  /** Closes with {@code SO_LINGER 0}, so the peer gets a reset instead of an orderly close. */
  private static void reset(Socket socket) {
    try {
      socket.setSoLinger(true, 0);
    } catch (IOException e) {
      // already closed: nothing to reset
    }
    closeQuietly(socket);
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing anyway
    }
  }
}
