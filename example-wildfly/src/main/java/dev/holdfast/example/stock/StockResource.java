package dev.holdfast.example.stock;

import dev.holdfast.example.stock.Inventory.Reservation;
import dev.holdfast.example.stock.Inventory.Restock;
import jakarta.enterprise.context.RequestScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.PUT;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.QueryParam;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import java.util.Arrays;
import java.util.OptionalInt;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

/**
 * {@code /stock/{sku}}: set and read a level, reserve one unit with and without the lock,
 * restock inside a transaction, and set the level under a fenced lock ({@code PUT …/fenced}: 200,
 * or 409 if the store refused the write's fencing token) or the same lock without the token check
 * ({@code PUT …/unfenced}).
 */
@Path("/stock/{sku}")
@RequestScoped
@Produces(MediaType.APPLICATION_JSON)
public class StockResource {
  /** The longest {@code holdMs} a write accepts. */
  static final long MAX_HOLD_MS = 10_000;

  @Inject
  Inventory inventory;

  @Inject
  StockStore store;

  /** The level, or 404 if the SKU was never stocked. */
  @GET
  public Response level(@PathParam("sku") String sku) {
    OptionalInt units = store.units(sku);
    return units.isPresent()
        ? Response.ok(new Level(sku, units.getAsInt())).build()
        : error(Response.Status.NOT_FOUND, "No stock for " + sku);
  }

  /** Sets the level: {@code {"units": 20}}. */
  @PUT
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevel(@PathParam("sku") String sku, NewLevel update) {
    if (update == null || update.units() == null || update.units() < 0) {
      return error(Response.Status.BAD_REQUEST, "Expected {\"units\": <a number >= 0>}");
    }
    store.setUnits(sku, update.units());
    return Response.ok(new Level(sku, update.units())).build();
  }

  /**
   * Sets the level under the SKU's fenced lock ({@link Inventory#setUnitsFenced}), waiting
   * {@code holdMs} between acquiring the lock and writing: 200 if the store took the write, 409
   * if it refused the token because a later holder of the lock has written since.
   */
  @PUT
  @Path("/fenced")
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevelFenced(@PathParam("sku") String sku, @QueryParam("holdMs") long holdMs,
      NewLevel level) {
    Response invalid = invalidWrite(level, holdMs);
    if (invalid != null) {
      return invalid;
    }
    try {
      long token = inventory.setUnitsFenced(sku, level.units(), holdMs);
      return Response.ok(new Write(sku, level.units(), true, token, false)).build();
    } catch (Inventory.StaleTokenException e) {
      return Response.status(Response.Status.CONFLICT)
          .entity(new Write(sku, level.units(), false, e.token(), lostOnRelease(e))).build();
    } catch (IllegalMonitorStateException e) {
      // Thrown by the release after the method returned, so the store took the write (its token
      // was still the newest); the lease had run out before the release.
      return Response.ok(new Write(sku, level.units(), true, null, true)).build();
    }
  }

  /** {@link #setLevelFenced} without the token check ({@link Inventory#setUnitsUnfenced}). */
  @PUT
  @Path("/unfenced")
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevelUnfenced(@PathParam("sku") String sku,
      @QueryParam("holdMs") long holdMs, NewLevel level) {
    Response invalid = invalidWrite(level, holdMs);
    if (invalid != null) {
      return invalid;
    }
    boolean lockLost = false;
    try {
      inventory.setUnitsUnfenced(sku, level.units(), holdMs);
    } catch (IllegalMonitorStateException e) {
      lockLost = true; // the write happened, after the lease had run out
    }
    return Response.ok(new Write(sku, level.units(), true, null, lockLost)).build();
  }

  @POST
  @Path("/reserve")
  public ReserveResult reserve(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return ReserveResult.of(inventory.reserve(sku), calledNanos);
  }

  /**
   * {@link #reserve} without holding a request thread while waiting for the lock: an
   * asynchronous endpoint over the {@code @Locked} {@code CompletionStage} method
   * {@link Inventory#reserveAsync}, which holds the SKU's lock until its work is done.
   */
  @POST
  @Path("/reserve-async")
  public CompletionStage<ReserveResult> reserveAsync(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return inventory.reserveAsync(sku).thenApply(r -> ReserveResult.of(r, calledNanos));
  }

  @POST
  @Path("/reserve-unprotected")
  public ReserveResult reserveUnprotected(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return ReserveResult.of(inventory.reserveUnprotected(sku), calledNanos);
  }

  /**
   * Adds {@code units} in a {@code @Transactional} method under the SKU's lock, and reports
   * whether the lock was held in the transaction, just before the commit and after it.
   */
  @POST
  @Path("/restock")
  public Response restock(@PathParam("sku") String sku, @QueryParam("units") int units) {
    if (units <= 0) {
      return error(Response.Status.BAD_REQUEST, "Expected ?units=<a number > 0>");
    }
    Restock restock = inventory.restock(sku, units);
    return Response.ok(new RestockResult(restock.units(), restock.inTransaction(),
        restock.lockHoldCount() > 0, restock.lockHoldCount(),
        restock.atCompletion().heldBeforeCompletion(), restock.atCompletion().committed(),
        restock.atCompletion().heldAfterCompletion())).build();
  }

  /** Whether releasing the lock failed because it was lost, after the method threw {@code e}. */
  private static boolean lostOnRelease(Exception e) {
    return Arrays.stream(e.getSuppressed())
        .anyMatch(IllegalMonitorStateException.class::isInstance);
  }

  private static Response invalidWrite(NewLevel level, long holdMs) {
    if (level == null || level.units() == null || level.units() < 0) {
      return error(Response.Status.BAD_REQUEST, "Expected {\"units\": <a number >= 0>}");
    }
    if (holdMs < 0 || holdMs > MAX_HOLD_MS) {
      return error(Response.Status.BAD_REQUEST, "Expected ?holdMs=<0 to " + MAX_HOLD_MS + ">");
    }
    return null;
  }

  private static Response error(Response.Status status, String message) {
    return Response.status(status).entity(new Error(message)).build();
  }

  /** The body of a 4xx answer. */
  public record Error(String error) {
  }

  /** A SKU's level. */
  public record Level(String sku, int units) {
  }

  /**
   * The answer to a fenced or unfenced write.
   *
   * @param accepted whether the store took the write
   * @param token    the write's fencing token; null (left out) for an unfenced write, and for a
   *                 fenced one whose lock was lost before its release
   * @param lockLost whether the lock's lease ran out before the lock was released: the write may
   *                 have come after another holder's
   */
  public record Write(String sku, int units, boolean accepted, Long token, boolean lockLost) {
  }

  /** The body of a {@code PUT}. */
  public record NewLevel(Integer units) {
  }

  /**
   * @param waitedMs from the call to the start of the reservation's work: the time spent waiting
   *                 for the lock (about 0 without it)
   */
  public record ReserveResult(boolean reserved, long waitedMs) {
    static ReserveResult of(Reservation reservation, long calledNanos) {
      return new ReserveResult(reservation.reserved(),
          TimeUnit.NANOSECONDS.toMillis(reservation.startedNanos() - calledNanos));
    }
  }

  /**
   * What a restock observed, in the order it happened. {@code lockHoldCount} is this thread's
   * hold count in the transaction: 1, as {@code @Locked} is applied once.
   */
  public record RestockResult(int units, boolean inTransaction, boolean lockHeldInTransaction,
      int lockHoldCount, Boolean lockHeldBeforeCommit, boolean committed,
      Boolean lockHeldAfterCommit) {
  }
}
