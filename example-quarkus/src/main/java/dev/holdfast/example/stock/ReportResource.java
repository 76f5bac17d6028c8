package dev.holdfast.example.stock;

import dev.holdfast.DistributedLock;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * {@code POST /report}: a stock report that only one caller, on any instance, runs at a time,
 * guarded by the injected lock named {@code report}. Others are told so at once (409) instead of
 * queueing. A 200 carries the {@link StockStore.Totals}.
 */
@Path("/report")
@Produces(MediaType.APPLICATION_JSON)
public class ReportResource {

  @Inject
  @Named("report")
  DistributedLock reportLock;

  @Inject
  StockStore store;

  /** Stands in for a report that takes a while, so that overlapping requests meet. */
  @ConfigProperty(name = "report.work-millis", defaultValue = "1000")
  long workMillis;

  @POST
  public Response run() throws InterruptedException {
    if (!reportLock.tryLock()) {
      return Response.status(Response.Status.CONFLICT)
          .entity(new StockResource.Error("A report is already running")).build();
    }
    try {
      StockStore.Totals totals = store.totals();
      Thread.sleep(workMillis);
      return Response.ok(totals).build();
    } finally {
      reportLock.unlock();
    }
  }
}
