package dev.holdfast.example.stock;

import dev.holdfast.LockLost;
import dev.holdfast.LockLostException;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.QueryParam;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import java.util.List;

/**
 * {@code /ledger}: postings in JTA transactions under the account's lock ({@link Ledger}), and
 * what a lost lock does to them.
 *
 * <pre>
 * POST /ledger/acc-1?amount=5&amp;holdMs=0
 *     200 {"account":"acc-1","entry":{"id":7,"amount":5}}: committed
 *     409 {"account":"acc-1","lock":"ledger:acc-1","error":"Lock 'ledger:acc-1' is no longer…"}:
 *         the lock was lost before the commit, the transaction rolled back
 *     holdMs: how long the posting holds still before its commit (at most 30000)
 * POST /ledger/acc-1/verified?…          the same, the lock confirmed in Redis before the commit
 * POST /ledger/acc-1/own-transaction?…   the same as the first, in a transaction the locked
 *                                        method begins and commits itself
 * POST /ledger/acc-1/interruptible?…     the same as the first, stopped by an interrupt once
 *                                        the lock is lost (onLoss = INTERRUPT)
 * POST /ledger/acc-1/async?…             the same as the first from a Uni method, whose
 *                                        transaction commits when its Uni completes
 * POST /ledger/acc-1/end-hold            ends the hold of the posting to acc-1
 * GET  /ledger/acc-1                     {"account":"acc-1","balance":5,"entries":[…],
 *                                        "rolledBack":0}: what was committed
 * GET  /ledger/lost-locks                [{"lockName":"ledger:acc-1","reason":…,…}]: the
 *                                        LockLost events this instance received
 * GET  /ledger/last-interrupted-thread   {"name":"…","interruptPending":false}
  * </pre>
 */
@Path("/ledger")
@Produces(MediaType.APPLICATION_JSON)
public class LedgerResource {
  @Inject
  Ledger ledger;

  @Inject
  LostLocks lostLocks;

  /**
   * Posts {@code amount}, holding still {@code holdMs} (or until {@code end-hold}) before the
   * commit: 200 with the entry, or 409 naming the lock if it was lost and the posting rolled back.
   */
  @POST
  @Path("/{account}")
  public Response post(@PathParam("account") String account, @QueryParam("amount") long amount,
      @QueryParam("holdMs") long holdMs) {
    return answer(ledger::post, account, amount, holdMs);
  }

  /** {@link #post} with the lock confirmed in Redis before the commit. */
  @POST
  @Path("/{account}/verified")
  public Response postVerified(@PathParam("account") String account,
      @QueryParam("amount") long amount, @QueryParam("holdMs") long holdMs) {
    return answer(ledger::postVerified, account, amount, holdMs);
  }

  /** {@link #post} in a transaction the locked method begins itself. */
  @POST
  @Path("/{account}/own-transaction")
  public Response postInOwnTransaction(@PathParam("account") String account,
      @QueryParam("amount") long amount, @QueryParam("holdMs") long holdMs) {
    return answer(ledger::postInOwnTransaction, account, amount, holdMs);
  }

  /** {@link #post} that stops once the lock is lost (Holdfast interrupts it). */
  @POST
  @Path("/{account}/interruptible")
  public Response postInterruptible(@PathParam("account") String account,
      @QueryParam("amount") long amount, @QueryParam("holdMs") long holdMs) {
    return answer(ledger::postInterruptible, account, amount, holdMs);
  }

  /**
   * {@link #post} through the {@code Uni} method {@link Ledger#postAsync}, without a thread
   * waiting while the posting holds still: the same answers. Subscribed on a worker thread, not
   * on the event loop that calls this endpoint: {@code @Locked} calls the method on the thread
   * that completes the acquisition, which can be the subscribing one, and Quarkus refuses to
   * begin a {@code @Transactional} transaction on the event loop.
   */
  @POST
  @Path("/{account}/async")
  public Uni<Response> postAsync(@PathParam("account") String account,
      @QueryParam("amount") long amount, @QueryParam("holdMs") long holdMs) {
    Response badHold = badHold(holdMs);
    if (badHold != null) {
      return Uni.createFrom().item(badHold);
    }
    return ledger.postAsync(account, amount, holdMs)
        .runSubscriptionOn(Infrastructure.getDefaultWorkerPool())
        .map(entry -> Response.ok(new Posted(account, entry)).build())
        .onFailure(failure -> lockLost(failure) != null)
        .recoverWithItem(failure -> lost(account, lockLost(failure)));
  }

  /** The thread whose hold was last interrupted, and whether an interrupt is pending on it. */
  @GET
  @Path("/last-interrupted-thread")
  public Response lastInterruptedThread() {
    return ledger.lastInterrupted().map(t -> Response.ok(t).build())
        .orElseGet(() -> Response.status(Response.Status.NOT_FOUND).build());
  }

  @POST
  @Path("/{account}/end-hold")
  public void endHold(@PathParam("account") String account) {
    ledger.endHold(account);
  }

  @GET
  @Path("/{account}")
  public Ledger.Statement statement(@PathParam("account") String account) {
    return ledger.statement(account);
  }

  @GET
  @Path("/lost-locks")
  public List<LockLost> lostLocks() {
    return lostLocks.recent();
  }

  /**
   * The posting's answer: 400 for a bad {@code holdMs}; 200 with its entry; or 409 if its
   * transaction was rolled back because the lock was lost. The transaction manager's exception
   * (a {@code RollbackException}, wrapped or not by the {@code @Transactional} interceptor)
   * carries Holdfast's {@link LockLostException} in its cause chain; any other failure is not
   * this endpoint's to answer.
   */
  private static Response answer(Posting posting, String account, long amount, long holdMs) {
    Response badHold = badHold(holdMs);
    if (badHold != null) {
      return badHold;
    }
    try {
      return Response.ok(new Posted(account, posting.post(account, amount, holdMs))).build();
    } catch (Exception e) {
      LockLostException lost = lockLost(e);
      if (lost == null) {
        throw e;
      }
      return lost(account, lost);
    }
  }

  /** {@return 400 if {@code holdMs} is out of range, else null} */
  private static Response badHold(long holdMs) {
    if (holdMs < 0 || holdMs > Ledger.MAX_HOLD_MILLIS) {
      return Response.status(Response.Status.BAD_REQUEST).entity(new StockResource.Error(
          "Expected ?holdMs=<0 to " + Ledger.MAX_HOLD_MILLIS + ">")).build();
    }
    return null;
  }

  /** {@return 409: the posting to {@code account} rolled back because its lock was lost} */
  private static Response lost(String account, LockLostException lost) {
    return Response.status(Response.Status.CONFLICT)
        .entity(new Lost(account, lost.lockName(), lost.getMessage())).build();
  }

  private static LockLostException lockLost(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof LockLostException lost) {
        return lost;
      }
    }
    return null;
  }

  @FunctionalInterface
  private interface Posting {
    Ledger.Entry post(String account, long amount, long holdMillis);
  }

  /** A committed posting. */
  public record Posted(String account, Ledger.Entry entry) {
  }

  /** A posting rolled back because {@code lock} was lost; {@code error} says why. */
  public record Lost(String account, String lock, String error) {
  }
}
