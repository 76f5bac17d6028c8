package dev.holdfast.example.stock;

import dev.holdfast.Locked;
import io.quarkus.scheduler.Scheduled;
import io.quarkus.scheduler.ScheduledExecution;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Optional;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * A scheduled job that runs once per cluster, not once per instance: on {@code stock.snapshot.cron}
 * (every minute by default; {@code off} disables it) every instance's scheduler fires, and
 * {@code @Locked(skipIfBusy = true)} lets the first one in run the job while the others return at
 * once. The lock stays held at least {@code holdAtLeast} after the run started, so an instance
 * whose scheduler fires a moment later (its clock a little behind, a busy thread) finds it taken
 * instead of running the same occurrence again. Choose it longer than the spread between the
 * instances' clocks and shorter than the period.
 *
 * <p>Each run records the stock totals with the occurrence (the scheduled fire time, the same on
 * every instance) and the instance that ran it, in a Redis list ({@link StockStore#snapshots()},
 * {@code GET /snapshots}): one entry per occurrence.
 */
@ApplicationScoped
public class StockSnapshotJob {
  private static final System.Logger LOG = System.getLogger(StockSnapshotJob.class.getName());

  @Inject
  StockStore store;

  /** Names this instance in the snapshots; by default {@code <host name>/<process id>}. */
  @ConfigProperty(name = "stock.instance-id")
  Optional<String> configuredInstanceId;

  /**
   * Takes the snapshot of one occurrence of the schedule, unless another instance is taking it.
   * Cron: Quartz syntax with seconds, {@code 0 * * * * ?} for every minute.
   * {@code stock.snapshot.max-delay} (default 0s) delays each call by a random time up to it, as
   * schedulers on different hosts fire apart; the tests use it to show {@code holdAtLeast} at work.
   */
  @Scheduled(identity = "stock-snapshot", cron = "${stock.snapshot.cron}",
      executionMaxDelay = "${stock.snapshot.max-delay}")
  @Locked(value = "stock-snapshot", skipIfBusy = true, holdAtLeast = "5s")
  public void takeSnapshot(ScheduledExecution execution) {
    StockStore.Totals totals = store.totals();
    StockStore.Snapshot snapshot = new StockStore.Snapshot(execution.getScheduledFireTime(),
        instanceId(), totals.skus(), totals.units());
    store.recordSnapshot(snapshot);
    LOG.log(System.Logger.Level.INFO, "Stock snapshot of {0}: {1} SKUs, {2} units",
        snapshot.occurrence(), snapshot.skus(), snapshot.units());
  }

  /** This instance's name in the snapshots. */
  public String instanceId() {
    return configuredInstanceId.filter(id -> !id.isBlank()).orElseGet(StockSnapshotJob::hostAndPid);
  }

  private static String hostAndPid() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException e) {
      host = "unknown-host";
    }
    return host + "/" + ProcessHandle.current().pid();
  }
}
