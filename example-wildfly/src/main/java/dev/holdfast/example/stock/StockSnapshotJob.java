package dev.holdfast.example.stock;

import dev.holdfast.Locked;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Instant;
import java.util.Optional;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * The body of a scheduled job that runs once per cluster, not once per instance. Every
 * instance's {@link SnapshotSchedule} calls {@link #takeSnapshot} for each occurrence of the
 * schedule; {@code @Locked(skipIfBusy = true)} lets the first call in run it while the others
 * return at once. The lock stays held at least {@code holdAtLeast} after the run started, so an
 * instance whose scheduler fires a moment later (its clock a little behind, a busy thread) finds
 * it taken instead of running the same occurrence again. Choose it longer than the spread between
 * the instances' clocks and shorter than the period.
 *
 * <p>Each run records the stock totals with the occurrence and the instance that ran it, in a
 * Redis list ({@link StockStore#snapshots()}, {@code GET /snapshots}): one entry per occurrence.
 */
@ApplicationScoped
public class StockSnapshotJob {
  private static final System.Logger LOG = System.getLogger(StockSnapshotJob.class.getName());

  @Inject
  StockStore store;

  /** Names this instance in the snapshots; by default {@code <host name>/<process id>}. */
  @Inject
  @ConfigProperty(name = "stock.instance-id")
  Optional<String> configuredInstanceId;

  /**
   * Takes the snapshot of one occurrence of the schedule, unless another instance is taking it.
   *
   * @param occurrence the occurrence's scheduled time, the same on every instance
   */
  @Locked(value = "stock-snapshot", skipIfBusy = true, holdAtLeast = "5s")
  public void takeSnapshot(Instant occurrence) {
    StockStore.Totals totals = store.totals();
    StockStore.Snapshot snapshot = new StockStore.Snapshot(occurrence, instanceId(),
        totals.skus(), totals.units());
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
