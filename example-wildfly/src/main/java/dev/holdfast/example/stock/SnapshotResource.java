package dev.holdfast.example.stock;

import jakarta.enterprise.context.RequestScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import java.util.List;

/**
 * {@code GET /snapshots}: this instance's name and the snapshot job's runs on every instance,
 * oldest first — one per occurrence of the schedule:
 *
 * <pre>
 * {"instance": "host/4711",
 *  "snapshots": [{"occurrence": "2026-11-23T06:00:00Z", "instance": "host/4711",
 *                 "skus": 3, "units": 57}, …]}
 * </pre>
 */
@Path("/snapshots")
@RequestScoped
@Produces(MediaType.APPLICATION_JSON)
public class SnapshotResource {

  @Inject
  StockSnapshotJob job;

  @Inject
  StockStore store;

  @GET
  public Snapshots list() {
    return new Snapshots(job.instanceId(), store.snapshots());
  }

  /** The answer: who answers, and every instance's runs. */
  public record Snapshots(String instance, List<StockStore.Snapshot> snapshots) {
  }
}
