package dev.holdfast.engine;

import dev.holdfast.testing.Await;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;

/**
 * A TCP proxy on 127.0.0.1 that parses each RESP command; an armed rule holds back the first
 * command it matches (not sent to Redis) until the test answers it with a reply of its own (in
 * order: after the replies of the commands forwarded before it), or forwards it. Everything else
 * passes. A rule sees the command, then {@link #AFTER} and the command sent before it on the
 * same connection (a script's WAIT, say).
 */
final class CommandProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int upstream;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final List<Rule> rules = new CopyOnWriteArrayList<>();
  private volatile boolean closed;
  /** Separates a command from the one before it on its connection, as rules see them. */
  static final String AFTER = "\u0000after";

  /** One armed hold-back. */
  static final class Rule {
    private final Predicate<List<String>> matches;
    private final AtomicBoolean taken = new AtomicBoolean();
    private final CompletableFuture<List<String>> held = new CompletableFuture<>();
    /** null: forward; else the raw reply to give instead. */
    private final CompletableFuture<String> verdict = new CompletableFuture<>();

    Rule(Predicate<List<String>> matches) {
      this.matches = matches;
    }

    List<String> awaitHeld() throws Exception {
      return held.get(30, TimeUnit.SECONDS);
    }

    void answer(String rawError) {
      verdict.complete(rawError);
    }

    void forward() {
      verdict.complete(null);
    }

    boolean taken() {
      return held.isDone();
    }

    /** Matches nothing from now on (one already taken and answered stays answered). */
    void disarm() {
      taken.set(true);
      verdict.complete(null);
    }
  }

  CommandProxy(int upstream) throws IOException {
    this.upstream = upstream;
    listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::accept, "command-proxy");
    t.setDaemon(true);
    t.start();
  }

  String uri() {
    return "redis://127.0.0.1:" + listener.getLocalPort();
  }

  Rule arm(Predicate<List<String>> matches) {
    Rule r = new Rule(matches);
    rules.add(r);
    return r;
  }

  /** {@return whether a rule armed to answer {@code reply} never met its command} */
  boolean unusedAnswer(String reply) {
    return rules.stream().anyMatch(r -> !r.held.isDone() && reply.equals(r.verdict.getNow(null)));
  }

  void releaseAll() {
    rules.forEach(Rule::forward);
  }

  private void accept() {
    while (!closed) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket(InetAddress.getLoopbackAddress(), upstream);
        sockets.add(client);
        sockets.add(server);
        Object writeLock = new Object();
        AtomicBoolean replyOwed = new AtomicBoolean();
        start(() -> requests(client, server, writeLock, replyOwed));
        start(() -> replies(server, client, writeLock, replyOwed));
      } catch (IOException e) {
        return;
      }
    }
  }

  private static void start(Runnable r) {
    Thread t = new Thread(r, "command-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  private void requests(Socket client, Socket server, Object writeLock,
      AtomicBoolean replyOwed) {
    try (InputStream in = new BufferedInputStream(client.getInputStream());
        OutputStream toServer = server.getOutputStream()) {
      OutputStream toClient = client.getOutputStream();
      List<String> previous = List.of();
      while (true) {
        ByteArrayOutputStream raw = new ByteArrayOutputStream();
        List<String> command = readCommand(in, raw);
        if (command == null) {
          return;
        }
        // The command, then AFTER and the one sent before it on this connection.
        List<String> args = new ArrayList<>(command);
        args.add(AFTER);
        args.addAll(previous);
        previous = command;
        Rule rule = null;
        for (Rule r : rules) {
          if (!r.taken.get() && r.matches.test(args) && r.taken.compareAndSet(false, true)) {
            rule = r;
            break;
          }
        }
        if (rule != null) {
          rule.held.complete(args);
          String reply = rule.verdict.get();
          if (reply != null) {
            // Redis answers in order: the reply of a command forwarded before this one goes
            // first (a pipelined script's, say), never after the error given in its place.
            Await.until(Duration.ofSeconds(10), () -> !replyOwed.get(),
                "the earlier reply relayed");
            synchronized (writeLock) {
              toClient.write(reply.getBytes(StandardCharsets.US_ASCII));
              toClient.flush();
            }
            continue;
          }
        }
        replyOwed.set(true);
        toServer.write(raw.toByteArray());
        toServer.flush();
      }
    } catch (Exception e) {
      // a side closed
    } finally {
      closeQuietly(client);
      closeQuietly(server);
    }
  }

  private void replies(Socket server, Socket client, Object writeLock,
      AtomicBoolean replyOwed) {
    byte[] buffer = new byte[16 * 1024];
    try (InputStream in = server.getInputStream()) {
      OutputStream out = client.getOutputStream();
      int n;
      while ((n = in.read(buffer)) >= 0) {
        synchronized (writeLock) {
          out.write(buffer, 0, n);
          out.flush();
        }
        replyOwed.set(false);
      }
    } catch (IOException e) {
      // a side closed
    } finally {
      closeQuietly(client);
      closeQuietly(server);
    }
  }

  /** Reads one RESP array of bulk strings (a command), copying its bytes; null at the end. */
  private static List<String> readCommand(InputStream in, ByteArrayOutputStream raw)
      throws IOException {
    String header = readLine(in, raw);
    if (header == null) {
      return null;
    }
    if (header.charAt(0) != '*') {
      return List.of(header.trim()); // inline command
    }
    int n = Integer.parseInt(header.substring(1));
    List<String> args = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      String len = readLine(in, raw);
      int l = Integer.parseInt(len.substring(1));
      byte[] b = in.readNBytes(l + 2);
      raw.write(b);
      args.add(new String(b, 0, l, StandardCharsets.UTF_8));
    }
    return args;
  }

  private static String readLine(InputStream in, ByteArrayOutputStream raw) throws IOException {
    StringBuilder sb = new StringBuilder();
    int ch;
    while ((ch = in.read()) >= 0) {
      raw.write(ch);
      if (ch == '\n') {
        return sb.toString().trim();
      }
      sb.append((char) ch);
    }
    return null;
  }

  @Override
  public void close() {
    closed = true;
    closeQuietly(listener);
    sockets.forEach(CommandProxy::closeQuietly);
  }

  private static void closeQuietly(AutoCloseable s) {
    try {
      s.close();
    } catch (Exception e) {
      // closing anyway
    }
  }
}
