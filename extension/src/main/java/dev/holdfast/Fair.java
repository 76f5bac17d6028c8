package dev.holdfast;

import jakarta.inject.Qualifier;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Qualifies an injected {@link DistributedLock} as the fair lock of its {@code @Named} name (see
 * {@link LockClient#getFairLock(String)}): waiters acquire in the order they started waiting.
 *
 * <pre>{@code
 * @Inject @Named("payouts") @Fair DistributedLock payouts;
 * @Inject @Named("payouts") @Fair java.util.concurrent.locks.Lock samePayouts;
 * @Inject @Named @Fair DistributedLock queue;          // on a field: the lock is named "queue"
 * @Inject @Named("payouts") DistributedLock plain;     // without @Fair: getLock("payouts")
 * }</pre>
 *
 * <p>Holdfast's CDI extensions add a {@code @Dependent} bean per name for the {@code @Named @Fair}
 * injection points of type {@code DistributedLock} or {@code java.util.concurrent.locks.Lock};
 * a plain {@code @Named} injection point of the same name still gets the plain lock. {@code @Fair}
 * without {@code @Named}, or on another type (a fair lock has no fencing tokens and no
 * read-write sides), fails the deployment. For methods, use
 * {@code @Locked(mode = Locked.Mode.FAIR)}.
 */
@Qualifier
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.FIELD, ElementType.PARAMETER, ElementType.METHOD, ElementType.TYPE})
public @interface Fair {
}
