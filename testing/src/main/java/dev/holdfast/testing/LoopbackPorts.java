package dev.holdfast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.UnknownHostException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Free TCP ports on 127.0.0.1 for test servers.
 *
 * <p>A port is free when the kernel hands it out for {@code ServerSocket(0)}; that is inherently
 * racy (another process may bind it before the caller does), so callers must detect a bind
 * failure and ask again. Within this JVM a reserved port is not handed out again until it is
 * {@linkplain #release released}, so a killed server can be restarted on its port even while
 * other servers are being started.
 *
 * <p>Thread-safe.
 */
public final class LoopbackPorts {

  /** Redis cluster nodes also listen on {@code port + 10000} (the cluster bus). */
  static final int CLUSTER_BUS_OFFSET = 10_000;

  static final InetAddress LOOPBACK;

  static {
    try {
      // Explicitly IPv4: the servers bind 127.0.0.1, never ::1.
      LOOPBACK = InetAddress.getByAddress("127.0.0.1", new byte[] {127, 0, 0, 1});
    } catch (UnknownHostException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static final int MAX_ATTEMPTS = 100;
  private static final Set<Integer> RESERVED = ConcurrentHashMap.newKeySet();

  private LoopbackPorts() {
  }

  /**
   * Reserves a port that is free on 127.0.0.1 right now.
   *
   * @return the port; release it with {@link #release(int)} when its server is gone
   * @throws IllegalStateException if no free port was found
   */
  public static int reserve() {
    return reserve(false);
  }

  /**
   * Like {@link #reserve()}; with {@code clusterBus} the port is also at most 55535 and
   * {@code port + 10000} is free, and both are reserved.
   */
  static int reserve(boolean clusterBus) {
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      int port = kernelPickedPort();
      int busPort = port + CLUSTER_BUS_OFFSET;
      if (clusterBus && (busPort > 65_535 || !canBind(busPort))) {
        continue;
      }
      if (!RESERVED.add(port)) {
        continue;
      }
      if (clusterBus && !RESERVED.add(busPort)) {
        RESERVED.remove(port);
        continue;
      }
      return port;
    }
    throw new IllegalStateException(
        "No free port on 127.0.0.1 after " + MAX_ATTEMPTS + " attempts");
  }

  /** Makes {@code port} available to {@link #reserve()} again; unknown ports are ignored. */
  public static void release(int port) {
    RESERVED.remove(port);
  }

  /**
   * Tells whether something accepts TCP connections on 127.0.0.1:{@code port}, by connecting
   * (200 ms timeout) and closing at once.
   */
  public static boolean isListening(int port) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(LOOPBACK, port), 200);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static int kernelPickedPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, LOOPBACK)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot bind 127.0.0.1 to find a free port", e);
    }
  }

  private static boolean canBind(int port) {
    try {
      new ServerSocket(port, 1, LOOPBACK).close();
      return true;
    } catch (IOException e) {
      return false;
    }
  }
}
