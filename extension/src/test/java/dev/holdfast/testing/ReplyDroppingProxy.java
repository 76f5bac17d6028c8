package dev.holdfast.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on 127.0.0.1 in front of a Redis server that can swallow replies: the request
 * reaches Redis and runs, but the client never hears back, times out and retries — the exact
 * situation in which a non-idempotent script would be applied twice. Only replies to script
 * calls ({@code EVAL}/{@code EVALSHA}) are dropped, so connection handshakes and pool checks pass.
 */
public final class ReplyDroppingProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int upstreamPort;
  private final AtomicInteger repliesToDrop = new AtomicInteger();
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private volatile boolean closed;

  /** Starts forwarding 127.0.0.1:{@link #port()} to 127.0.0.1:{@code upstreamPort}. */
  public ReplyDroppingProxy(int upstreamPort) throws IOException {
    this.upstreamPort = upstreamPort;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread acceptor = new Thread(this::accept, "reply-dropping-proxy");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  public int port() {
    return listener.getLocalPort();
  }

  public String uri() {
    return "redis://127.0.0.1:" + port();
  }

  /** The replies to the next {@code count} script calls, on any connection, are discarded. */
  public void dropReplies(int count) {
    repliesToDrop.set(count);
  }

  /** How many armed drops have not happened yet. */
  public int pendingDrops() {
    return repliesToDrop.get();
  }

  private void accept() {
    while (!closed) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
        sockets.add(client);
        sockets.add(server);
        AtomicInteger scriptRepliesToDrop = new AtomicInteger();
        pump(client, server, scriptRepliesToDrop, false);
        pump(server, client, scriptRepliesToDrop, true);
      } catch (IOException e) {
        if (!closed) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  private void pump(Socket from, Socket to, AtomicInteger scriptRepliesToDrop, boolean replies) {
    Thread t = new Thread(() -> {
      byte[] buffer = new byte[16 * 1024];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buffer)) >= 0) {
          if (!replies && isScriptCall(buffer, n)
              && repliesToDrop.getAndUpdate(left -> Math.max(0, left - 1)) > 0) {
            scriptRepliesToDrop.incrementAndGet();
          }
          if (replies && scriptRepliesToDrop.getAndUpdate(left -> Math.max(0, left - 1)) > 0) {
            continue;
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
    }, "reply-dropping-proxy-pump");
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
    sockets.forEach(ReplyDroppingProxy::closeQuietly);
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing anyway
    }
  }
}
