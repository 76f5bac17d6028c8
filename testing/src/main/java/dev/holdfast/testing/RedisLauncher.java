package dev.holdfast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Starts {@code redis-server} for a {@link RedisServer} on one {@link RedisBackend}; the server
 * owns ports, the temp dir, arguments and readiness checks, the launcher only the process.
 */
interface RedisLauncher {

  /** The backend this launcher belongs to. */
  RedisBackend backend();

  /**
   * Starts {@code redis-server args…} with {@code dir} as its working dir, appending its log to
   * {@code logFile}. Returns at once; the caller waits until it answers.
   *
   * @throws IllegalStateException or {@link UncheckedIOException} if it cannot be started
   */
  RedisProcess launch(List<String> args, Path dir, Path logFile);

  /** One running (or exited) server process or container. */
  interface RedisProcess {

    /** The pid as seen by the host (and reported by {@code INFO server}'s {@code process_id}). */
    long pid();

    boolean isAlive();

    /** SIGKILL, then waits; true if it is gone. Idempotent. Keeps an interrupt. */
    boolean kill(Duration timeout);

    /** SIGTERM (Redis shuts down cleanly), then SIGKILL after {@code timeout}; true if gone. */
    boolean terminate(Duration timeout);

    /** Freezes the process (SIGSTOP or the cgroup freezer); connections stay open. */
    void pause();

    /** Undoes {@link #pause()}. */
    void resume();

    /** How it ended, for messages. */
    String exitStatus();
  }

  /** A child process of this JVM. */
  final class Local implements RedisLauncher {
    private final Path binary;
    private final RedisBackend backend;

    Local(Path binary, RedisBackend backend) {
      this.binary = binary;
      this.backend = backend;
    }

    @Override
    public RedisBackend backend() {
      return backend;
    }

    @Override
    public RedisProcess launch(List<String> args, Path dir, Path logFile) {
      List<String> command = new ArrayList<>();
      command.add(binary.toString());
      command.addAll(args);
      try {
        Process process = new ProcessBuilder(command)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()))
            .start();
        return new LocalProcess(process);
      } catch (IOException e) {
        throw new UncheckedIOException("Cannot run " + binary, e);
      }
    }

    @Override
    public String toString() {
      return binary.toString();
    }
  }

  /** {@link RedisProcess} of a {@link Process}. */
  final class LocalProcess implements RedisProcess {
    private final Process process;

    LocalProcess(Process process) {
      this.process = process;
    }

    @Override
    public long pid() {
      return process.pid();
    }

    @Override
    public boolean isAlive() {
      return process.isAlive();
    }

    @Override
    public boolean kill(Duration timeout) {
      process.destroyForcibly();
      return awaitExit(timeout);
    }

    @Override
    public boolean terminate(Duration timeout) {
      process.destroy();
      return awaitExit(timeout) || kill(timeout);
    }

    @Override
    public void pause() {
      signal("STOP");
    }

    @Override
    public void resume() {
      signal("CONT");
    }

    @Override
    public String exitStatus() {
      return process.isAlive() ? "running" : "exit status " + process.exitValue();
    }

    private void signal(String name) {
      try {
        Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid()))
            .redirectErrorStream(true).start();
        if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
          throw new IllegalStateException("kill -" + name + " " + process.pid() + " failed");
        }
      } catch (IOException e) {
        throw new UncheckedIOException("Cannot run kill -" + name, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("Interrupted while sending SIG" + name, e);
      }
    }

    private boolean awaitExit(Duration timeout) {
      boolean interrupted = false;
      try {
        while (true) {
          try {
            return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
          } catch (InterruptedException e) {
            // Finish waiting anyway: a leaked server would outlive the test.
            interrupted = true;
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }
}
