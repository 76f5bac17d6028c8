package dev.holdfast.example.stock;

import dev.holdfast.DistributedLock;
import jakarta.enterprise.context.RequestScoped;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;

/**
 * {@code POST /report}: a stock report that only one caller, on any instance, runs at a time.
 * Others are told so at once (409) instead of queueing. A 200 carries the
 * {@link StockStore.Totals}.
 */
@Path("/report")
@RequestScoped
@Produces(MediaType.APPLICATION_JSON)
public class ReportResource {

  @Inject
  @Named("report")
  DistributedLock reportLock;

  @Inject
  StockStore store;

  @POST
  public Response run() {
    if (!reportLock.tryLock()) {
      return Response.status(Response.Status.CONFLICT)
          .entity(new StockResource.Error("A report is already running")).build();
    }
    try {
      return Response.ok(store.totals()).build();
    } finally {
      reportLock.unlock();
    }
  }
}
