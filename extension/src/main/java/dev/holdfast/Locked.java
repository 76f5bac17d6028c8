package dev.holdfast;

import jakarta.enterprise.util.Nonbinding;
import jakarta.interceptor.Interceptor;
import jakarta.interceptor.InterceptorBinding;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated method while holding a distributed lock: at most one invocation at a time
 * across every instance of the application that shares the Redis deployment.
 *
 * <pre>{@code
 * @Locked("inventory:{sku}")                           // one lock per SKU
 * public void reserve(String sku, int qty) { ... }
 *
 * @Locked(value = "nightly-report", waitTime = "0s")   // fail fast if another node is running it
 * public void report() { ... }
 *
 * @Scheduled(cron = "0 0 2 * * ?")                     // once per cluster: the other nodes skip
 * @Locked(value = "nightly", skipIfBusy = true, holdAtLeast = "30s")
 * public void nightly() { ... }
 *
 * @Locked(value = "prices", mode = Locked.Mode.READ)   // many readers, or one WRITE method
 * public Price price(String sku) { ... }
 *
 * @Locked(value = "inventory:{sku}", fenced = true)
 * public void setStock(String sku, int units) {
 *   store.write(sku, units, FencingToken.current());   // the store refuses older tokens
 * }
 * }</pre>
 *
 * <p>On a class, it applies to every business method of the bean (as CDI interceptor bindings
 * do); an annotation on a method replaces the class's. The contract:
 * <ol>
 *   <li>The lock is acquired before the method runs and released in {@code finally}, also when
 *       the method throws. A failing release never hides the method's own exception (it is added
 *       as suppressed); after a successful method it is thrown.</li>
 *   <li>The lock is reentrant: a locked method that calls another method locked on the same name
 *       (on the same thread) does not deadlock.</li>
 *   <li>If the lock cannot be acquired within {@link #waitTime()}, the method does not run and
 *       {@link LockNotAcquiredException} names the lock and the wait.</li>
 *   <li>The interceptor runs at {@link #PRIORITY}, outside {@code @Transactional} (200): the lock
 *       is taken before the transaction begins and released after it commits.</li>
 *   <li>With {@link #fenced() fenced = true} the lock is the name's {@link FencedLock}, and the
 *       method runs with its hold's fencing token as {@link FencingToken#current()}: greater than
 *       every token handed out before for that name. A nested fenced method sees its own token
 *       (re-entering the same name, the same one), and the caller's is current again when it
 *       returns. If the hold is already lost when the method would start (its lease ran out
 *       during a pause), the method does not run and {@link LockException} says so. The token
 *       protects only a resource that checks it, refusing a write whose token is lower than the
 *       highest it has seen: a holder paused past its lease then has its late write refused,
 *       although its method runs to the end (and rule 1 reports the lost lock after it).</li>
 *   <li>{@link #mode()} chooses the lock: the name's exclusive lock ({@code EXCLUSIVE}, the
 *       default), the read or the write side of its {@link DistributedReadWriteLock}
 *       ({@code READ}: any number of readers together, in any processes; {@code WRITE}: one
 *       writer and no reader), or its fair lock ({@code FAIR}: first come, first served). Only
 *       the exclusive lock is fenced: {@code fenced = true} with another mode fails the
 *       deployment.</li>
 *   <li>With {@link #skipIfBusy() skipIfBusy = true}, a lock held by another holder does not
 *       make the call wait or fail: it returns at once without running the method (a
 *       {@code void} method, so there is nothing to return), logs it at {@code DEBUG} naming the
 *       lock and the method, and counts it ({@code holdfast.lock.skipped}, when metrics are on).
 *       The default wait is then {@code 0s} (one try); an explicit {@link #waitTime()} waits up
 *       to that before skipping. {@code skipIfBusy} on a method that returns a value fails the
 *       deployment, unless it is asynchronous (below).</li>
 *   <li>With {@link #holdAtLeast()}, the lock is released no earlier than that long after the
 *       method started (after normal return and after an exception alike): if the method was
 *       quicker, the lock stays held in Redis for the rest and then expires by itself, so an
 *       instance whose scheduler fires a little later finds it busy. A nested hold of the same
 *       lock is released as usual. A {@link #leaseTime()} shorter than {@code holdAtLeast} fails
 *       the deployment.</li>
 *   <li>A method returning {@link java.util.concurrent.CompletionStage CompletionStage},
 *       {@link java.util.concurrent.CompletableFuture CompletableFuture} or Mutiny's
 *       {@code Uni} (when Mutiny is on the class path) is <em>asynchronous</em>: see below. A
 *       method returning a stream — Mutiny's {@code Multi}, a Reactive Streams
 *       {@code Publisher} or a {@link java.util.concurrent.Flow.Publisher Flow.Publisher} — has
 *       no single end at which to release the lock, and fails the deployment, naming it.</li>
 *   <li><b>The commit guard.</b> When the method's work runs in a JTA transaction that begins
 *       inside the call — {@code @Transactional} on the same method (the lock is taken first, and
 *       released after the commit), a {@code @Transactional} method it calls, or a transaction it
 *       begins itself through a bean that announces it (Quarkus: {@code UserTransaction} and
 *       {@code TransactionManager}; Narayana's CDI integration in Weld and WildFly: the
 *       {@code TransactionManager} bean) — that transaction does not commit under a lost lock:
 *       before it commits, the hold of every {@code @Locked} call running on the thread is checked,
 *       and if one is no longer held the transaction is rolled back; the commit fails with the
 *       transaction manager's {@code RollbackException} (or the {@code @Transactional}
 *       interceptor's exception around it), whose cause chain holds a {@link LockLostException}
 *       naming the lock and why it was lost. The check is local by default (reported lost, or past
 *       the hold's local deadline: no I/O); {@code verify-before-commit=redis} (configuration only,
 *       below) adds one round trip that confirms the hold in Redis, which also catches a loss no
 *       renewal has noticed yet. What no check covers: a pause between the check and the resources'
 *       commit (see {@link CommitGuard}, and fencing in rule 5). A transaction begun in a way the
 *       container does not announce with {@code @Initialized(TransactionScoped.class)} (e.g.
 *       Narayana's static {@code TransactionManager}, or a {@code UserTransaction} looked up in
 *       JNDI) is guarded only with
 *       {@link CommitGuard#register(DistributedLock, CommitGuard.Check)}. A transaction that was
 *       already active when the call began (the lock taken inside it) commits after the lock is
 *       released: nothing can guard that order, so put {@code @Locked} outside. The call's hold
 *       is relied on until the call releases it: a transaction begun inside the call and
 *       completed after it returned commits if the hold was released normally, and rolls back if
 *       it was lost while the call ran. An asynchronous method counts as running while it runs
 *       and returns its result, so {@code @Transactional} on it is guarded too (its transaction
 *       commits on return, or in Quarkus when the result completes: before the release either
 *       way); a transaction its later stages begin on other threads is not — use
 *       {@code CommitGuard} there. Without a transaction manager nothing of this is active.</li>
 *   <li>{@link #onLoss()} chooses what a loss does to the call while it runs: nothing (the
 *       default), interrupt its thread (blocking methods) or cancel its result (asynchronous
 *       ones); see {@link OnLoss}.</li>
 *   <li>Everything is validated at deployment (template placeholders, durations, modes, members
 *       that exclude each other, whether the container can intercept the method): a mistake
 *       fails the deployment with a message naming the class, the method, the member and the
 *       value.</li>
 * </ol>
 *
 * <h2>Asynchronous methods</h2>
 *
 * <pre>{@code
 * @Locked("invoice:{id}")
 * public CompletionStage<Invoice> settle(String id) {      // or CompletableFuture<Invoice>
 *   return payments.charge(id).thenApply(this::markPaid);  // the lock is held until this completes
 * }
 *
 * @Locked("invoice:{id}")
 * public Uni<Invoice> settleUni(String id) { ... }         // held from subscription to item
 * }</pre>
 *
 * <p>Returning the stage is not the end of such a method's work, so the lock is held until the
 * result completes:
 * <ul>
 *   <li>The call never blocks the caller, not even while the lock is busy: the lock is acquired
 *       asynchronously ({@link DistributedLock#acquireAsync}), and the call returns at once a
 *       {@code CompletableFuture} (also for a {@code CompletionStage} method) in place of the
 *       method's result. For a {@code Uni} method it returns a {@code Uni} that does all of this
 *       at <em>each subscription</em>: nothing happens before one, and a re-subscription (a
 *       retry) acquires and calls the method again.</li>
 *   <li>The method itself is called once the lock is held, and the returned future (or
 *       {@code Uni}) completes with the method's result after the lock was released: with its
 *       value, or its failure. A method that throws instead of returning a stage fails the
 *       result the same way.</li>
 *   <li>The lock is released when the method's result completes, fails, or is cancelled:
 *       cancelling the returned future (or cancelling the {@code Uni}'s subscription) cancels
 *       the method's result and releases the lock at once — work that ignores the cancellation
 *       runs on without the lock; cancelling before the lock was acquired gives up the wait, and
 *       the method does not run. If the release fails (the hold was lost while the work ran),
 *       the result fails with that error, or carries it as suppressed when the work failed too,
 *       as rule 1 says.</li>
 *   <li>{@code skipIfBusy} is allowed and completes the result with {@code null} without calling
 *       the method; an elapsed {@link #waitTime()} completes it exceptionally with
 *       {@link LockNotAcquiredException}; {@link #holdAtLeast()} counts from the method's start
 *       to the result's completion; with {@code fenced = true} the token is
 *       {@link FencingToken#current()} during the method's synchronous part (until it returns
 *       the stage or {@code Uni}; pass it on explicitly to the work that runs later). Modes,
 *       templates, configuration overrides, tracing and metrics are those of blocking
 *       methods.</li>
 *   <li>The hold belongs to the call, not to a thread ({@link LockHold}): it is <em>not
 *       reentrant</em>. An asynchronous method whose work calls another {@code @Locked} method on
 *       the same name waits for itself; so does one called by a thread that holds the same lock,
 *       if that thread then waits for its result.</li>
 *   <li><b>Threads.</b> The method's synchronous part runs on the thread that completes the
 *       acquisition: a thread of Holdfast's client (rarely the caller's own, when the lock was
 *       granted before the call had returned), and the result completes on a Holdfast thread
 *       too. In a Jakarta EE server the method is called with the caller's context as the
 *       server's Jakarta Concurrency {@code ContextService} carries it (its CDI bean, else
 *       {@code java:comp/DefaultContextService}: in WildFly the naming context, security
 *       identity and class loader), captured when the method is called. With Mutiny on the
 *       class path the method is called through Mutiny's callback
 *       decorators, as Mutiny's own callbacks are: where context propagation is installed
 *       (Quarkus) it sees the caller's context as captured when the method was called (for a
 *       {@code Uni}, at each subscription) — the CDI request context, the transaction and
 *       whatever else that propagation carries. Otherwise the caller's thread-bound context is
 *       not there: no CDI request context (a {@code @RequestScoped} bean fails with
 *       {@code ContextNotActiveException}), no transaction, no security identity, no MDC, no
 *       Vert.x context. Keep the synchronous part
 *       short and non-blocking (a blocked Holdfast thread delays other locks' callbacks), and
 *       move work off it: in a {@code Uni}, {@code emitOn}/{@code runSubscriptionOn} an
 *       executor; for a stage, the {@code *Async} methods with an executor — in a CDI container
 *       preferably its MicroProfile Context Propagation {@code ManagedExecutor} or its Jakarta
 *       Concurrency {@code ManagedExecutorService}, which carry the context along (in Quarkus, a {@code Uni} with {@code emitOn} or the injected
 *       {@code ManagedExecutor}). To run blocking code under a lock on a virtual thread
 *       (Quarkus {@code @RunOnVirtualThread}), use a blocking method instead: its lock belongs
 *       to the virtual thread.</li>
 * </ul>
 *
 * <p>Values can be overridden by MicroProfile Config, most specific first:
 * {@code holdfast."<fqcn>/<method>".locked.wait-time}, {@code holdfast."<fqcn>".locked.wait-time},
 * {@code holdfast.locked.wait-time}, then the annotation; likewise {@code lease-time},
 * {@code mode} ({@code EXCLUSIVE}, {@code READ}, {@code WRITE}, {@code FAIR}, any case),
 * {@code skip-if-busy} ({@code true} or {@code false}), {@code hold-at-least} (a duration;
 * {@code 0s} for no minimum) and {@code on-loss} ({@code nothing}, {@code interrupt},
 * {@code cancel}, any case). One key has no annotation member: {@code verify-before-commit}
 * ({@code local}, the default, or {@code redis}: how the commit guard checks the hold). The
 * overridden values are validated like the annotation's, naming the key, at deployment.
 * {@link #fenced()} and {@link #value()} are not configurable.
 */
@Inherited
@Documented
@InterceptorBinding
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.METHOD, ElementType.TYPE})
public @interface Locked {

  /**
   * The interceptor's priority, {@code Interceptor.Priority.PLATFORM_BEFORE + 150}: after the
   * platform's own early interceptors, before {@code @Transactional} at
   * {@code PLATFORM_BEFORE + 200}.
   */
  int PRIORITY = Interceptor.Priority.PLATFORM_BEFORE + 150;

  /**
   * The lock name, a template: {@code {sku}} is replaced by the parameter named {@code sku}
   * (compile with {@code -parameters}), {@code {0}} by the first parameter, using
   * {@code String.valueOf}; <code>&#123;&#123;</code> and <code>}}</code> stand for literal braces
   * (for a Redis Cluster hash tag, write {@code "order:{{{id}}}"}, which renders as
   * {@code order:{42}}). A {@code null} argument fails the call. Empty (the default) means
   * {@code <declaring class name>.<method name>}.
   *
   * @return the lock name template
   */
  @Nonbinding
  String value() default "";

  /**
   * How long to wait for another holder, as a duration ({@code 500ms}, {@code 2s}, {@code PT1M});
   * {@code 0s} means don't wait. Empty (the default) waits as long as it takes, like
   * {@link java.util.concurrent.locks.Lock#lock()}.
   *
   * @return the wait as a duration, or empty
   */
  @Nonbinding
  String waitTime() default "";

  /**
   * The lease, as a duration: the lock frees itself after it, whether or not the method is done.
   * Empty (the default) uses the watchdog: the lock is renewed until the method returns.
   *
   * @return the lease as a positive duration, or empty
   */
  @Nonbinding
  String leaseTime() default "";

  /**
   * Whether the lock is a {@link FencedLock}: the method can read its hold's fencing token with
   * {@link FencingToken#current()} and pass it to the resource it protects. The same lock as
   * without it (both exclude each other); not overridable by configuration, because the method's
   * code relies on it.
   *
   * @return whether the hold carries a fencing token
   */
  @Nonbinding
  boolean fenced() default false;

  /**
   * Which kind of lock guards the method: {@link Mode#EXCLUSIVE} (the default), the
   * {@link Mode#READ read} or {@link Mode#WRITE write} side of the name's
   * {@link DistributedReadWriteLock}, or the name's {@link Mode#FAIR fair} lock. Overridable by
   * configuration ({@code mode}).
   *
   * @return the kind of lock
   */
  @Nonbinding
  Mode mode() default Mode.EXCLUSIVE;

  /**
   * For a once-per-cluster job: when another holder has the lock, return at once without running
   * the method (logged at debug and counted) instead of waiting; with an explicit
   * {@link #waitTime()}, wait up to that first, then skip instead of throwing
   * {@link LockNotAcquiredException}. Only on {@code void} methods, and on asynchronous ones
   * (their result completes with {@code null}); another method with it fails the deployment
   * (also when configuration turns it on). Overridable by configuration
   * ({@code skip-if-busy}).
   *
   * @return whether a busy lock skips the call
   */
  @Nonbinding
  boolean skipIfBusy() default false;

  /**
   * Keeps the lock at least this long after the method started, as a duration ({@code 30s}):
   * instances whose schedulers fire a little apart then do not run the same occurrence twice.
   * The lock is released at the method's end if that is later. Empty (the default) or {@code 0s}
   * releases it when the method returns; a negative duration, or an explicit
   * {@link #leaseTime()} shorter than it, fails the deployment. Overridable by configuration
   * ({@code hold-at-least}).
   *
   * @return the minimum hold as a duration, or empty
   */
  @Nonbinding
  String holdAtLeast() default "";

  /**
   * What a loss of the lock does while the method still runs: {@link OnLoss#NOTHING} (the
   * default: the method runs to its end and the release reports the loss),
   * {@link OnLoss#INTERRUPT} the thread running a blocking method, or {@link OnLoss#CANCEL} the
   * result of an asynchronous one. Independent of the commit guard, which works in every mode.
   * {@code INTERRUPT} on an asynchronous method or {@code CANCEL} on a blocking one fails the
   * deployment, naming the method. Overridable by configuration ({@code on-loss}).
   *
   * @return what a loss does to the running call
   */
  @Nonbinding
  OnLoss onLoss() default OnLoss.NOTHING;

  /** What a lost lock does to a {@link Locked} call that is still running. */
  enum OnLoss {
    /** Nothing: the call runs to its end; the loss is reported ({@link LockLost}) and the
     * release throws, as without this member. */
    NOTHING,
    /**
     * Interrupts the thread running the (blocking) method once the loss is noticed: a blocking
     * call it makes throws {@link InterruptedException} or the like. The interrupt Holdfast set
     * is cleared before the call returns to its caller, so the thread goes back to its pool
     * without a pending interrupt; the method's own outcome (often an exception caused by the
     * interrupt) is what the caller gets, with the release's report of the loss.
     *
     * <p>"Noticed" means reported ({@link LockLost}): by a renewal that finds the lock gone (every
     * third of the watchdog timeout), or at the hold's local deadline when Redis cannot be
     * reached — so the method stops within about one renewal period after the loss, not at the
     * instant of it. What it does not cover: code that does not respond to interrupts (a busy
     * loop, most socket reads) runs on to its end; a thread that was already interrupted when
     * the loss is reported is left as it is (its interrupt is not Holdfast's and stays); a loss
     * of the lock before the method starts is reported by the release only.
     */
    INTERRUPT,
    /**
     * Cancels the result of an asynchronous ({@code CompletionStage}, {@code Uni}) method once
     * the loss is noticed (as for {@link #INTERRUPT}): the method's own future is cancelled (a
     * {@code Uni}'s subscription too), and the caller's stage completes with a
     * {@link java.util.concurrent.CancellationException} whose cause is a
     * {@link LockLostException} naming the lock and why it was lost ({@code get()} and
     * {@code join()} throw that {@code CancellationException} itself). Cancelling stops only work
     * that listens for it: a stage that was composed from other stages, or a task already
     * running on an executor, may run on, without the lock.
     */
    CANCEL
  }

  /** The kinds of lock a {@link Locked} method can hold. */
  enum Mode {
    /** The name's exclusive lock ({@link LockClient#getLock(String)}). */
    EXCLUSIVE,
    /** The read side of the name's read-write lock: shared with other readers. */
    READ,
    /** The write side of the name's read-write lock: no other reader or writer. */
    WRITE,
    /** The name's fair lock ({@link LockClient#getFairLock(String)}): first come, first served. */
    FAIR
  }
}
