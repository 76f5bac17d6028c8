package dev.holdfast.engine;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on 127.0.0.1 in front of one Redis server that can make Redis unreachable for the
 * clients behind it only, while other clients keep talking to Redis directly:
 * <ul>
 *   <li>{@link #blackHole(boolean)}: every byte in either direction is swallowed; connections
 *       (new ones included) stay open and silent, as with a network partition;</li>
 *   <li>{@link #runNextScriptThenBlackHole()}: the next script call reaches Redis and runs, then
 *       the link goes black at once, so its reply and everything after are swallowed — an outcome
 *       the client cannot know, followed by an outage that defeats any undo;</li>
 *   <li>{@link #runNextScriptsThenBlackHole(int)}: the same after {@code n} script calls, each of
 *       which runs with its reply (and anything after it on its connection) lost — e.g. a first
 *       attempt and its sealed retry that both ran unanswered;</li>
 *   <li>{@link #dropScriptReplies(boolean)}: script calls reach Redis and run, their replies (and
 *       anything after them on that connection) never come back;</li>
 *   <li>{@link #holdScriptReplies(boolean)}: script calls reach Redis and run, their replies wait
 *       in the proxy until the hold is switched off (then they are delivered, late) or
 *       {@link #cutHeldReplies()} closes their connections (the client sees the connection
 *       drop, and re-sends at once) — a reply exactly as late as a test needs.</li>
 * </ul>
 * Requests are recognised per read, which suffices for the one-command-at-a-time traffic of a
 * lock client. A swallowed {@code NOSCRIPT} reply means the script never ran: let the client
 * load its scripts before arming a fault. Minimal on purpose, for the safety regression tests
 * (the shared fault proxy of {@code dev.holdfast.testing} may replace it); thread-safe.
 */
final class BlackHoleProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int upstreamPort;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  /** Script calls still to run (replies lost) before the link goes black; 0: not armed. */
  private final AtomicInteger scriptsBeforeBlackHole = new AtomicInteger();
  private volatile boolean blackHole;
  private volatile boolean dropScriptReplies;
  private volatile boolean holdScriptReplies;
  /** Client sockets whose script reply is held now. */
  private final java.util.Set<Socket> holding = java.util.concurrent.ConcurrentHashMap.newKeySet();
  private final AtomicInteger held = new AtomicInteger();
  private volatile boolean closed;

  /** Starts forwarding 127.0.0.1:{@link #port()} to 127.0.0.1:{@code upstreamPort}. */
  BlackHoleProxy(int upstreamPort) throws IOException {
    this.upstreamPort = upstreamPort;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread acceptor = new Thread(this::accept, "black-hole-proxy");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  int port() {
    return listener.getLocalPort();
  }

  String uri() {
    return "redis://127.0.0.1:" + port();
  }

  void blackHole(boolean on) {
    blackHole = on;
  }

  /** Whether the link is black now (also after {@link #runNextScriptThenBlackHole()} fired). */
  boolean blackHoled() {
    return blackHole;
  }

  void runNextScriptThenBlackHole() {
    runNextScriptsThenBlackHole(1);
  }

  void runNextScriptsThenBlackHole(int scripts) {
    scriptsBeforeBlackHole.set(scripts);
  }

  void dropScriptReplies(boolean on) {
    dropScriptReplies = on;
  }

  void holdScriptReplies(boolean on) {
    holdScriptReplies = on;
  }

  /** How many script replies were held so far ({@link #holdScriptReplies(boolean)}). */
  int heldReplies() {
    return held.get();
  }

  /** Closes the connections whose script reply is held: the replies are lost. */
  void cutHeldReplies() {
    for (Socket s : holding) {
      closeQuietly(s);
    }
  }

  private void accept() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (!closed) {
          throw new IllegalStateException(e);
        }
        return;
      }
      try {
        Socket server = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
        sockets.add(client);
        sockets.add(server);
        AtomicBoolean muted = new AtomicBoolean();
        AtomicBoolean script = new AtomicBoolean();
        pump(client, server, muted, script, true);
        pump(server, client, muted, script, false);
      } catch (IOException e) {
        // Redis is down (e.g. killed by the test): the client sees its connection close.
        closeQuietly(client);
      }
    }
  }

  private void pump(Socket from, Socket to, AtomicBoolean muted, AtomicBoolean script,
      boolean requests) {
    Thread t = new Thread(() -> {
      byte[] buffer = new byte[16 * 1024];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buffer)) >= 0) {
          if (blackHole) {
            continue;
          }
          if (requests) {
            script.set(isScriptCall(buffer, n));
          }
          if (requests && script.get()) {
            int left = scriptsBeforeBlackHole.getAndUpdate(k -> Math.max(0, k - 1));
            if (left == 1) {
              blackHole = true; // before forwarding: the reply must not get through
            } else if (left > 1 || dropScriptReplies) {
              muted.set(true);
            }
          }
          if (!requests && muted.get()) {
            continue;
          }
          if (!requests && script.get() && holdScriptReplies) {
            holding.add(to);
            held.incrementAndGet();
            try {
              while (holdScriptReplies && !to.isClosed() && !closed) {
                Thread.sleep(1);
              }
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              return;
            } finally {
              holding.remove(to);
            }
          }
          out.write(buffer, 0, n);
          out.flush();
        }
      } catch (IOException e) {
        // one side closed: close the other so the peer notices
      } finally {
        closeQuietly(from);
        closeQuietly(to);
      }
    }, "black-hole-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  private static boolean isScriptCall(byte[] buffer, int length) {
    String request = new String(buffer, 0, Math.min(length, 64), StandardCharsets.US_ASCII);
    return request.toUpperCase(Locale.ROOT).contains("EVAL");
  }

  @Override
  public void close() {
    closed = true;
    closeQuietly(listener);
    sockets.forEach(BlackHoleProxy::closeQuietly);
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing anyway
    }
  }
}
