package dev.holdfast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.startupcheck.StartupCheckStrategy;
import org.testcontainers.containers.wait.strategy.AbstractWaitStrategy;
import org.testcontainers.utility.DockerImageName;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.api.exception.NotModifiedException;

/**
 * {@link RedisBackend#TESTCONTAINERS}: one container per server start, in host network mode (the
 * server binds 127.0.0.1:&lt;port&gt; like a process would) and host pid mode (so
 * {@code INFO server} reports the host pid the harness checks), with the server's temp dir
 * bind-mounted at the same path and the log written there with {@code --logfile}.
 *
 * <p>Readiness is the harness's own check (the server answering {@code INFO} with its pid), so
 * the container's start-up check and wait strategy are no-ops. Containers are removed by
 * {@link RedisProcess#kill}; the harness's shutdown hook kills any left over (Ryuk may be
 * disabled where no registry is reachable).
 */
final class ContainerRedisLauncher implements RedisLauncher {

  private static final String REDIS_SERVER = "/usr/local/bin/redis-server";

  private final DockerImageName image;

  ContainerRedisLauncher(String image) {
    this.image = DockerImageName.parse(image);
  }

  static boolean isDockerAvailable() {
    return DockerClientFactory.instance().isDockerAvailable();
  }

  @Override
  public RedisBackend backend() {
    return RedisBackend.TESTCONTAINERS;
  }

  @Override
  public RedisProcess launch(List<String> args, Path dir, Path logFile) {
    List<String> command = new ArrayList<>(args);
    command.add("--logfile");
    command.add(logFile.toString());
    String user = owner(dir);
    @SuppressWarnings("resource") // removed by ContainerProcess.kill
    GenericContainer<?> container = new GenericContainer<>(image)
        .withNetworkMode("host")
        .withFileSystemBind(dir.toString(), dir.toString(), BindMode.READ_WRITE)
        .withCommand(command.toArray(String[]::new))
        .withStartupCheckStrategy(new StartedIsEnough())
        .waitingFor(new NoWait())
        .withCreateContainerCmdModifier(cmd -> {
          cmd.withEntrypoint(REDIS_SERVER).withWorkingDir(dir.toString()).withUser(user);
          cmd.getHostConfig().withPidMode("host");
        });
    container.start();
    return new ContainerProcess(container.getDockerClient(), container.getContainerId(),
        container.getContainerInfo().getState().getPidLong());
  }

  @Override
  public String toString() {
    return "container " + image.asCanonicalNameString();
  }

  /** "uid:gid" of {@code dir}, so files the server writes there stay deletable by the tests. */
  private static String owner(Path dir) {
    try {
      return Files.getAttribute(dir, "unix:uid") + ":" + Files.getAttribute(dir, "unix:gid");
    } catch (IOException | UnsupportedOperationException e) {
      throw new UncheckedIOException("Cannot read the owner of " + dir,
          e instanceof IOException io ? io : new IOException(e));
    }
  }

  private static final class ContainerProcess implements RedisProcess {
    private final DockerClient docker;
    private final String id;
    private final long pid;
    private volatile boolean removed;
    private volatile boolean paused;
    private volatile String exitStatus = "running";

    ContainerProcess(DockerClient docker, String id, Long pid) {
      this.docker = docker;
      this.id = id;
      this.pid = pid == null ? -1 : pid;
    }

    @Override
    public long pid() {
      return pid;
    }

    @Override
    public boolean isAlive() {
      if (removed) {
        return false;
      }
      try {
        InspectContainerResponse.ContainerState state =
            docker.inspectContainerCmd(id).exec().getState();
        if (Boolean.TRUE.equals(state.getRunning())) {
          return true;
        }
        exitStatus = "exit status " + state.getExitCodeLong();
        return false;
      } catch (NotFoundException e) {
        return false;
      }
    }

    @Override
    public synchronized boolean kill(Duration timeout) {
      if (removed) {
        return true;
      }
      if (paused) {
        try {
          resume(); // Docker refuses to kill a paused container
        } catch (RuntimeException e) {
          // removal below reports what is wrong
        }
      }
      try {
        // Forced removal kills with SIGKILL and waits for it.
        docker.removeContainerCmd(id).withForce(true).withRemoveVolumes(true).exec();
      } catch (NotFoundException e) {
        // already gone
      }
      removed = true;
      paused = false;
      return true;
    }

    @Override
    public synchronized boolean terminate(Duration timeout) {
      if (removed) {
        return true;
      }
      if (paused) {
        resume();
      }
      try {
        docker.stopContainerCmd(id).withTimeout((int) Math.max(1, timeout.toSeconds())).exec();
      } catch (NotFoundException | NotModifiedException e) {
        // not running
      }
      return kill(timeout);
    }

    @Override
    public synchronized void pause() {
      docker.pauseContainerCmd(id).exec();
      paused = true;
    }

    @Override
    public synchronized void resume() {
      docker.unpauseContainerCmd(id).exec();
      paused = false;
    }

    @Override
    public String exitStatus() {
      return removed ? "removed" : exitStatus;
    }
  }

  /** The harness checks readiness itself; Testcontainers' checks would only add delay. */
  private static final class StartedIsEnough extends StartupCheckStrategy {
    @Override
    public StartupStatus checkStartupState(DockerClient dockerClient, String containerId) {
      return StartupStatus.SUCCESSFUL;
    }
  }

  private static final class NoWait extends AbstractWaitStrategy {
    @Override
    protected void waitUntilReady() {
    }
  }
}
